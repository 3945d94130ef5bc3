// Trace v1 loader: the initial allocator state ("segment" records, which must precede every
// event) and the recorded addresses of new segments ("segment_address" records). See loader.hpp
// and docs/trace-format.md §5.1.
#include "loader.hpp"

#include <iterator>

namespace coopsim::trace_detail {

SegmentPool Loader::read_pool() const {
  const JValue* v = slot_[kPool];
  if (v == nullptr) missing(record_prefix(), kPool);
  if (v->type == JType::String && v->text == "small") return SegmentPool::Small;
  if (v->type == JType::String && v->text == "large") return SegmentPool::Large;
  bad(record_prefix(), kPool, "'small' or 'large'", *v);
}

bool Loader::read_expandable() const {
  const JValue* v = slot_[kExpandable];
  if (v == nullptr) return false;
  if (v->type != JType::Bool) bad(record_prefix(), kExpandable, "true or false", *v);
  return v->boolean;
}

void Loader::on_segment() {
  InitialSegment seg;
  seg.addr = req_u64(kAddr);
  const std::uint64_t size = req_u64(kSize);
  const std::string prefix = fmt::format("segment {}", seg.addr);
  if (!trace_.events.empty()) {
    fail(prefix + ": segment records (the initial state) must come before every event");
  }
  if (size == 0) bad(prefix, kSize, "a positive integer", *slot_[kSize]);
  if (seg.addr > ~std::uint64_t{0} - size) fail(prefix + ": extends past the end of the 64-bit address space");
  seg.stream = read_stream();
  seg.pool = read_pool();
  seg.expandable = read_expandable();
  const JValue* blocks = slot_[kBlocks];
  if (blocks == nullptr) missing(prefix, kBlocks);
  if (blocks->type != JType::Array || blocks->count == 0) bad(prefix, kBlocks, "a non-empty array of blocks", *blocks);
  std::uint64_t covered = 0;
  for (std::uint32_t i = 0; i < blocks->count; ++i) {
    const InitialBlock b = read_block(i, prefix);
    covered = covered > ~std::uint64_t{0} - b.size.value ? ~std::uint64_t{0} : covered + b.size.value;
    seg.blocks.push_back(b);
  }
  if (covered != size) fail(fmt::format("{}: blocks cover {} bytes, field 'size' says {}", prefix, covered, size));
  // Neighbours in address order: the one starting at or after addr, and the one before it.
  auto next = initial_extent_.lower_bound(seg.addr);
  if (next != initial_extent_.end() && next->first < seg.addr + size) {
    fail(fmt::format("{}: overlaps segment {} (line {})", prefix, next->first, next->second.second));
  }
  if (next != initial_extent_.begin()) {
    const auto prev = std::prev(next);
    if (prev->second.first > seg.addr) {
      fail(fmt::format("{}: overlaps segment {} (line {})", prefix, prev->first, prev->second.second));
    }
  }
  hold(memory_cost::segment(seg) + kMapNode);  // and its entry in initial_extent_
  initial_extent_.emplace(seg.addr, std::make_pair(seg.addr + size, line_));
  trace_.initial_segments.push_back(std::move(seg));
}

// Block `index` of the current segment record: {"size":S,"tensor":ID} or {"size":S,"free":true}.
InitialBlock Loader::read_block(std::uint32_t index, std::string_view prefix) {
  const JValue& el = json_.element(slot_[kBlocks]->first + index);
  const std::string where = fmt::format("{}: block {}", prefix, index);
  if (el.type != JType::Object) fail(fmt::format("{} must be an object (got {})", where, describe(el)));
  // The outer parse validated the syntax; a nested object can still repeat a key.
  if (inner_.parse(el.text) == JsonLine::Status::DuplicateKey) {
    fail(fmt::format("{}: duplicate key {}", where, inner_.error()));
  }
  const JValue *size = nullptr, *tensor = nullptr, *free = nullptr;
  for (const auto& f : inner_.fields()) {
    if (f.key == "size") {
      size = &f.value;
    } else if (f.key == "tensor") {
      tensor = &f.value;
    } else if (f.key == "free") {
      free = &f.value;
    } else if (f.key.substr(0, 2) != "x_") {
      fail(fmt::format("{}: unknown key {} (extension keys must start with x_)", where, quote(f.key)));
    }
  }
  InitialBlock b;
  if (size == nullptr) fail(where + ": missing field 'size'");
  if (!as_u64(*size, b.size.value) || b.size.value == 0) {
    fail(fmt::format("{}: field 'size' must be a positive integer (got {})", where, describe(*size)));
  }
  if (free != nullptr && !(free->type == JType::Bool && free->boolean)) {
    fail(fmt::format("{}: field 'free' must be true (got {})", where, describe(*free)));
  }
  if ((tensor == nullptr) == (free == nullptr)) fail(where + ": needs exactly one of 'tensor' and \"free\":true");
  if (free != nullptr) return b;
  std::uint64_t id = 0;
  if (!as_u64(*tensor, id)) {
    fail(fmt::format("{}: field 'tensor' must be a non-negative integer (got {})", where, describe(*tensor)));
  }
  const std::uint32_t idx = tensor_ids_.find(id);
  if (idx == kNoIndex) fail(fmt::format("{} refers to undefined tensor {}", where, id));
  const TensorInfo& t = trace_.tensors[idx];
  if (t.is_view()) {
    fail(fmt::format("{}: tensor {} is a view (views share the storage of tensor {})", where, id,
                     trace_.tensor(t.view_of).file_id));
  }
  if (t.size.value == 0) fail(fmt::format("{}: tensor {} has 0 bytes (only views may have 0 bytes)", where, id));
  if (life_[idx].state == State::Live) {
    fail(fmt::format("{}: tensor {} is already live (allocated at line {})", where, id, life_[idx].alloc_line));
  }
  if (b.size < t.size) {
    fail(fmt::format("{} of {} bytes is smaller than tensor {} ({} bytes)", where, b.size.value, id, t.size.value));
  }
  b.tensor = TensorId{idx};
  // Live from here: a second block naming it (in this record or a later one) is an error. A
  // failing record aborts the load, so marking early leaves nothing inconsistent behind.
  life_[idx].state = State::Live;
  life_[idx].alloc_line = line_;
  return b;
}

void Loader::on_segment_address() {
  SegmentAddress a;
  a.addr = req_u64(kAddr);
  a.size = Bytes{req_u64(kSize)};
  if (a.size.value == 0) bad(record_prefix(), kSize, "a positive integer", *slot_[kSize]);
  a.stream = read_stream();
  a.pool = read_pool();
  a.expandable = read_expandable();
  hold(sizeof(SegmentAddress));
  trace_.segment_addresses.push_back(a);
}

}  // namespace coopsim::trace_detail
