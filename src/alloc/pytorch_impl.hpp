// Internals of the `pytorch` allocator model (include/coopsim/alloc/pytorch.hpp), shared by
// src/alloc/pytorch*.cpp.
//
// Structure, as upstream (pytorch/pytorch @001074d2 c10/cuda/CUDACachingAllocator.cpp):
//  * A segment (one cudaMalloc, or one expandable virtual range) is a doubly linked chain of
//    blocks tiling it in address order. Blocks of different segments are never linked, so
//    segments never merge even when adjacent.
//  * Each pool (small, large) holds its cached free, mapped blocks in a set ordered by
//    (stream, size, address) and, for expandable segments, its unmapped blocks in a set ordered
//    by (stream, address). Allocated blocks are found by address through a flat hash map.
//  * Nodes live in a recycled slot vector and the sets' tree nodes in a recycling arena, so the
//    steady state does no heap allocation.
//
// Departures from upstream (all deliberate):
//  * No CUDA events / recordStream: a free is completed at once (free_requested == free_completed);
//    process_events and synchronize_and_free_events are no-ops.
//  * No CUDA-graph private pools, no free-memory callbacks (they never free anything here).
//  * The capacity is both the memory fraction limit and the physical device: alloc_block fails
//    early when reserved + allocation size > capacity (upstream's set_fraction check); expandable
//    page mapping additionally fails when reserved + mapped pages > capacity (cuMemCreate OOM).
//    GC (which upstream runs only with a memory fraction set) therefore runs whenever
//    garbage_collection_threshold > 0, against the capacity.
//  * alloc_retries counts upstream's num_alloc_retries: allocations that reached the
//    release_cached_blocks-and-retry step, whether or not the retry then succeeded.
//  * release_available_cached_blocks, release_block and GC never touch blocks of expandable
//    segments (upstream asserts there); an oversize cached block that is part of a split segment
//    (unreachable without seeding) raises InvariantError like upstream's failing cudaFree would.
//  * Expandable segments: the virtual range is 1 1/8 x capacity rounded up to the page size
//    (upstream: 1 1/8 x totalGlobalMem); virtual ranges are handed out downwards from just below
//    DeviceMemory::kBaseAddress so they never meet bump-allocated segments. The "expandable
//    segments switched off after use" branch of get_free_block is not modelled (the option is
//    fixed per instance). `segments` counts cudaMalloc segments plus live virtual segments
//    (upstream's segment stat ignores the latter); device_mallocs / device_frees count page
//    map / unmap calls as upstream's num_device_alloc / num_device_free do.
//  * max_non_split_rounding_size is an option (default 20 MiB = kLargeBuffer, the value
//    hard-coded at @001074d2).
//  * A zero-byte request is served as a 512-byte block (upstream returns nullptr without a block).
//  * Streams are ordered by their numeric id (upstream: by cudaStream_t pointer value); this only
//    matters where upstream walks a pool across streams (GC, release order).
//  * ranges() reports an expandable segment's mapped blocks under one segment id; a snapshot
//    reports one segment per contiguous mapped range.
//  * Seeding (seed_segment, seed) is an addition. cudaMalloc segments as given; expandable mapped
//    ranges are grouped per (stream, pool) into one reservation based at the recorded
//    reservation (plan entry with expandable) when there is one at or below them, else at the
//    lowest range; it needs expandable_segments. A bump-allocated address that would overlap a
//    seeded segment is skipped (the bump pointer moves on).
//  * Recorded segment addresses (assign_segment_addresses) are an addition for simulating recordings: a new
//    segment whose size, stream and pool match the next unused recorded entry is placed at the
//    recorded address (as the recording's cudaMalloc returned it) unless that range is taken in
//    the model; every other segment comes from DeviceMemory's bump pointer. Planned segments
//    are not handed back to DeviceMemory (the capacity check on reserved still applies). A new
//    expandable reservation takes the first unused recorded one of its stream and pool (upstream's
//    cuMemAddressReserve result), sized max(1 1/8 x capacity, recorded extent) but never over a
//    segment above it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "coopsim/alloc/pytorch.hpp"
#include "coopsim/alloc/allocator.hpp"
#include "coopsim/base/addr_map.hpp"

