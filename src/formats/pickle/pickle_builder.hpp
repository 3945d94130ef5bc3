// The unpickler's stack machine for plain data: the value stack, MARKs, the memo, and the
// list / tuple / dict opcodes, with Python's semantics (Lib/pickle.py _Unpickler,
// Modules/_pickle.c). It knows nothing about bytes; pickle.cpp decodes opcodes and calls it.
// Problems are thrown as BuildError and reported by the caller with the opcode and its offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "coopsim/formats/pickle.hpp"
#include "coopsim/formats/pickle_stream.hpp"
#include "coopsim/model/memory_cap.hpp"
#include "pickle_index_set.hpp"

namespace coopsim::pickle::detail {

struct BuildError {
  std::string problem;
};

// A dict pickled as EMPTY_DICT [MEMOIZE | BINPUT i | LONG_BINPUT i] MARK (key value)* SETITEMS
// whose keys are memo references and whose values are memo references, small ints, None, True or
// False: the shape of every entry of a memory snapshot's history after the first few. The
// reader decodes such a run of opcodes ahead (pickle_flat_dict.cpp) and the builder makes the
// dict in one step; anything else goes opcode by opcode.
struct FlatDict {
  static constexpr std::size_t kMaxItems = 32;  // keys and values: at most 16 entries (no hash index)
  enum class Put : std::uint8_t { None, Memoize, Index };
  enum class ItemKind : std::uint8_t { Get, Int, None, True, False };
  struct Item {
    ItemKind kind = ItemKind::None;
    std::uint64_t value = 0;  // Get: the memo index; Int: the integer's bits
  };
  Put put = Put::None;
  std::uint64_t put_index = 0;
  std::size_t size = 0;  // items used
  Item items[kMaxItems];
};

// Decodes a FlatDict from `bytes`, which follow an EMPTY_DICT opcode; returns the bytes it spans
// up to and including SETITEMS, or 0 where they do not have that shape.
std::size_t scan_flat_dict(std::string_view bytes, FlatDict& out);

class Builder {
 public:
  // `compare_budget`: node pairs that dict-key comparisons may visit in all (bounds the work
  // that crafted, equal-hashing tuple keys can cause). `memory`: limits.max_memory, charged
  // for every value, stack slot, memo entry, item and entry as it is made (values dropped
  // later are not given back: the count only grows).
  Builder(std::uint64_t compare_budget, MemoryCap& memory) : compare_budget_(compare_budget), memory_(memory) {}
  // Streaming (pickle_stream.hpp): only the memo entries in `fetched` (every index a GET reads
  // anywhere in the pickle) are kept, and `sink` is offered each item appended to a list. Both
  // outlive the builder; `fetched` is frozen (IndexSet::freeze).
  void stream(const IndexSet& fetched, ItemSink& sink) {
    fetched_ = &fetched;
    sink_ = &sink;
  }

  void push_scalar(std::shared_ptr<Value> v);    // None, bool, int, float, str, bytes
  void push_constant(std::shared_ptr<Value> v);  // a shared None, True or False: no new value
  void push_empty(Value::Kind kind);             // List, Dict or Tuple
  void mark();
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
  // Streaming only: makes the dict `d` describes, as EMPTY_DICT, its memo put, MARK, the items
  // and SETITEMS would, and pushes it. False, changing nothing, where any of those opcodes would
  // fail, count a new stack slot or memo entry, or meet equal keys: the caller then runs them one
  // by one (and reports their errors at their own offsets).
  bool flat_dict(const FlatDict& d);
  // Streaming only, with the list on top of the stack: MARK, `dicts` (each EMPTY_DICT and its
  // flat run, as flat_dict) and APPENDS in one step, offered to the sink's take_flat without
  // making the dicts. True where the sink took them all, leaving the list, memo and memory
  // count as the opcodes would; false, changing nothing, otherwise (the caller then runs the
  // opcodes, which make the dicts and offer them to take() one by one).
  bool flat_batch(std::span<const FlatDict> dicts);

 private:
  static constexpr std::size_t kIndexAfter = 16;  // dicts past this many entries get a hash index

  // Parser-side state of one list or dict, shared by every slot that refers to it.
  struct Container {
    std::uint32_t depth = 1;
    bool complete = false;                  // placed inside another container: no further mutation
    std::vector<std::uint64_t> key_hashes;  // dicts: hash of each entry's key (a flat dict's: on demand)
    std::unique_ptr<std::unordered_multimap<std::uint64_t, std::size_t>> index;
    // Lists: items the sink took since the list's last value, not written out yet: they become
    // taken() only when a value follows them (pickle_stream.hpp).
    std::uint64_t taken_pending = 0;
  };
  struct Slot {  // 48 bytes: one per stack entry and kept memo entry
    std::shared_ptr<Value> value;
    std::shared_ptr<Container> container;  // lists and dicts, shared by every slot of it
    std::uint64_t hash = 0;                // when hashable
    std::uint32_t depth = 1;               // scalars and tuples; lists and dicts: Container (or frozen)
    bool hashable = true;
    // A complete container's depth, copied into `depth` (it cannot change any more): reading
    // it needs no visit to the Container (flat_batch, millions of references to frames lists).
    bool frozen = false;
  };

