// Stack machine for plain-data pickles (see pickle_builder.hpp). Underflow follows CPython's
// C unpickler: opcodes never take values from below the last MARK (Modules/_pickle.c, "fence").
#include "pickle_builder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "pickle_detail.hpp"
#include "pickle_pool.hpp"

namespace coopsim::pickle::detail {

using Kind = Value::Kind;

namespace {
[[noreturn]] void fail(std::string problem) { throw BuildError{std::move(problem)}; }

}  // namespace

void Builder::hold(std::uint64_t bytes) {
  if (!memory_.add(bytes)) fail(memory_.problem());
}

void Builder::hold_value(std::uint64_t text_bytes) { hold(kValue + memory_cost::text(text_bytes)); }

void Builder::hold_slot() {
  if (stack_.size() < stack_peak_) return;
  if (!memory_.fits_append(stack_)) fail(memory_.problem());
  hold(sizeof(Slot));
  ++stack_peak_;
}

void Builder::push_slot(Slot s) {
  hold_slot();
  stack_.push_back(std::move(s));
}

void Builder::mark() {
  if (marks_.size() == marks_peak_) {
    if (!memory_.fits_append(marks_)) fail(memory_.problem());
    hold(sizeof(std::size_t));
    ++marks_peak_;
  }
  marks_.push_back(stack_.size());
}

void Builder::need(std::size_t n) const {
  const std::size_t have = stack_.size() - fence();
  if (have < n) {
    fail(fmt::format("stack underflow: needs {} value{} above the last MARK, found {}", n, n == 1 ? "" : "s", have));
  }
}

std::size_t Builder::take_mark() {
  if (marks_.empty()) fail("no MARK before it (MARK misuse)");
  const std::size_t first = marks_.back();
  marks_.pop_back();
  return first;
}

void Builder::check_depth(std::size_t depth) const {
  if (depth > kMaxDepth) fail(fmt::format("nesting deeper than {} levels; refusing", kMaxDepth));
}

std::uint32_t Builder::adopt(const Slot& child) {
  if (child.container) {
    Container& c = *child.container;
    c.complete = true;
    c.key_hashes = {};  // no more insertions: the key lookup state can go
    c.index.reset();
  }
  const std::uint32_t depth = depth_of(child) + 1;
  check_depth(depth);
  return depth;
}

void Builder::push_scalar(std::shared_ptr<Value> v) {
  hold_value(v->text.size());
  push_constant(std::move(v));
}

void Builder::push_constant(std::shared_ptr<Value> v) {
  Slot s;
  s.hash = hash_scalar(*v);
  s.value = std::move(v);
  push_slot(std::move(s));
}

void Builder::push_empty(Kind kind) {
  hold_value(0);
  Slot s;
  s.value = make_recycled<Value>();
  s.value->kind = kind;
  if (kind == Kind::Tuple) {
    s.hash = tuple_hash_seed(0);
  } else {
    s.hashable = false;
    hold(kContainer);
    s.container = make_recycled<Container>();
  }
  push_slot(std::move(s));
}

void Builder::pop() {
  // Python pops the MARK itself when no value lies above it.
  if (!marks_.empty() && marks_.back() == stack_.size()) {
    marks_.pop_back();
    return;
  }
  need(1);
  stack_.pop_back();
}

void Builder::pop_mark() { stack_.resize(take_mark()); }

void Builder::dup() {
  need(1);
  push_slot(stack_.back());
}

void Builder::build_tuple(std::size_t first) {
  hold_value(0);
  hold(kItem * (stack_.size() - first));
  Slot t;
  t.value = make_recycled<Value>();
  t.value->kind = Kind::Tuple;
  t.value->items.reserve(stack_.size() - first);
  t.hash = tuple_hash_seed(stack_.size() - first);
  for (std::size_t i = first; i < stack_.size(); ++i) {
    Slot& item = stack_[i];
    t.depth = std::max(t.depth, adopt(item));
    t.hashable = t.hashable && item.hashable;
    t.hash = hash_combine(t.hash, item.hash);
    t.value->items.push_back(std::move(item.value));  // the slot is dropped next: no count up and down
  }
  stack_.resize(first);
  push_slot(std::move(t));
}

void Builder::tuple_from_mark() { build_tuple(take_mark()); }

void Builder::tuple_of(std::size_t n) {
  need(n);
  build_tuple(stack_.size() - n);
}

void Builder::list_from_mark() {
  const std::size_t first = take_mark();
  push_empty(Kind::List);
  const Slot list = stack_.back();
  for (std::size_t i = first; i + 1 < stack_.size(); ++i) insert_item(list, stack_[i]);
  stack_.erase(stack_.begin() + static_cast<std::ptrdiff_t>(first), stack_.end() - 1);
}

void Builder::dict_from_mark() {
  const std::size_t first = take_mark();
  if ((stack_.size() - first) % 2 != 0) fail("odd number of items for DICT");
  push_empty(Kind::Dict);
  const Slot dict = stack_.back();
  for (std::size_t i = first; i + 2 < stack_.size(); i += 2) insert_entry(dict, stack_[i], stack_[i + 1]);
  stack_.erase(stack_.begin() + static_cast<std::ptrdiff_t>(first), stack_.end() - 1);
}

Builder::Container& Builder::mutable_target(const Slot& target, Kind kind, const char* what) {
  if (target.value->kind != kind) {
    fail(fmt::format("needs a {} below the {}, found a {}", Value::kind_name(kind), what,
                     Value::kind_name(target.value->kind)));
  }
  Container& c = *target.container;
  if (c.complete) {
    fail(
        fmt::format("the {} was already placed inside another container; changing it afterwards is refused "
                    "(that is how reference cycles are built)",
                    Value::kind_name(kind)));
  }
  return c;
}

void Builder::insert_item(const Slot& list, Slot& item) {
  Container& c = mutable_target(list, Kind::List, "values");
  if (item.container == list.container) fail("would put the list inside itself (a reference cycle); refusing");
  const std::uint32_t depth = adopt(item);
  c.depth = std::max(c.depth, depth);
  if (!memory_.fits_append(list.value->items)) fail(memory_.problem());
  hold(kItem);
  if (sink_ != nullptr && sink_->take(list.value, *item.value)) {
    // Given back when the stack lets go of it (unless the memo or another container keeps it).
    memory_.remove(held_by(item.value));
    ++c.taken_pending;
    return;
  }
  if (c.taken_pending != 0) {
    list.value->items.insert(list.value->items.end(), static_cast<std::size_t>(c.taken_pending), taken());
    c.taken_pending = 0;
  }
  // Moved: every caller drops the item's slot next, so the reference changes hands without an
  // atomic count up and down (tens of millions of them in a large snapshot).
  list.value->items.push_back(std::move(item.value));
}

void Builder::append() {
  need(2);
  insert_item(stack_[stack_.size() - 2], stack_.back());
  stack_.pop_back();
}

void Builder::appends() {
  const std::size_t first = take_mark();
  if (first <= fence()) fail("stack underflow: no list below the MARK");
  const Slot& list = stack_[first - 1];
  mutable_target(list, Kind::List, "MARK");
  grow_for(list.value->items, stack_.size() - first);
  for (std::size_t i = first; i < stack_.size(); ++i) insert_item(list, stack_[i]);
  stack_.resize(first);
}

void Builder::insert_entry(const Slot& dict, Slot& key, Slot& value) {
  Container& c = mutable_target(dict, Kind::Dict, "key and value");
  if (key.container == dict.container || value.container == dict.container) {
    fail("would put the dict inside itself (a reference cycle); refusing");
  }
  const std::uint32_t depth = std::max(adopt(key), adopt(value));
  c.depth = std::max(c.depth, depth);
  auto& entries = dict.value->entries;
  // A flat dict (pickle_flat_dict.cpp) leaves its keys' hashes to the first insertion after it:
  // its keys are strings, hashed from their text.
  while (c.key_hashes.size() < entries.size()) {
    c.key_hashes.push_back(hash_scalar(*entries[c.key_hashes.size()].first));
  }
  // Python's d[key] = value: an equal key keeps its place (and its first key object).
  auto same_key = [&](std::size_t i) {
    const auto equal = key_equal(entries[i].first.get(), key.value.get(), compare_budget_);
    if (!equal) fail("dict key comparisons exceed the work limit; refusing");
    return *equal;
  };
  if (key.hashable) {
    if (c.index) {
      const auto [lo, hi] = c.index->equal_range(key.hash);
      for (auto it = lo; it != hi; ++it) {
        if (same_key(it->second)) {
          entries[it->second].second = std::move(value.value);
          return;
        }
      }
    } else {
      for (std::size_t i = 0; i < entries.size(); ++i) {
        if (c.key_hashes[i] == key.hash && same_key(i)) {
          entries[i].second = std::move(value.value);
          return;
        }
      }
    }
  }
  // Unhashable keys (Python would raise TypeError) are kept as their own entries.
  if (!memory_.fits_append(entries)) fail(memory_.problem());
  hold(kEntry);
  // Moved, as in insert_item: the callers drop both slots next.
  entries.emplace_back(std::move(key.value), std::move(value.value));
  c.key_hashes.push_back(key.hashable ? key.hash : 0);
  if (!key.hashable) return;
  if (c.index) {
    c.index->emplace(key.hash, entries.size() - 1);
  } else if (entries.size() > kIndexAfter) {
    c.index = std::make_unique<std::unordered_multimap<std::uint64_t, std::size_t>>();
    for (std::size_t i = 0; i < entries.size(); ++i) c.index->emplace(c.key_hashes[i], i);
  }
}

void Builder::set_item() {
  need(3);
  const std::size_t n = stack_.size();
  insert_entry(stack_[n - 3], stack_[n - 2], stack_[n - 1]);
  stack_.resize(n - 2);
}

void Builder::set_items() {
  const std::size_t first = take_mark();
  if (first <= fence()) fail("stack underflow: no dict below the MARK");
  if ((stack_.size() - first) % 2 != 0) fail("odd number of items for SETITEMS");
  const Slot& dict = stack_[first - 1];
  mutable_target(dict, Kind::Dict, "MARK");
  grow_for(dict.value->entries, (stack_.size() - first) / 2);
  grow_for(dict.container->key_hashes, (stack_.size() - first) / 2);  // one allocation, not one per doubling
  for (std::size_t i = first; i < stack_.size(); i += 2) insert_entry(dict, stack_[i], stack_[i + 1]);
  stack_.resize(first);
}

void Builder::put(std::uint64_t index, const Slot& slot) {
  if (fetched_ != nullptr) {
    // Streaming: an entry no GET reads is never needed; only its index is remembered, for the
    // count MEMOIZE uses.
    if (memo_set_.insert(index)) ++memo_count_;
    const auto rank = fetched_->rank(index);
    if (!rank) return;
    if (memo_kept_.empty()) {
      // One slot per index some GET reads (at most one per GET opcode of the input).
      hold(fetched_->size() * sizeof(Slot));
      memo_kept_.resize(static_cast<std::size_t>(fetched_->size()));
    }
    memo_kept_[static_cast<std::size_t>(*rank)] = slot;
    return;
  }
  if (index < memo_.size()) {
    memo_[index] = slot;
    return;
  }
  if (index > memo_.size()) {
    if (memo_sparse_.find(index) == memo_sparse_.end()) hold(kSparseMemo);
    memo_sparse_[index] = slot;
    return;
  }
  if (!memory_.fits_append(memo_)) fail(memory_.problem());
  hold(sizeof(Slot));
  memo_.push_back(slot);
  // Keep every sparse index above memo_.size(): move entries that have become contiguous.
  while (!memo_sparse_.empty() && memo_sparse_.begin()->first == memo_.size()) {
    memo_.push_back(std::move(memo_sparse_.begin()->second));
    memo_sparse_.erase(memo_sparse_.begin());
  }
}

void Builder::memoize() {
  need(1);
  put(memo_entries(), stack_.back());  // Python: memo[len(memo)] = top
}

std::uint64_t Builder::memo_entries() const {
  return fetched_ != nullptr ? memo_count_ : memo_.size() + memo_sparse_.size();
}

void Builder::memo_put(std::uint64_t index) {
  need(1);
  put(index, stack_.back());
}

void Builder::memo_get(std::uint64_t index) {
  if (fetched_ != nullptr) {
    const auto rank = fetched_->rank(index);
    if (rank && !memo_kept_.empty() && memo_kept_[static_cast<std::size_t>(*rank)].value) {
      return push_slot(memo_kept_[static_cast<std::size_t>(*rank)]);
    }
    if (memo_set_.contains(index)) fail(fmt::format("internal: memo index {} was not kept", index));
    fail(fmt::format("memo index {} is not set ({} entries)", index, memo_entries()));
  }
  if (index < memo_.size()) {
    push_slot(memo_[index]);
    return;
  }
  const auto it = memo_sparse_.find(index);
  if (it == memo_sparse_.end()) {
    fail(fmt::format("memo index {} is not set ({} entries)", index, memo_entries()));
  }
  push_slot(it->second);
}

std::uint64_t Builder::held_by(const std::shared_ptr<Value>& root) {
  // Mirrors what the value's making counted (push_scalar, push_empty, build_tuple,
  // insert_item, insert_entry); shared constants (None, True, False, taken()) count nothing.
  std::uint64_t bytes = 0;
  std::vector<const Value*>& work = held_work_;  // empty between calls; its capacity is reused
  if (root.use_count() == 1) work.push_back(root.get());
  while (!work.empty()) {
    const Value& v = *work.back();
    work.pop_back();
    switch (v.kind) {
      case Kind::None:
      case Kind::Bool: continue;
      case Kind::Int:
      case Kind::Float:
      case Kind::String:
      case Kind::Bytes: bytes += kValue + memory_cost::text(v.text.size()); continue;
      case Kind::Tuple: bytes += kValue + kItem * v.items.size(); break;
      case Kind::List: bytes += kValue + kContainer + kItem * v.items.size(); break;
      case Kind::Dict: bytes += kValue + kContainer + kEntry * v.entries.size(); break;
    }
    for (const auto& item : v.items) {
      if (item.use_count() == 1) work.push_back(item.get());
    }
    for (const auto& [k, val] : v.entries) {
      if (k.use_count() == 1) work.push_back(k.get());
      if (val.use_count() == 1) work.push_back(val.get());
    }
  }
  return bytes;
}

ValuePtr Builder::finish() {
  if (!marks_.empty()) fail("STOP inside an open MARK (MARK misuse)");
  if (stack_.size() != 1) {
    fail(fmt::format("{} values on the stack at STOP; a pickle leaves exactly one", stack_.size()));
  }
  ValuePtr result = std::move(stack_.back().value);
  stack_.clear();
  return result;
}

}  // namespace coopsim::pickle::detail
