// coopsim's own allow-list pickle reader: plain data only, nothing is ever imported or called.
//
// Encodings follow the Python pickle protocol specification (Lib/pickletools.py, and the
// unpickler in Lib/pickle.py / Modules/_pickle.c, whose behaviour it copies where the spec is
// silent). The allowed subset: the plain-data opcodes a torch.cuda.memory._dump_snapshot()
// pickle uses (dict / list / tuple / str / int / float / bool / None, protocol 4), below.
//
// Accepted: protocols 2 to 5 (a pickle without PROTO is read as well: its opcodes are checked
// one by one all the same) and exactly the plain-data opcodes: PROTO FRAME STOP MARK POP POP_MARK
// DUP NONE NEWTRUE NEWFALSE INT BININT BININT1 BININT2 LONG LONG1 LONG4 FLOAT BINFLOAT STRING
// BINSTRING SHORT_BINSTRING UNICODE BINUNICODE SHORT_BINUNICODE BINUNICODE8 BINBYTES
// SHORT_BINBYTES BINBYTES8 BYTEARRAY8 EMPTY_LIST APPEND APPENDS LIST EMPTY_TUPLE TUPLE TUPLE1
// TUPLE2 TUPLE3 EMPTY_DICT DICT SETITEM SETITEMS MEMOIZE PUT BINPUT LONG_BINPUT GET BINGET
// LONG_BINGET. Every other opcode is refused with an error naming it (GLOBAL, STACK_GLOBAL,
// REDUCE, BUILD, INST, OBJ, NEWOBJ, NEWOBJ_EX, PERSID, BINPERSID, EXT1/2/4 would import or
// call code; sets and out-of-band buffers are not plain data here; unknown bytes are unknown).
//
// Decisions where Python is more permissive or the spec leaves a choice:
// * STRING / BINSTRING / SHORT_BINSTRING (Python 2 str) give a String, decoded as ASCII the way
//   Python 3's default Unpickler (encoding="ASCII") does; a non-ASCII byte is an error, as there.
// * BYTEARRAY8 gives Bytes (the mutability of a bytearray does not matter to plain data).
// * Text in UNICODE / BINUNICODE* must be UTF-8 as Python decodes it ("surrogatepass": encoded
//   lone surrogates are accepted and kept as their three bytes).
// * INT / LONG / GET / PUT text arguments must be plain decimal ("-" allowed for INT and LONG,
//   "L" suffix for LONG, no leading zeros): what the pickler writes. CPython's readers disagree
//   with each other on other forms (strtol base 0 reads "010" as 8, int(x, 0) refuses it).
// * Integers must fit in int64 (LONG1 / LONG4 may use redundant sign bytes).
// * Dict keys follow Python's equality (1 == 1.0 == True, tuples element-wise, NaN only equals
//   itself): a repeated key replaces the value in place and keeps the first key and position.
//   Unhashable keys (a list, a dict, or a tuple holding one) are accepted as plain values, each
//   as its own entry (Python would raise TypeError).
// * Memo entries are shared objects: a list or dict fetched from the memo is the same object, and
//   appending to it shows wherever it is referenced. A list or dict that has been placed inside
//   another container is complete: appending or setting items in it afterwards is refused. The
//   pickler never does that for acyclic data, and the rule makes reference cycles impossible
//   (a container that contains itself is refused too).
// * Strict end: STOP must leave exactly one value and no open MARK, and no byte may follow STOP
//   (Python ignores extra stack items and, in loads(), trailing bytes).
// * Nesting deeper than kMaxDepth is refused, so that destroying a Value (shared_ptr chains
//   destroy recursively) and walking one recursively stay within a bounded native stack
//   (10000 levels of lists take under 512 KiB to destroy in an -O2 build).
// * Memory is proportional to the input (length fields are checked against the bytes left
//   before anything is allocated); parse_file() reads at most kMaxInputBytes.
// * Memory (limits.max_memory, coopsim/model/memory_cap.hpp): the bytes read, every value made
//   (sizeof(Value) + 32, plus text past 15 bytes), every stack slot, mark and memo entry the
//   first time it is used, every list or tuple item (16) and dict entry (88) are counted as
//   they are made, and parsing stops with "... (limits.max_memory)" before the budget is passed.
//   Values dropped later are not given back. None, True and False are shared constants (a
//   list of 10^8 Nones holds 10^8 references, not 10^8 values). A value fetched from the memo
//   is shared, never copied: readers that walk the tree must count what they expand
//   (docs/limits.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "coopsim/base/error.hpp"
#include "coopsim/model/memory_cap.hpp"

namespace coopsim::pickle {

struct Value {
  enum class Kind : std::uint8_t { None, Bool, Int, Float, String, Bytes, List, Tuple, Dict };
  Kind kind = Kind::None;
  bool boolean = false;
  std::int64_t integer = 0;                         // Int (values outside int64 are an error)
  double real = 0.0;                                // Float
  std::string text;                                 // String (UTF-8) and Bytes
  std::vector<std::shared_ptr<const Value>> items;  // List, Tuple
  std::vector<std::pair<std::shared_ptr<const Value>, std::shared_ptr<const Value>>>
      entries;  // Dict, in insertion order
  // Dict lookup by string key (nullptr when absent or not a Dict).
  [[nodiscard]] const Value* get(std::string_view key) const;
  [[nodiscard]] bool is(Kind k) const { return kind == k; }
  // "None", "bool", "int", "float", "str", "bytes", "list", "tuple", "dict" (Python's names).
  [[nodiscard]] static std::string_view kind_name(Kind k);
};
using ValuePtr = std::shared_ptr<const Value>;

// Deepest accepted nesting: a scalar or an empty container is 1, a container is 1 + its deepest
// item. Python's own pickler cannot write much deeper than its recursion limit (1000 by default).
inline constexpr std::size_t kMaxDepth = 10000;
// parse_file() refuses files that decompress to more than this.
inline constexpr std::size_t kMaxInputBytes = std::size_t{1} << 30;

// A problem in a pickle. what() == "<name>: byte <offset>: <problem>".
class PickleError : public Error {
 public:
  PickleError(const std::string& name, std::uint64_t offset, const std::string& problem);
  std::uint64_t offset() const { return offset_; }
  const std::string& problem() const { return problem_; }

 private:
  std::uint64_t offset_;
  std::string problem_;
};

// Parse one pickle from memory. `name` prefixes errors. Throws coopsim::Error with
// "<name>: byte <offset>: <problem>". The values are counted in `memory` (without it, in a
// budget of the default limits.max_memory).
ValuePtr parse(std::string_view bytes, const std::string& name, MemoryCap& memory);
ValuePtr parse(std::string_view bytes, const std::string& name);
// Read a file (gzip detected by magic bytes, via zlib) and parse it. Refuses more than
// kMaxInputBytes or `max_bytes` (limits.max_input_bytes) decompressed bytes, whichever is less.
// The bytes read count in `memory` too.
ValuePtr parse_file(const std::string& path, std::uint64_t max_bytes, MemoryCap& memory);
ValuePtr parse_file(const std::string& path, std::uint64_t max_bytes = kMaxInputBytes);

}  // namespace coopsim::pickle