namespace coopsim {

namespace pytorch_detail {

// Fixed-size node recycling for the pool sets: freed tree nodes go on a free list and are
// reused, memory comes in chunks and is only returned when the allocator model is destroyed.
class NodeArena {
 public:
  explicit NodeArena(std::size_t node_size) : node_size_(std::max(node_size, sizeof(void*))) {}
  NodeArena(const NodeArena&) = delete;
  NodeArena& operator=(const NodeArena&) = delete;
  void* get() {
    if (head_ == nullptr) refill();
    void* p = head_;
    head_ = *static_cast<void**>(p);
    return p;
  }
  void put(void* p) {
    *static_cast<void**>(p) = head_;
    head_ = p;
  }
  [[nodiscard]] std::size_t node_size() const { return node_size_; }

 private:
  void refill() {
    constexpr std::size_t kPerChunk = 256;
    const std::size_t stride =
        (node_size_ + alignof(std::max_align_t) - 1) / alignof(std::max_align_t) * alignof(std::max_align_t);
    chunks_.push_back(std::make_unique<std::max_align_t[]>(stride * kPerChunk / sizeof(std::max_align_t)));
    auto* base = reinterpret_cast<std::byte*>(chunks_.back().get());
    for (std::size_t i = kPerChunk; i-- > 0;) put(base + i * stride);
  }
  std::size_t node_size_;
  void* head_ = nullptr;
  std::vector<std::unique_ptr<std::max_align_t[]>> chunks_;
};

// std::allocator replacement drawing single nodes from a NodeArena (anything else, e.g. a
// node of another size after rebinding, goes to the global heap).
template <class T>
struct ArenaAllocator {
  using value_type = T;
  NodeArena* arena;
  explicit ArenaAllocator(NodeArena* a) : arena(a) {}
  template <class U>
  ArenaAllocator(const ArenaAllocator<U>& o) : arena(o.arena) {}  // NOLINT: rebinding
  T* allocate(std::size_t n) {
    if (n == 1 && sizeof(T) <= arena->node_size()) return static_cast<T*>(arena->get());
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) {
    if (n == 1 && sizeof(T) <= arena->node_size()) {
      arena->put(p);
    } else {
      ::operator delete(p);
    }
  }
  template <class U>
  bool operator==(const ArenaAllocator<U>& o) const {
    return arena == o.arena;
  }
};

inline constexpr std::uint64_t kMinBlockSize = 512;
inline constexpr std::uint64_t kSmallSize = 1ULL << 20;
inline constexpr std::uint64_t kSmallBuffer = 2ULL << 20;
inline constexpr std::uint64_t kMinLargeAlloc = 10ULL << 20;
inline constexpr std::uint64_t kRoundLarge = 2ULL << 20;
inline constexpr std::uint64_t kLargeBuffer = 20ULL << 20;
inline constexpr std::uint32_t kNil = ~std::uint32_t{0};
}  // namespace pytorch_detail

struct PyTorchCachingAllocator::Impl {
  struct SizeKey {
    std::uint32_t stream;
    std::uint64_t size;
    std::uint64_t addr;
    std::uint32_t node;
  };
  struct SizeLess {
    bool operator()(const SizeKey& a, const SizeKey& b) const {
      if (a.stream != b.stream) return a.stream < b.stream;
      if (a.size != b.size) return a.size < b.size;
      return a.addr < b.addr;
    }
  };
  struct AddrKey {
    std::uint32_t stream;
    std::uint64_t addr;
    std::uint32_t node;
  };
  struct AddrLess {
    bool operator()(const AddrKey& a, const AddrKey& b) const {
      if (a.stream != b.stream) return a.stream < b.stream;
      return a.addr < b.addr;
    }
  };
  using SizeSet = std::set<SizeKey, SizeLess, pytorch_detail::ArenaAllocator<SizeKey>>;
  using AddrSet = std::set<AddrKey, AddrLess, pytorch_detail::ArenaAllocator<AddrKey>>;
  // Tree nodes: the key plus the red-black header (colour and three links), rounded up.
  static constexpr std::size_t kTreeNodeBytes = 4 * sizeof(void*) + sizeof(SizeKey);

  struct Node {
    std::uint64_t addr = 0;
    std::uint64_t size = 0;
    std::uint64_t requested = 0;
    std::int64_t gc_count_base = 0;
    std::uint32_t prev = pytorch_detail::kNil;
    std::uint32_t next = pytorch_detail::kNil;
    std::uint32_t seg = pytorch_detail::kNil;
    std::uint32_t stream = 0;
    bool allocated = false;
    bool mapped = true;
    bool used = false;        // slot holds a live node
    bool small = false;       // copied from the segment: pool
    bool expandable = false;  // copied from the segment
    bool releasable = false;  // counted in its pool's `releasable` (set while in `blocks`)
    SizeSet::iterator pos{};  // position in its pool's `blocks` while cached free and mapped
  };

