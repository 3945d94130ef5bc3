// Private to src/output: a minimal pickle writer for plain data (protocol 4, no framing), used
// for PyTorch memory snapshots. It emits only opcodes that coopsim's own reader
// (include/coopsim/formats/pickle.hpp) and the unpickler of PyTorch's MemoryViz.js accept:
// PROTO, EMPTY_DICT, EMPTY_LIST, MARK, SETITEMS, APPENDS, TUPLE2, NEWTRUE, NEWFALSE, BININT1,
// BININT2, BININT, LONG1, SHORT_BINUNICODE, BINUNICODE, MEMOIZE, BINGET, LONG_BINGET, STOP
// (encodings from the Python pickle specification, Lib/pickletools.py). Containers are filled
// in batches of 1000 items, as Python's pickler does, so no opcode pops an unbounded stack
// slice. Every string is memoized, so repeated keys cost a BINGET; a list made with
// begin_shared_list() is memoized too and written again by shared(), so many dicts can hold the
// same list (one object after unpickling, as Python's pickler shares it).
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
  // A list that later values may refer to: returns its memo index for shared(). Fill and end()
  // it as any list.
  std::uint32_t begin_shared_list();
  // The list begun by begin_shared_list() that returned `memo_index` (closed by then), again.
  void shared(std::uint32_t memo_index);
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
  void get(std::uint32_t memo_index);
  std::uint32_t memoize();
  std::string out_;
  std::vector<Open> open_;
  std::map<std::string, std::uint32_t, std::less<>> memo_;  // string -> memo index
  std::uint32_t memo_size_ = 0;                             // MEMOIZE opcodes written
};

}  // namespace coopsim::pickle
