// Private to src/output: a minimal pickle writer for plain data (protocol 4, no framing), used
// for PyTorch memory snapshots. It emits only opcodes that coopsim's own reader
// (include/coopsim/formats/pickle.hpp) and the unpickler of PyTorch's MemoryViz.js accept:
// PROTO, EMPTY_DICT, EMPTY_LIST, MARK, SETITEMS, APPENDS, TUPLE2, NEWTRUE, NEWFALSE, BININT1,
// BININT2, BININT, LONG1, SHORT_BINUNICODE, BINUNICODE, MEMOIZE, BINGET, LONG_BINGET, STOP
// (encodings from the Python pickle specification, Lib/pickletools.py). Containers are filled
// in batches of 1000 items, as Python's pickler does, so no opcode pops an unbounded stack
// slice. Every string is memoized, so repeated keys cost a BINGET.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace coopsim::pickle {

class Writer {
 public:
  Writer();
  // Values: into the open container (a dict takes key, value, key, value, ...) or as the root.
  void boolean(bool v);
  void integer(std::int64_t v);
  void text(std::string_view s);
  void int_pair(std::int64_t a, std::int64_t b);  // a 2-tuple of ints
  void begin_dict();
  void begin_list();
  void end();  // closes the innermost open dict or list
  // The pickle's bytes (STOP appended). Every container must be closed.
  std::string finish();

 private:
  struct Open {
    bool dict = false;
    std::uint32_t pending = 0;  // values since the batch's MARK
  };
  void before_value();
  void after_value();
  void raw_int(std::int64_t v);
  void raw_u32(std::uint32_t v);
  std::string out_;
  std::vector<Open> open_;
  std::map<std::string, std::uint32_t, std::less<>> memo_;
};

}  // namespace coopsim::pickle