  // Bytes counted per part (pickle.hpp, "Memory"): a value (make_shared: the Value, the
  // control block and the allocation's header), a reference held by a list or tuple, a dict
  // entry with its key hash and hash-index node, a list's or dict's parser state.
  static constexpr std::uint64_t kValue = sizeof(Value) + 32;
  static constexpr std::uint64_t kItem = sizeof(ValuePtr);
  static constexpr std::uint64_t kEntry = 2 * sizeof(ValuePtr) + sizeof(std::uint64_t) + 48;
  static constexpr std::uint64_t kContainer = sizeof(Container) + 16;
  static constexpr std::uint64_t kSparseMemo = sizeof(Slot) + 48;

  // The memo slots of a flat dict's keys and Get values (nullptr for the others), the depth the
  // dict would have and its number of ints; false where the general way must make it (a key
  // that is not a kept str, equal keys, a value not kept, too deep).
  // With `keys`, a dict whose keys are the memo indices of the last one resolved through it
  // reuses that resolution.
  struct FlatKeys {
    std::size_t pairs = 0;  // 0: none yet
    std::uint32_t depth = 0;
    std::uint64_t index[FlatDict::kMaxItems / 2] = {};
    const Slot* slot[FlatDict::kMaxItems / 2] = {};
  };
  bool resolve_flat(const FlatDict& d, const Slot** refs, std::uint32_t& depth, std::uint64_t& ints,
                    FlatKeys* keys = nullptr) const;
  // Counts `bytes` more, or throws BuildError with the budget's problem.
  void hold(std::uint64_t bytes);
  // Counts a new value of `text_bytes` bytes of text, and a stack slot if the stack grows.
  void hold_value(std::uint64_t text_bytes);
  // Pushes onto the stack (or the marks), counting each slot the first time it is used.
  void push_slot(Slot s);
  void hold_slot();

  std::size_t fence() const { return marks_.empty() ? 0 : marks_.back(); }
  void need(std::size_t n) const;
  std::size_t take_mark();  // pops the last MARK; returns where its values start
  static std::uint32_t depth_of(const Slot& s) { return s.container && !s.frozen ? s.container->depth : s.depth; }
  void check_depth(std::size_t depth) const;
  // Records that `child` goes inside a container; returns the container depth it implies.
  std::uint32_t adopt(const Slot& child);
  Container& mutable_target(const Slot& target, Value::Kind kind, const char* what);
  // Both move the item's (key's, value's) reference out of its slot: callers drop those slots next.
  void insert_item(const Slot& list, Slot& item);
  void insert_entry(const Slot& dict, Slot& key, Slot& value);
  void build_tuple(std::size_t first);
  void put(std::uint64_t index, const Slot& slot);
  std::uint64_t memo_entries() const;  // distinct indices set: Python's len(memo)
  // Bytes counted for `v` and, when the caller holds its only reference, for everything only it
  // holds: what dropping it gives back (streaming).
  std::uint64_t held_by(const std::shared_ptr<Value>& v);

  std::vector<Slot> stack_;
  std::vector<std::size_t> marks_;
  std::vector<Slot> memo_;                     // indices 0..size-1
  std::map<std::uint64_t, Slot> memo_sparse_;  // indices past memo_.size() (crafted pickles)
  // Streaming: memo entries kept (those some GET reads) and every index set so far.
  std::vector<Slot> memo_kept_;  // by rank in *fetched_
  IndexSet memo_set_;
  std::uint64_t memo_count_ = 0;
  const IndexSet* fetched_ = nullptr;
  ItemSink* sink_ = nullptr;
  std::uint64_t compare_budget_;
  MemoryCap& memory_;
  std::size_t stack_peak_ = 0, marks_peak_ = 0;  // slots counted so far (vectors keep capacity)
  std::vector<const Value*> held_work_;          // held_by's walk, kept: it runs once per taken item
  // flat_batch's view of its dicts for the sink (capacity reused from batch to batch).
  std::vector<FlatValue> flat_items_;
  std::vector<const Slot*> flat_refs_;
  std::vector<std::uint8_t> flat_sizes_;
};

}  // namespace coopsim::pickle::detail