  struct Pool {
    Pool(bool small_pool, pytorch_detail::NodeArena* arena)
        : blocks(SizeLess{}, pytorch_detail::ArenaAllocator<SizeKey>(arena)),
          unmapped(AddrLess{}, pytorch_detail::ArenaAllocator<AddrKey>(arena)),
          small(small_pool) {}
    SizeSet blocks;    // cached free, mapped blocks
    AddrSet unmapped;  // unmapped ranges of expandable segments
    // Blocks of `blocks` that release_blocks (emptyCache) acts on: whole segments and blocks of
    // expandable segments. When none, a release has nothing to do and skips its pass over the
    // pool (every failed allocation releases: a pass over every cached block per failure).
    std::uint64_t releasable = 0;
    bool small;
    std::int64_t get_free_blocks_call_count = 0;
  };

  struct Segment {
    std::uint64_t id = 0;
    std::uint64_t addr = 0;
    std::uint64_t size = 0;  // cudaMalloc size, or the whole virtual range when expandable
    std::uint32_t head = pytorch_detail::kNil;
    std::uint32_t stream = 0;
    bool small = false;
    bool expandable = false;
    bool from_device = false;  // taken from DeviceMemory (else seeded or at a recorded address)
    bool used = false;
    std::uint64_t page_size = 0;     // expandable only
    std::uint64_t mapped_bytes = 0;  // expandable only
  };

  Impl(Bytes capacity, const PyTorchOptions& opts);

  // --- malloc / free (pytorch_malloc.cpp) ---
  std::optional<Block> malloc(std::uint64_t orig_size, std::uint32_t stream);
  void free(const Block& b);
  std::uint32_t get_free_block(Pool& pool, std::uint32_t stream, std::uint64_t size);
  std::uint32_t alloc_block(Pool& pool, std::uint32_t stream, std::uint64_t size, std::uint64_t alloc_size,
                            bool is_retry);
  Block alloc_found_block(std::uint32_t n, std::uint64_t size, std::uint64_t orig_size);
  bool should_split(std::uint32_t n, std::uint64_t size) const;
  void free_block(std::uint32_t n);
  std::uint64_t try_merge_blocks(std::uint32_t dst, std::uint32_t src);
  bool release_available_cached_blocks(Pool& pool, std::uint32_t stream, std::uint64_t size);
  void release_cached_blocks();
  void release_blocks(Pool& pool);
  void release_block(std::uint32_t n);
  void garbage_collect_cached_blocks();

  // --- expandable segments (pytorch_expandable.cpp) ---
  std::uint32_t find_expandable_block(Pool& pool, std::uint32_t stream, std::uint64_t size);
  bool map_block(std::uint32_t n, std::uint64_t size);
  std::uint32_t try_allocate_expandable_block(Pool& pool, std::uint32_t stream, std::uint64_t size);
  void unmap_block(std::uint32_t n);
  void release_expandable_segment(std::uint32_t n);
  // 1 1/8 x capacity rounded up to whole pages of the pool (upstream: of totalGlobalMem).
  std::uint64_t reservation_size(bool small_pool) const;
  // The first unused recorded reservation (plan entry with expandable) of this stream and pool
  // whose base is free in the model: marks it used, sets `size` (at least the recorded extent,
  // at most up to the next segment) and returns its base.
  std::uint64_t clamp_reservation(std::uint64_t base, std::uint64_t size, std::uint64_t page,
                                  std::uint64_t other_base = 0) const;
  std::optional<std::uint64_t> take_planned_reservation(std::uint32_t stream, bool small_pool, std::uint64_t& size,
                                                        std::uint64_t below = ~std::uint64_t{0});
  // seed() of the expandable SeedSegments (mapped ranges): one reservation per (stream, pool),
  // at the recorded base when planned, else at the lowest range. Fills per_seed[i] for them.
  void seed_expandable(std::span<const SeedSegment> seeds, std::vector<std::vector<Block>>& per_seed);

