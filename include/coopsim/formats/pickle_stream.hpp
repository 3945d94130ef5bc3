// Streaming reading of large plain-data pickles (a PyTorch memory snapshot's history holds
// millions of entries): the same opcodes, rules and errors as pickle::parse()
// (coopsim/formats/pickle.hpp), but a consumer takes list items as they are appended, so the
// whole tree never exists at once.
//
// Two passes over the input. The first walks the opcodes only and records which memo indices a
// GET reads anywhere (and, for a file, the decompressed size); the second runs the unpickler
// keeping just those memo entries (a pickler memoizes every dict, list and string, but fetches
// again only the shared ones: repeated keys, frames tables) and offers each item appended to a
// list to an ItemSink. An item the sink takes is dropped (its memory is given back to the
// budget); the list holds taken() in its place when an item the sink did not take follows it,
// and leaves out the run of taken items at its end (the sink, which took them, knows how many:
// a history of millions of entries is no list of millions of placeholders). Everything else is
// built as parse() builds it. Memory is then that of the values kept, the shared memo entries and what the sink keeps;
// a file is read in chunks, not held.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "coopsim/formats/pickle.hpp"
#include "coopsim/model/memory_cap.hpp"

namespace coopsim::pickle {

// One key or value of a flat dict offered to ItemSink::take_flat: a memo reference (`ref`, held
// by the memo, so shared) or an immediate int, None or bool.
struct FlatValue {
  const std::shared_ptr<Value>* ref = nullptr;
  Value::Kind kind = Value::Kind::None;  // of the immediate: Int, None or Bool
  std::int64_t integer = 0;
  bool boolean = false;
};

class ItemSink {
 public:
  virtual ~ItemSink() = default;
  // `item` is about to be appended to `list`; both stay as they are from now on (an item placed
  // in a container is complete), but `list` may receive more items. True takes the item.
  virtual bool take(const ValuePtr& list, const Value& item) = 0;
  // A batch of dicts about to be appended to `list` in order, none of them made yet: dict i is
  // `sizes[i]` (key, value) pairs of `items`, taken in turn; every key is a distinct str of the
  // memo. True takes them all, exactly as take() would take each made dict; false takes none,
  // changing nothing, and the dicts are then made and offered to take() one by one.
  virtual bool take_flat(const ValuePtr& /*list*/, std::span<const FlatValue> /*items*/,
                         std::span<const std::uint8_t> /*sizes*/) {
    return false;
  }
};

// What a list holds in place of each item its sink took, except those at its end: one shared
// None, told apart from a real None by identity.
const ValuePtr& taken();

// Reads one pickle from memory or from a file (gzip detected by magic bytes; at most
// `max_bytes` decompressed bytes, limits.max_input_bytes) with `sink` taking list items. The
// errors are those of parse() / parse_file(), at the same offsets.
ValuePtr stream(std::string_view bytes, const std::string& name, MemoryCap& memory, ItemSink& sink);
ValuePtr stream_file(const std::string& path, std::uint64_t max_bytes, MemoryCap& memory, ItemSink& sink);

}  // namespace coopsim::pickle
