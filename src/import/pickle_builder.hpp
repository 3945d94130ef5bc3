// The unpickler's stack machine for plain data: the value stack, MARKs, the memo, and the
// list / tuple / dict opcodes, with Python's semantics (Lib/pickle.py _Unpickler,
// Modules/_pickle.c). It knows nothing about bytes; pickle.cpp decodes opcodes and calls it.
// Problems are thrown as BuildError and reported by the caller with the opcode and its offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "coopsim/import/pickle.hpp"

namespace coopsim::pickle::detail {

struct BuildError {
  std::string problem;
};

class Builder {
 public:
  // `compare_budget`: node pairs that dict-key comparisons may visit in all (bounds the work
  // that crafted, equal-hashing tuple keys can cause).
  explicit Builder(std::uint64_t compare_budget) : compare_budget_(compare_budget) {}

  void push_scalar(std::shared_ptr<Value> v);  // None, bool, int, float, str, bytes
  void push_empty(Value::Kind kind);           // List, Dict or Tuple
  void mark() { marks_.push_back(stack_.size()); }
  void pop();       // POP: the top value, or the MARK when nothing is above it
  void pop_mark();  // POP_MARK
  void dup();
  void tuple_from_mark();
  void tuple_of(std::size_t n);  // TUPLE1..3
  void list_from_mark();
  void dict_from_mark();
  void append();
  void appends();
  void set_item();
  void set_items();
  void memoize();  // MEMOIZE: index = number of memo entries
  void memo_put(std::uint64_t index);
  void memo_get(std::uint64_t index);
  bool has_open_mark() const { return !marks_.empty(); }
  // STOP: exactly one value and no open MARK.
  ValuePtr finish();

 private:
  static constexpr std::uint32_t kNoContainer = 0xffffffffU;
  static constexpr std::size_t kIndexAfter = 16;  // dicts past this many entries get a hash index

  struct Slot {
    std::shared_ptr<Value> value;
    std::uint64_t hash = 0;                   // when hashable
    std::uint32_t depth = 1;                  // scalars and tuples; lists and dicts: Container
    std::uint32_t container = kNoContainer;   // lists and dicts: index into containers_
    bool hashable = true;
  };
  // Parser-side state of one list or dict, shared by every slot that refers to it.
  struct Container {
    std::uint32_t depth = 1;
    bool complete = false;  // placed inside another container: no further mutation
    std::vector<std::uint64_t> key_hashes;  // dicts: hash of each entry's key
    std::unique_ptr<std::unordered_multimap<std::uint64_t, std::size_t>> index;
  };

  std::size_t fence() const { return marks_.empty() ? 0 : marks_.back(); }
  void need(std::size_t n) const;
  std::size_t take_mark();  // pops the last MARK; returns where its values start
  std::uint32_t depth_of(const Slot& s) const;
  void check_depth(std::size_t depth) const;
  // Records that `child` goes inside a container; returns the container depth it implies.
  std::uint32_t adopt(const Slot& child);
  Container& mutable_target(const Slot& target, Value::Kind kind, const char* what);
  void insert_item(const Slot& list, const Slot& item);
  void insert_entry(const Slot& dict, const Slot& key, const Slot& value);
  void build_tuple(std::size_t first);
  void put(std::uint64_t index, const Slot& slot);

  std::vector<Slot> stack_;
  std::vector<std::size_t> marks_;
  std::vector<Slot> memo_;                   // indices 0..size-1
  std::map<std::uint64_t, Slot> memo_sparse_;  // indices past memo_.size() (crafted pickles)
  std::vector<Container> containers_;
  std::uint64_t compare_budget_;
};

}  // namespace coopsim::pickle::detail