  // --- the device seam: every byte of segment memory comes and goes through these ---
  // cudaMalloc / cudaFree of a whole segment (capacity already checked by the caller).
  // `from_device` tells whether the memory came from DeviceMemory (else a recorded address).
  std::optional<std::uint64_t> acquire_segment(std::uint64_t size, std::uint32_t stream, bool small, bool& from_device);
  void release_segment(const Segment& s);
  // cuMemAddressReserve / cuMemAddressFree of an expandable segment's virtual range.
  // `size` comes in as the model's reservation size and may be adjusted to a recorded one.
  std::uint64_t reserve_address_space(std::uint64_t& size, std::uint32_t stream, bool small);
  void release_address_space(std::uint64_t addr, std::uint64_t size);
  // Tells the observer (observe_segments) of a change; called by the seam and the page mapping.
  void report(SegmentAction action, std::uint64_t addr, std::uint64_t size, std::uint32_t stream, bool small,
              bool expandable) const {
    if (observer != nullptr) {
      observer->segment_changed(SegmentChange{action, addr, Bytes{size}, stream,
                                              small ? SegmentPool::Small : SegmentPool::Large, expandable});
    }
  }

  // --- helpers ---
  Pool& pool_of(const Node& n) { return n.small ? small : large; }
  bool is_split(const Node& n) const { return n.prev != pytorch_detail::kNil || n.next != pytorch_detail::kNil; }
  bool in_expandable(const Node& n) const { return n.expandable; }
  std::uint32_t new_node(std::uint32_t seg);  // a free, mapped node of segment `seg`
  void delete_node(std::uint32_t n);
  std::uint32_t new_segment(std::uint64_t addr, std::uint64_t size, std::uint32_t stream, bool small, bool expandable,
                            bool from_device);
  void delete_segment(std::uint32_t s);
  void insert_into_blocks(std::uint32_t n);  // also stamps the GC age base
  void erase_from_blocks(std::uint32_t n);
  void insert_unmapped(std::uint32_t n);
  void erase_unmapped(std::uint32_t n);
  void link_after(std::uint32_t n, std::uint32_t after);    // n becomes after's next
  void link_before(std::uint32_t n, std::uint32_t before);  // n becomes before's prev
  bool overlaps_segment(std::uint64_t addr, std::uint64_t size) const;
  bool gc_enabled() const { return opts.garbage_collection_threshold > 0.0; }
  std::uint64_t gc_count(const Node& n) {
    return static_cast<std::uint64_t>(pool_of(n).get_free_blocks_call_count - n.gc_count_base);
  }

  // --- inspection (pytorch_inspect.cpp) ---
  AllocatorStats stats() const;
  std::vector<Range> ranges() const;
  bool free_ranges_by_address(std::vector<Range>& out) const;
  void segment_starts(std::vector<std::uint64_t>& out) const;
  std::uint64_t ranges_end() const;
  void check_invariants() const;
  std::vector<Block> seed_segment(std::uint64_t addr, std::uint32_t stream, bool small,
                                  std::span<const PyTorchSeedBlock> blocks);
  std::vector<SeedSegment> snapshot() const;

  Bytes capacity;
  PyTorchOptions opts;
  DeviceMemory device;
  pytorch_detail::NodeArena arena{kTreeNodeBytes};  // before the pools: outlives their nodes
  Pool small{true, &arena};
  Pool large{false, &arena};
  std::vector<Node> nodes;
  std::vector<std::uint32_t> free_nodes;
  std::vector<Segment> segs;
  std::vector<std::uint32_t> free_segs;
  std::map<std::uint64_t, std::uint32_t> seg_by_addr;
  detail::AddrMap<std::uint32_t> live;  // allocated block address -> node
  std::vector<std::uint32_t> scratch;   // release_blocks work list

  std::uint64_t reserved = 0;
  std::uint64_t allocated = 0;
  std::uint64_t requested = 0;
  std::uint64_t inactive_split = 0;
  std::uint64_t segment_count = 0;
  std::uint64_t expandable_count = 0;         // segments in use that are expandable
  mutable std::vector<std::uint64_t> starts;  // segment addresses, rebuilt when stale
  mutable bool starts_stale = true;
  std::uint64_t device_mallocs = 0;
  std::uint64_t device_frees = 0;
  std::uint64_t alloc_retries = 0;
  std::uint64_t oom_count = 0;
  // Largest cached free block: raised on insert, recomputed lazily by stats() after the
  // largest one may have left the pools.
  mutable std::uint64_t largest_free = 0;
  mutable bool largest_dirty = false;
  std::uint64_t next_segment_id = 1;
  std::vector<SegmentAddress> planned;  // recorded segment addresses, used in order
  std::size_t next_planned = 0;
  std::vector<bool> planned_used;  // expandable plan entries already given a reservation
  std::uint64_t next_va_top = DeviceMemory::kBaseAddress;
  SegmentObserver* observer = nullptr;  // observe_segments(): for the run log only
};

}  // namespace coopsim
