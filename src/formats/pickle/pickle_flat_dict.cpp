// Flat dicts in one step (pickle_builder.hpp, FlatDict). A memory snapshot's history is millions
// of small dicts of one shape ({'action': <memo>, 'addr': int, 'size': int, 'stream': int,
// 'time_us': int, 'frames': <memo>}); opcode by opcode each costs a dozen stack slots, memo
// copies and key checks. Here the run of opcodes is decoded first and the dict built directly,
// with the same result, memo, memory count and stack as the opcodes would leave, or not at all.
#include <bit>

#include "pickle_builder.hpp"
#include "pickle_detail.hpp"
#include "pickle_opcodes.hpp"
#include "pickle_pool.hpp"

namespace coopsim::pickle::detail {

std::size_t scan_flat_dict(std::string_view bytes, FlatDict& out) {
  std::size_t p = 0;
  auto has = [&](std::size_t n) { return bytes.size() - p >= n; };
  auto le = [&](std::size_t n) {
    std::uint64_t v = 0;
    for (std::size_t i = n; i-- > 0;) v = (v << 8) | static_cast<unsigned char>(bytes[p + i]);
    p += n;
    return v;
  };
  using Kind = FlatDict::ItemKind;
  out.put = FlatDict::Put::None;
  out.size = 0;
  if (!has(1)) return 0;
  switch (static_cast<unsigned char>(bytes[p])) {
    case op::kMemoize:
      out.put = FlatDict::Put::Memoize;
      ++p;
      break;
    case op::kBinPut:
      if (!has(2)) return 0;
      ++p;
      out.put = FlatDict::Put::Index;
      out.put_index = le(1);
      break;
    case op::kLongBinPut:
      if (!has(5)) return 0;
      ++p;
      out.put = FlatDict::Put::Index;
      out.put_index = le(4);
      break;
    default: break;
  }
  if (!has(1) || static_cast<unsigned char>(bytes[p]) != op::kMark) return 0;
  ++p;
  for (;;) {
    if (!has(1)) return 0;
    const auto code = static_cast<unsigned char>(bytes[p++]);
    if (code == op::kSetItems) break;
    if (out.size == FlatDict::kMaxItems) return 0;
    FlatDict::Item& item = out.items[out.size++];
    switch (code) {
      case op::kBinGet:
        if (!has(1)) return 0;
        item = {Kind::Get, le(1)};
        break;
      case op::kLongBinGet:
        if (!has(4)) return 0;
        item = {Kind::Get, le(4)};
        break;
      case op::kBinInt1:
        if (!has(1)) return 0;
        item = {Kind::Int, le(1)};
        break;
      case op::kBinInt2:
        if (!has(2)) return 0;
        item = {Kind::Int, le(2)};
        break;
      case op::kBinInt:
        if (!has(4)) return 0;
        // Signed 32-bit, as the reader decodes it.
        item = {Kind::Int, std::bit_cast<std::uint64_t>(static_cast<std::int64_t>(
                               static_cast<std::int32_t>(static_cast<std::uint32_t>(le(4)))))};
        break;
      case op::kLong1: {
        // Little-endian two's complement of up to 8 bytes (longer ones go the general way).
        if (!has(1)) return 0;
        const auto n = static_cast<std::size_t>(le(1));
        if (n > 8 || !has(n)) return 0;
        std::uint64_t v = 0;
        if (n > 0) {
          const bool negative = (static_cast<unsigned char>(bytes[p + n - 1]) & 0x80U) != 0;
          v = le(n);
          if (negative && n < 8) v |= ~std::uint64_t{0} << (8 * n);
        }
        item = {Kind::Int, v};
        break;
      }
      case op::kNone: item = {Kind::None, 0}; break;
      case op::kNewTrue: item = {Kind::True, 0}; break;
      case op::kNewFalse: item = {Kind::False, 0}; break;
      default: return 0;
    }
  }
  if (out.size % 2 != 0) return 0;
  return p;
}

bool Builder::resolve_flat(const FlatDict& d, const Slot** refs, std::uint32_t& depth, std::uint64_t& ints,
                           FlatKeys* keys) const {
  using Item = FlatDict::ItemKind;
  ints = 0;
  depth = d.size == 0 ? 1 : 2;  // an int or constant item is one level down
  // The keys of the dict before, when these are the same memo indices (a history's dicts all
  // have one key order): already checked, the same slots.
  bool same_keys = keys != nullptr && keys->pairs != 0 && keys->pairs * 2 == d.size;
  for (std::size_t i = 0; same_keys && i < d.size; i += 2) {
    same_keys = d.items[i].kind == Item::Get && d.items[i].value == keys->index[i / 2];
  }
  if (same_keys) depth = std::max(depth, keys->depth);
  std::uint32_t key_depth = 0;
  for (std::size_t i = 0; i < d.size; ++i) {
    const FlatDict::Item& item = d.items[i];
    const bool key = i % 2 == 0;
    if (key && same_keys) {
      refs[i] = keys->slot[i / 2];
      continue;
    }
    refs[i] = nullptr;
    if (item.kind == Item::Int) ++ints;
    if (item.kind != Item::Get) {
      if (key) return false;  // keys are memo references to strings here
      continue;
    }
    const auto rank = fetched_->rank(item.value);
    if (!rank) return false;
    const Slot& slot = memo_kept_[static_cast<std::size_t>(*rank)];
    if (!slot.value) return false;
    if (key) {
      if (slot.value->kind != Value::Kind::String) return false;
      // Equal keys (Python keeps the first key object and the last value): the general way.
      for (std::size_t j = 0; j < i; j += 2) {
        if (refs[j]->hash == slot.hash) return false;
      }
    }
    const std::uint32_t child = depth_of(slot) + 1;
    if (child > kMaxDepth) return false;
    depth = std::max(depth, child);
    if (key) key_depth = std::max(key_depth, child);
    refs[i] = &slot;
  }
  if (keys != nullptr && !same_keys) {
    keys->pairs = d.size / 2;
    keys->depth = key_depth;
    for (std::size_t i = 0; i < d.size; i += 2) {
      keys->index[i / 2] = d.items[i].value;
      keys->slot[i / 2] = refs[i];
    }
  }
  return true;
}

bool Builder::flat_dict(const FlatDict& d) {
  using Item = FlatDict::ItemKind;
  if (fetched_ == nullptr || memo_kept_.empty()) return false;
  // The dict's memo entry must be one nothing reads (a kept one could be changed through the memo).
  const std::uint64_t put_index = d.put == FlatDict::Put::Memoize ? memo_entries() : d.put_index;
  if (d.put != FlatDict::Put::None && fetched_->rank(put_index)) return false;
  // EMPTY_DICT and the items take stack slots, MARK a mark: each counted the first time the stack
  // (the marks) grows that far. Where the vector itself would grow, the general way checks that.
  const std::size_t stack_top = stack_.size() + 1 + d.size;
  if (stack_top > stack_.capacity() || (marks_.size() == marks_peak_ && marks_.size() == marks_.capacity())) {
    return false;
  }
  const std::uint64_t new_slots = stack_top > stack_peak_ ? stack_top - stack_peak_ : 0;
  const std::uint64_t new_marks = marks_.size() == marks_peak_ ? 1 : 0;
  const Slot* refs[FlatDict::kMaxItems];  // keys and Get values; nullptr for the rest
  std::uint64_t ints = 0;
  std::uint32_t depth = 1;
  if (!resolve_flat(d, refs, depth, ints)) return false;
  const std::uint64_t entries = d.size / 2;
  // push_empty's value and parser state, each int's value, insert_entry's entries, new slots.
  if (!memory_.add(kValue * (1 + ints) + kContainer + kEntry * entries + sizeof(Slot) * new_slots +
                   sizeof(std::size_t) * new_marks)) {
    return false;
  }
  stack_peak_ += new_slots;
  marks_peak_ += new_marks;

  Slot dict;
  dict.value = make_recycled<Value>();
  dict.value->kind = Value::Kind::Dict;
  dict.hashable = false;
  dict.container = make_recycled<Container>();
  Container& c = *dict.container;
  c.depth = depth;
  auto& out = dict.value->entries;
  out.reserve(entries);
  auto value_of = [&](std::size_t i) -> ValuePtr {
    const FlatDict::Item& item = d.items[i];
    switch (item.kind) {
      case Item::Get: {
        adopt(*refs[i]);
        return refs[i]->value;
      }
      case Item::Int: {
        auto v = make_recycled<Value>();
        v->kind = Value::Kind::Int;
        v->integer = std::bit_cast<std::int64_t>(item.value);
        return v;
      }
      case Item::None: return constant(Value::Kind::None);
      case Item::True: return constant(Value::Kind::Bool, true);
      case Item::False: return constant(Value::Kind::Bool, false);
    }
    return nullptr;
  };
  for (std::size_t i = 0; i < d.size; i += 2) {
    adopt(*refs[i]);
    out.emplace_back(refs[i]->value, value_of(i + 1));
  }
  if (d.put != FlatDict::Put::None) put(put_index, dict);
  stack_.push_back(std::move(dict));
  return true;
}

bool Builder::flat_batch(std::span<const FlatDict> dicts) {
  using Item = FlatDict::ItemKind;
  if (fetched_ == nullptr || sink_ == nullptr || memo_kept_.empty() || dicts.empty()) return false;
  // The list right below the MARK (nothing else is between: the MARK is not pushed).
  if (stack_.size() <= fence()) return false;
  const Slot& list = stack_.back();
  if (list.value->kind != Value::Kind::List || list.container->complete) return false;
  flat_items_.clear();
  flat_refs_.clear();
  flat_sizes_.clear();
  std::uint32_t deepest = 1;
  std::uint64_t memo_next = memo_count_;
  FlatKeys keys;  // within this batch only: the memo cannot change before it is done
  for (const FlatDict& d : dicts) {
    // MEMOIZE gives each dict the next index; one a GET reads (or a crafted PUT already set)
    // needs the dict itself: the general way.
    if (d.put == FlatDict::Put::Index) return false;
    if (d.put == FlatDict::Put::Memoize) {
      if (fetched_->rank(memo_next) || memo_set_.contains(memo_next)) return false;
      ++memo_next;
    }
    const Slot* refs[FlatDict::kMaxItems];
    std::uint32_t depth = 1;
    std::uint64_t ints = 0;
    if (!resolve_flat(d, refs, depth, ints, &keys)) return false;
    deepest = std::max(deepest, depth);
    for (std::size_t i = 0; i < d.size; ++i) {
      const FlatDict::Item& item = d.items[i];
      FlatValue v;
      switch (item.kind) {
        case Item::Get:
          // The list inside a dict appended to itself: a cycle, refused the general way.
          if (refs[i]->container == list.container) return false;
          v.ref = &refs[i]->value;
          break;
        case Item::Int:
          v.kind = Value::Kind::Int;
          v.integer = std::bit_cast<std::int64_t>(item.value);
          break;
        case Item::None: break;
        case Item::True:
        case Item::False:
          v.kind = Value::Kind::Bool;
          v.boolean = item.kind == Item::True;
          break;
      }
      flat_items_.push_back(v);
      flat_refs_.push_back(refs[i]);
    }
    flat_sizes_.push_back(static_cast<std::uint8_t>(d.size / 2));
  }
  // Each dict is one level below the list (check_depth's limit as insert_item applies it).
  if (std::size_t{deepest} + 1 > kMaxDepth) return false;
  // The list's new references, counted as insert_item counts them (the dicts themselves would be
  // given back as soon as the sink took them).
  auto& items = list.value->items;
  const std::uint64_t more = dicts.size();
  if (items.capacity() - items.size() < more && !memory_.fits(items.size() * sizeof(ValuePtr))) return false;
  if (!memory_.add(kItem * more)) return false;
  if (!sink_->take_flat(list.value, flat_items_, flat_sizes_)) {
    memory_.remove(kItem * more);
    return false;
  }
  // What the opcodes would have left: the referenced containers complete, the memo indices set,
  // the list one level above its deepest item, and the dicts taken.
  for (const Slot* ref : flat_refs_) {
    // Each is a memo slot of this builder. For a scalar or tuple (nothing changes them), or a
    // container referenced before (complete already), adopt would only check the depth: done.
    if (ref == nullptr || !ref->container || ref->frozen) continue;
    adopt(*ref);
    Slot& memo = const_cast<Slot&>(*ref);
    memo.depth = ref->container->depth;
    memo.frozen = true;
  }
  for (const FlatDict& d : dicts) {
    if (d.put == FlatDict::Put::Memoize) {
      memo_set_.insert_new(memo_count_);
      ++memo_count_;
    }
  }
  Container& c = *list.container;
  c.depth = std::max(c.depth, deepest + 1);
  c.taken_pending += dicts.size();
  return true;
}

}  // namespace coopsim::pickle::detail
