// `pytorch` allocator model: public glue, options and parameters, rounding rules, node and
// segment bookkeeping and the device seam. See src/alloc/pytorch_impl.hpp for the structure and
// the list of departures from upstream (pytorch/pytorch @001074d2
// c10/cuda/CUDACachingAllocator.cpp; AllocatorConfig @065861fb).
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <iterator>
#include <string>

#include "coopsim/base/error.hpp"
#include "coopsim/alloc/registry.hpp"
#include "pytorch_impl.hpp"

namespace coopsim {

using namespace pytorch_detail;

namespace {

void validate(const PyTorchOptions& o) {
  if (o.max_split_size.value < kLargeBuffer) {  // off is kOff, the largest value
    throw ConfigError("pytorch.max_split_size",
                      "must be 0 (off) or at least 20MiB, got " + format_bytes(o.max_split_size));
  }
  for (const std::uint32_t d : o.roundup_power2_divisions) {
    if (d > 1 && !std::has_single_bit(d)) {
      throw ConfigError("pytorch.roundup_power2_divisions",
                        "must be 0 (off) or a power of two, got " + std::to_string(d));
    }
  }
  const double t = o.garbage_collection_threshold;
  if (!(t == 0.0 || (t > 0.0 && t < 1.0))) {
    throw ConfigError("pytorch.garbage_collection_threshold", fmt::format("must be 0 (off) or in (0, 1), got {}", t));
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Rounding rules

std::uint64_t PyTorchCachingAllocator::roundup_power2_next_division(std::uint64_t size, std::uint64_t divisions) {
  if (size == 0 || divisions == 0 || std::has_single_bit(size)) return size;
  const std::uint64_t floor2 = std::bit_floor(size);
  const std::uint64_t step = floor2 >> (std::bit_width(divisions) - 1);
  if (step == 0) return floor2 << 1;
  const std::uint64_t down = size & ~(step - 1);
  return down == size ? size : down + step;
}

std::uint64_t PyTorchCachingAllocator::round_size(std::uint64_t size, const PyTorchOptions& opts) {
  if (size < kMinBlockSize) return kMinBlockSize;
  // Bucket of the power-of-two interval: floor(log2(size)) - 20, clamped to [0, 15].
  const int log2 = std::bit_width(size) - 1;
  const int idx = std::clamp(log2 - 20, 0, static_cast<int>(PyTorchOptions::kRoundupBuckets) - 1);
  const std::uint64_t divisions = opts.roundup_power2_divisions[static_cast<std::size_t>(idx)];
  if (divisions > 1 && size > kMinBlockSize * divisions) return roundup_power2_next_division(size, divisions);
  return round_up(size, kMinBlockSize);
}

std::uint64_t PyTorchCachingAllocator::allocation_size(std::uint64_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return round_up(size, kRoundLarge);
}

// ---------------------------------------------------------------------------------------------
// Parameters

std::vector<ParamDoc> PyTorchCachingAllocator::param_docs() {
  return {
      {"max_split_size",
       ParamType::Bytes,
       "0",
       "cached blocks of at least this size are never split and only serve requests of at least "
       "this size (PYTORCH_CUDA_ALLOC_CONF max_split_size_mb); 0 = off (upstream SIZE_MAX), "
       "else >= 20MiB",
       {}},
      {"max_non_split_rounding_size",
       ParamType::Bytes,
       "20MiB",
       "a request >= max_split_size may take a cached block smaller than request + this",
       {}},
      {"roundup_power2_divisions",
       ParamType::Int,
       "0",
       "round requests up to the next of this many divisions of their power-of-two interval; one "
       "value for all 16 buckets (1 MiB .. 64 GiB); 0 = off, else a power of two",
       {}},
      {"garbage_collection_threshold",
       ParamType::Float,
       "0",
       "when reserved memory exceeds this fraction of the capacity, free the oldest cached "
       "unsplit large blocks before taking a new segment; 0 = off, else in (0, 1)",
       {}},
      {"expandable_segments",
       ParamType::Bool,
       "false",
       "one growing virtual segment per stream and pool, mapped in 2 MiB (small) / 20 MiB "
       "(large) pages, instead of one cudaMalloc per segment",
       {}},
  };
}

std::unique_ptr<Allocator> PyTorchCachingAllocator::create(const Params& p, Bytes capacity) {
  PyTorchOptions o;
  const Bytes mss = p.get_bytes("max_split_size");
  o.max_split_size = mss.value == 0 ? Bytes{PyTorchOptions::kOff} : mss;
  o.max_non_split_rounding_size = p.get_bytes("max_non_split_rounding_size");
  const std::int64_t div = p.get_int("roundup_power2_divisions");
  if (div < 0 || div > (1 << 20)) {
    throw ConfigError("pytorch.roundup_power2_divisions",
                      "must be 0 (off) or a power of two, got " + std::to_string(div));
  }
  o.set_roundup_power2_divisions(static_cast<std::uint32_t>(div));
  o.garbage_collection_threshold = p.get_float("garbage_collection_threshold");
  o.expandable_segments = p.get_bool("expandable_segments");
  return std::make_unique<PyTorchCachingAllocator>(capacity, o);
}

// ---------------------------------------------------------------------------------------------
// Public glue

PyTorchCachingAllocator::PyTorchCachingAllocator(Bytes capacity, PyTorchOptions opts) {
  validate(opts);
  impl_ = std::make_unique<Impl>(capacity, opts);
}

PyTorchCachingAllocator::~PyTorchCachingAllocator() = default;

std::optional<Block> PyTorchCachingAllocator::allocate(const AllocRequest& request) {
  return impl_->malloc(request.size.value, request.stream);
}
void PyTorchCachingAllocator::deallocate(const Block& block) { impl_->free(block); }
void PyTorchCachingAllocator::release_cached() { impl_->release_cached_blocks(); }
AllocatorStats PyTorchCachingAllocator::stats() const { return impl_->stats(); }
std::vector<Range> PyTorchCachingAllocator::ranges() const { return impl_->ranges(); }
bool PyTorchCachingAllocator::free_ranges_by_address(std::vector<Range>& out) const {
  return impl_->free_ranges_by_address(out);
}
void PyTorchCachingAllocator::segment_starts(std::vector<std::uint64_t>& out) const { impl_->segment_starts(out); }
std::uint64_t PyTorchCachingAllocator::ranges_end() const { return impl_->ranges_end(); }
void PyTorchCachingAllocator::check_invariants() const { impl_->check_invariants(); }
Bytes PyTorchCachingAllocator::inactive_split_bytes() const { return Bytes{impl_->inactive_split}; }
std::uint64_t PyTorchCachingAllocator::ooms() const { return impl_->oom_count; }
const PyTorchOptions& PyTorchCachingAllocator::options() const { return impl_->opts; }

std::vector<Block> PyTorchCachingAllocator::seed(std::span<const SeedSegment> segments) {
  // cudaMalloc segments first, then the expandable reservations around their mapped ranges (so
  // a reservation can be kept clear of the cudaMalloc segments); blocks come back in seed order.
  std::vector<std::vector<Block>> per_seed(segments.size());
  std::vector<PyTorchSeedBlock> blocks;
  bool any_expandable = false;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const SeedSegment& seg = segments[i];
    if (seg.expandable) {
      any_expandable = true;
      continue;
    }
    blocks.clear();
    for (const SeedBlock& b : seg.blocks) blocks.push_back({b.size, b.requested, b.allocated});
    per_seed[i] = impl_->seed_segment(seg.addr, seg.stream, seg.pool == SegmentPool::Small, blocks);
  }
  if (any_expandable) impl_->seed_expandable(segments, per_seed);
  std::vector<Block> out;
  for (const auto& v : per_seed) out.insert(out.end(), v.begin(), v.end());
  return out;
}

void PyTorchCachingAllocator::assign_segment_addresses(std::span<const SegmentAddress> planned) {
  impl_->planned.assign(planned.begin(), planned.end());
  impl_->next_planned = 0;
  impl_->planned_used.assign(planned.size(), false);
}

std::optional<std::vector<SeedSegment>> PyTorchCachingAllocator::snapshot() const { return impl_->snapshot(); }

bool PyTorchCachingAllocator::observe_segments(SegmentObserver* observer) {
  impl_->observer = observer;
  return true;
}

std::vector<Block> PyTorchCachingAllocator::seed_segment(std::uint64_t addr, std::uint32_t stream, PyTorchPool pool,
                                                         std::span<const PyTorchSeedBlock> blocks) {
  return impl_->seed_segment(addr, stream, pool == PyTorchPool::Small, blocks);
}

// ---------------------------------------------------------------------------------------------
// Bookkeeping

PyTorchCachingAllocator::Impl::Impl(Bytes cap, const PyTorchOptions& o) : capacity(cap), opts(o), device(cap) {
  nodes.reserve(1024);
  segs.reserve(64);
}

std::uint32_t PyTorchCachingAllocator::Impl::new_node(std::uint32_t seg) {
  std::uint32_t n;
  if (!free_nodes.empty()) {
    n = free_nodes.back();
    free_nodes.pop_back();
    nodes[n] = Node{};
  } else {
    n = static_cast<std::uint32_t>(nodes.size());
    nodes.emplace_back();
  }
  Node& b = nodes[n];
  const Segment& g = segs[seg];
  b.used = true;
  b.seg = seg;
  b.stream = g.stream;
  b.small = g.small;
  b.expandable = g.expandable;
  return n;
}

void PyTorchCachingAllocator::Impl::delete_node(std::uint32_t n) {
  nodes[n].used = false;
  free_nodes.push_back(n);
}

std::uint32_t PyTorchCachingAllocator::Impl::new_segment(std::uint64_t addr, std::uint64_t size, std::uint32_t stream,
                                                         bool small_pool, bool expandable, bool from_device) {
  std::uint32_t s;
  if (!free_segs.empty()) {
    s = free_segs.back();
    free_segs.pop_back();
  } else {
    s = static_cast<std::uint32_t>(segs.size());
    segs.emplace_back();
  }
  Segment& g = segs[s];
  g = Segment{};
  g.id = next_segment_id++;
  g.addr = addr;
  g.size = size;
  g.stream = stream;
  g.small = small_pool;
  g.expandable = expandable;
  g.from_device = from_device;
  g.used = true;
  seg_by_addr.emplace(addr, s);
  ++segment_count;
  if (expandable) ++expandable_count;
  starts_stale = true;
  return s;
}

void PyTorchCachingAllocator::Impl::delete_segment(std::uint32_t s) {
  seg_by_addr.erase(segs[s].addr);
  if (segs[s].expandable) --expandable_count;
  starts_stale = true;
  segs[s].used = false;
  free_segs.push_back(s);
  --segment_count;
}

void PyTorchCachingAllocator::Impl::insert_into_blocks(std::uint32_t n) {
  Node& b = nodes[n];
  Pool& p = pool_of(b);
  b.gc_count_base = p.get_free_blocks_call_count;
  b.pos = p.blocks.insert(SizeKey{b.stream, b.size, b.addr, n}).first;
  b.releasable = in_expandable(b) || !is_split(b);
  p.releasable += b.releasable;
  if (b.size > largest_free) largest_free = b.size;
}

void PyTorchCachingAllocator::Impl::erase_from_blocks(std::uint32_t n) {
  Node& b = nodes[n];
  if (b.size >= largest_free) largest_dirty = true;
  Pool& p = pool_of(b);
  p.blocks.erase(b.pos);
  p.releasable -= b.releasable;
  b.releasable = false;
  b.pos = {};
}

void PyTorchCachingAllocator::Impl::insert_unmapped(std::uint32_t n) {
  const Node& b = nodes[n];
  pool_of(b).unmapped.insert(AddrKey{b.stream, b.addr, n});
}

void PyTorchCachingAllocator::Impl::erase_unmapped(std::uint32_t n) {
  const Node& b = nodes[n];
  pool_of(b).unmapped.erase(AddrKey{b.stream, b.addr, n});
}

void PyTorchCachingAllocator::Impl::link_after(std::uint32_t n, std::uint32_t after) {
  Node& a = nodes[after];
  Node& x = nodes[n];
  x.prev = after;
  x.next = a.next;
  if (a.next != kNil) nodes[a.next].prev = n;
  a.next = n;
}

void PyTorchCachingAllocator::Impl::link_before(std::uint32_t n, std::uint32_t before) {
  Node& b = nodes[before];
  Node& x = nodes[n];
  x.next = before;
  x.prev = b.prev;
  if (b.prev != kNil) {
    nodes[b.prev].next = n;
  } else {
    segs[x.seg].head = n;
  }
  b.prev = n;
}

bool PyTorchCachingAllocator::Impl::overlaps_segment(std::uint64_t addr, std::uint64_t size) const {
  auto it = seg_by_addr.lower_bound(addr);
  if (it != seg_by_addr.end() && it->first < addr + size) return true;
  return it != seg_by_addr.begin() && std::prev(it)->first + segs[std::prev(it)->second].size > addr;
}

// ---------------------------------------------------------------------------------------------
// The device seam

std::optional<std::uint64_t> PyTorchCachingAllocator::Impl::acquire_segment(std::uint64_t size, std::uint32_t stream,
                                                                            bool small_pool, bool& from_device) {
  // The recording's next cudaMalloc, when this one is the same request (expandable reservations
  // in the plan are matched by reserve_address_space instead).
  while (next_planned < planned.size() && planned[next_planned].expandable) ++next_planned;
  if (next_planned < planned.size()) {
    const SegmentAddress& p = planned[next_planned];
    if (p.size.value == size && p.stream == stream && (p.pool == SegmentPool::Small) == small_pool) {
      ++next_planned;
      if (p.addr <= ~std::uint64_t{0} - size && !overlaps_segment(p.addr, size)) {
        from_device = false;
        report(SegmentAction::Alloc, p.addr, size, stream, small_pool, false);
        return p.addr;
      }
      // The range is still held in the model (the simulation has diverged): place it as usual.
    }
  }
  from_device = true;
  for (;;) {
    const auto addr = device.malloc(Bytes{size});
    if (!addr) return std::nullopt;
    // Seeded or planned segments may sit where the bump pointer goes: skip past them. The bump
    // pointer only moves forward, so this ends after the finitely many segments in the way.
    if (!overlaps_segment(*addr, size)) {
      report(SegmentAction::Alloc, *addr, size, stream, small_pool, false);
      return addr;
    }
    device.free(*addr, Bytes{size});
  }
}

void PyTorchCachingAllocator::Impl::release_segment(const Segment& s) {
  if (s.from_device) device.free(s.addr, Bytes{s.size});
  report(SegmentAction::Free, s.addr, s.size, s.stream, s.small, false);
}

std::uint64_t PyTorchCachingAllocator::Impl::reserve_address_space(std::uint64_t& size, std::uint32_t stream,
                                                                   bool small_pool) {
  // The recording's reservation for this stream and pool, when it is still unused and free here.
  if (const auto planned_at = take_planned_reservation(stream, small_pool, size)) return *planned_at;
  // Else downwards from the first cudaMalloc address, 2 MiB aligned; never reused.
  next_va_top = (next_va_top - size) & ~(kSmallBuffer - 1);
  if (overlaps_segment(next_va_top, size)) {
    throw InvariantError("pytorch: expandable address range overlaps a seeded segment");
  }
  return next_va_top;
}

void PyTorchCachingAllocator::Impl::release_address_space(std::uint64_t /*addr*/, std::uint64_t /*size*/) {}

// Its line in the registry (src/alloc/registry.cpp).
AllocatorRegistry::Entry pytorch_allocator_entry() { return AllocatorRegistry::entry_for<PyTorchCachingAllocator>(); }

}  // namespace coopsim
