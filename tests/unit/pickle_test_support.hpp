// Helpers and hand-worked samples shared by the pickle reader's tests.
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "coopsim/base/error.hpp"
#include "coopsim/formats/pickle.hpp"

namespace pickle_test {

using namespace std::string_literals;

inline coopsim::pickle::ValuePtr P(const std::string& bytes) { return coopsim::pickle::parse(bytes, "t.pkl"); }

// The message of the error that parsing `bytes` must throw.
inline std::string error_of(const std::string& bytes) {
  try {
    P(bytes);
  } catch (const coopsim::pickle::PickleError& e) {
    return e.what();
  }
  FAIL("no PickleError for a pickle of " << bytes.size() << " bytes");
  return {};
}

// pickle.dumps({'a': [1, 2], 'b': (None, True)}, protocol=2), worked by hand:
// PROTO 2, EMPTY_DICT, BINPUT 0, MARK, BINUNICODE 'a', BINPUT 1, EMPTY_LIST, BINPUT 2, MARK,
// BININT1 1, BININT1 2, APPENDS, BINUNICODE 'b', BINPUT 3, NONE, NEWTRUE, TUPLE2, BINPUT 4,
// SETITEMS, STOP (38 bytes).
inline const std::string kProto2Sample =
    "\x80\x02}q\x00(X\x01\x00\x00\x00"
    "aq\x01]q\x02(K\x01K\x02"
    "eX\x01\x00\x00\x00"
    "bq\x03N\x88\x86q\x04u."s;

// pickle.dumps({'segments': [], 'device_traces': [[]]}, protocol=4): PROTO 4, FRAME 39 (the 39
// bytes after it, STOP included), EMPTY_DICT, MEMOIZE, MARK, SHORT_BINUNICODE 'segments',
// MEMOIZE, EMPTY_LIST, MEMOIZE, SHORT_BINUNICODE 'device_traces', MEMOIZE, EMPTY_LIST, MEMOIZE,
// EMPTY_LIST, MEMOIZE, APPEND, SETITEMS, STOP.
inline const std::string kProto4Sample =
    "\x80\x04\x95\x27\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x08segments\x94]\x94\x8c\x0d"
    "device_traces"
    "\x94]\x94]\x94"
    "au."s;

}  // namespace pickle_test
