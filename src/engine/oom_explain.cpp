// Why an allocation failed: the allocator's state in the terms of PyTorch's memory_viz "segsum"
// view (reserved, allocated, requested, inactive split bytes, largest free block per pool) and
// the largest live blocks with the tensors that hold them. Computed once, at the OOM.
#include <algorithm>
#include <map>

#include "event_loop.hpp"

namespace coopsim::engine_detail {
namespace {

struct SegmentSum {
  Bytes reserved, allocated, free, largest_free;
};

void add_pool(OomSegsum& out, const std::string& name, const std::vector<SegmentSum>& segs) {
  if (segs.empty()) return;
  OomPool p;
  p.pool = name;
  p.segments = segs.size();
  for (const SegmentSum& s : segs) {
    p.reserved += s.reserved;
    p.allocated += s.allocated;
    p.largest_free = std::max(p.largest_free, s.largest_free);
    // Free bytes in a segment that also holds allocated blocks cannot be given back.
    if (s.allocated.value > 0) out.inactive_split += s.free;
  }
  out.pools.push_back(std::move(p));
}

// Segments with their pools where the model keeps PyTorch's (snapshot()), else the address
// ranges grouped by device allocation, in one pool.
void segment_sums(const Allocator& allocator, OomSegsum& out) {
  if (const auto snap = allocator.snapshot()) {
    std::vector<SegmentSum> small, large;
    for (const SeedSegment& g : *snap) {
      SegmentSum s;
      for (const SeedBlock& b : g.blocks) {
        s.reserved += b.size;
        if (b.allocated) {
          s.allocated += b.size;
        } else {
          s.free += b.size;
          s.largest_free = std::max(s.largest_free, b.size);
        }
      }
      (g.pool == SegmentPool::Small ? small : large).push_back(s);
    }
    add_pool(out, "small", small);
    add_pool(out, "large", large);
    return;
  }
  std::map<std::uint64_t, SegmentSum> by_segment;
  for (const Range& r : allocator.ranges()) {
    SegmentSum& s = by_segment[r.segment];
    s.reserved += r.size;
    if (r.free) {
      s.free += r.size;
      s.largest_free = std::max(s.largest_free, r.size);
    } else {
      s.allocated += r.size;
    }
  }
  std::vector<SegmentSum> all;
  all.reserve(by_segment.size());
  for (const auto& [id, s] : by_segment) all.push_back(s);
  add_pool(out, "device", all);
}

}  // namespace

OomSegsum explain_oom(const Allocator& allocator, const MemoryView& view, const Trace& trace) {
  OomSegsum out;
  const AllocatorStats st = allocator.stats();
  out.requested_live = st.requested;
  if (st.allocated >= st.requested) out.internal_fragmentation = st.allocated - st.requested;
  if (st.reserved >= st.allocated) out.cached_free = st.reserved - st.allocated;
  segment_sums(allocator, out);

  std::vector<std::pair<Bytes, std::uint32_t>> live;  // (block bytes, storage index)
  for (std::uint32_t i = 0; i < trace.tensors.size(); ++i) {
    if (trace.tensors[i].is_view()) continue;
    if (const auto b = view.block(TensorId{i})) live.emplace_back(b->size, i);
  }
  // Largest first; ties by the tensor's position in the trace, so reports are deterministic.
  const std::size_t n = std::min(kOomHolders, live.size());
  std::partial_sort(
      live.begin(), live.begin() + static_cast<std::ptrdiff_t>(n), live.end(),
      [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  live.resize(n);
  for (const auto& [size, index] : live) {
    const TensorId storage{index};  // a plain variable: lambdas may not capture structured bindings (C++17)
    const TensorInfo& t = trace.tensor(storage);
    OomHolder h;
    h.tensor_file_id = t.file_id;
    h.name = t.name;
    h.role = std::string(to_string(t.role));
    h.size = size;
    for (const OpInfo& op : trace.ops) {
      const bool produces =
          std::any_of(op.outputs.begin(), op.outputs.end(), [&](TensorId o) { return trace.storage_of(o) == storage; });
      if (produces) {
        h.op_name = op.name;
        break;
      }
    }
    out.holders.push_back(std::move(h));
  }
  return out;
}

}  // namespace coopsim::engine_detail
