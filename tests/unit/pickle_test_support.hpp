// Helpers and hand-worked samples shared by the pickle reader's tests.
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "coopsim/base/error.hpp"
#include "coopsim/base/limits.hpp"
#include "coopsim/formats/pickle.hpp"
#include "coopsim/formats/pickle_stream.hpp"

namespace pickle_test {

using namespace std::string_literals;

inline coopsim::pickle::ValuePtr P(const std::string& bytes) { return coopsim::pickle::parse(bytes, "t.pkl"); }

// Streaming sinks (coopsim/formats/pickle_stream.hpp): one that takes no item, one that takes all.
struct TakeNone : coopsim::pickle::ItemSink {
  bool take(const coopsim::pickle::ValuePtr&, const coopsim::pickle::Value&) override { return false; }
};
struct TakeAll : coopsim::pickle::ItemSink {
  bool take(const coopsim::pickle::ValuePtr&, const coopsim::pickle::Value&) override { return true; }
};

// The message of the error that reading `bytes` with `read` must throw.
template <class Read>
std::string error_from(const std::string& bytes, Read read) {
  try {
    read();
  } catch (const coopsim::pickle::PickleError& e) {
    return e.what();
  }
  FAIL("no PickleError for a pickle of " << bytes.size() << " bytes");
  return {};
}

// The message of the error that parsing `bytes` must throw; streaming them must throw the same,
// whether the sink takes list items or not.
inline std::string error_of(const std::string& bytes) {
  const std::string parsed = error_from(bytes, [&] { P(bytes); });
  for (const bool take_all : {false, true}) {
    coopsim::MemoryCap memory(coopsim::Limits::default_max_memory());
    TakeNone none;
    TakeAll all;
    coopsim::pickle::ItemSink& sink = take_all ? static_cast<coopsim::pickle::ItemSink&>(all) : none;
    CHECK(error_from(bytes, [&] { coopsim::pickle::stream(bytes, "t.pkl", memory, sink); }) == parsed);
  }
  return parsed;
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
