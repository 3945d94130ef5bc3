// `pytorch`: a model of PyTorch's CUDA caching allocator (DeviceCachingAllocator).
//
// Follows pytorch/pytorch @001074d2 c10/cuda/CUDACachingAllocator.cpp (rounding, small/large
// pools ordered by (stream, size, address), segment sizes, best-fit get_free_block with the
// max_split_size rejections, should_split, segment-local try_merge_blocks, the malloc slow path
// alloc_block -> release_available_cached_blocks -> release_cached_blocks -> OOM, GC by block age,
// expandable segments) and the AllocatorConfig of @065861fb (defaults, the 16 power-of-two
// rounding buckets). Written in our own words from docs/models/pytorch-caching-allocator.md;
// no upstream code.
//
// The device budget (`capacity`) plays the role of the per-process memory fraction
// (allowed_memory_maximum, set_fraction = true) and of the physical device at the same time:
// taking a segment or mapping pages fails when reserved + size would exceed it.
// Departures from upstream are listed in src/alloc/pytorch_impl.hpp.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "coopsim/alloc/allocator.hpp"
#include "coopsim/base/params.hpp"
#include "coopsim/base/units.hpp"

namespace coopsim {

enum class PyTorchPool : std::uint8_t { Small, Large };

struct PyTorchOptions {
  static constexpr std::uint64_t kOff = std::numeric_limits<std::uint64_t>::max();
  static constexpr std::size_t kRoundupBuckets = 16;  // power-of-two intervals 1 MiB .. 64 GiB

  // Free blocks >= this are never split and only serve requests >= it (SIZE_MAX = off).
  // When set it must be >= 20 MiB (upstream: max_split_size_mb >= 20).
  Bytes max_split_size{kOff};
  // A request >= max_split_size may take a cached block smaller than request + this.
  Bytes max_non_split_rounding_size{20ULL << 20};
  // Divisions per power-of-two bucket; bucket i covers sizes with floor(log2) == 20 + i (bucket 0
  // also everything below 1 MiB, bucket 15 everything from 32 GiB). 0 or 1 = plain 512 rounding.
  std::array<std::uint32_t, kRoundupBuckets> roundup_power2_divisions{};
  // Fraction of the capacity above which cached, unsplit large blocks are garbage-collected
  // before a new segment is taken; 0 = off, else in (0, 1).
  double garbage_collection_threshold = 0.0;
  bool expandable_segments = false;

  // The same division count for every bucket (what the single `roundup_power2_divisions`
  // parameter sets).
  void set_roundup_power2_divisions(std::uint32_t divisions) { roundup_power2_divisions.fill(divisions); }
};

// One block of a segment given to seed_segment(), in address order.
struct PyTorchSeedBlock {
  Bytes size;              // rounded block size
  Bytes requested;         // for allocated blocks; ignored for free ones
  bool allocated = false;  // "active_allocated" / "active_awaiting_free" -> true, "inactive" -> false
};

class PyTorchCachingAllocator final : public Allocator {
 public:
  static constexpr std::string_view kName = "pytorch";
  static constexpr std::string_view kHelp =
      "PyTorch CUDA caching allocator (c10 DeviceCachingAllocator): 512 B rounding, small (<= 1 MiB, "
      "2 MiB segments) and large pools, per-stream best fit, splitting, segment-local merging, "
      "release-and-retry before OOM, optional max_split_size, power-of-two rounding, GC and "
      "expandable segments";

  // Keys: max_split_size (bytes, "0" = off, else >= 20MiB), max_non_split_rounding_size (bytes,
  // default 20MiB), roundup_power2_divisions (int, one value for all buckets, 0 = off, else a
  // power of two), garbage_collection_threshold (float, 0 = off, else in (0, 1)),
  // expandable_segments (bool).
  static std::vector<ParamDoc> param_docs();
  static std::unique_ptr<Allocator> create(const Params& p, Bytes capacity);

  // Throws ConfigError on invalid options.
  explicit PyTorchCachingAllocator(Bytes capacity, PyTorchOptions opts = {});
  ~PyTorchCachingAllocator() override;
  PyTorchCachingAllocator(const PyTorchCachingAllocator&) = delete;
  PyTorchCachingAllocator& operator=(const PyTorchCachingAllocator&) = delete;

  [[nodiscard]] std::optional<Block> allocate(const AllocRequest& request) override;
  void deallocate(const Block& block) override;  // InvariantError for a block that is not live
  [[nodiscard]] Bytes placement_size(const AllocRequest& r) const override {
    return Bytes{round_size(r.size.value, options())};
  }
  void release_cached() override;  // torch.cuda.empty_cache()
  [[nodiscard]] AllocatorStats stats() const override;
  [[nodiscard]] std::vector<Range> ranges() const override;  // mapped memory only
  // Layout-aware searches: while no segment is expandable (blocks then tile each segment), the
  // cached free blocks of both pools by address; otherwise false (the searches read ranges()).
  bool free_ranges_by_address(std::vector<Range>& out) const override;
  void segment_starts(std::vector<std::uint64_t>& out) const override;
  [[nodiscard]] std::uint64_t ranges_end() const override;
  void check_invariants() const override;

  // DeviceStats extras.
  [[nodiscard]] Bytes inactive_split_bytes() const;  // free bytes inside split, non-expandable segments
  [[nodiscard]] std::uint64_t ooms() const;          // allocate() calls that returned nullopt
  [[nodiscard]] const PyTorchOptions& options() const;

  // Seeds a pre-existing cudaMalloc'd segment (e.g. one of a memory snapshot's `segments`) at
  // `addr`: its blocks tile it in address order, sizes summing to the segment size. Adjacent free
  // blocks are merged, as the allocator would have. The segment counts in reserved and segments
  // (not in device_mallocs); when released it is not given back to DeviceMemory. Returns the
  // allocated blocks, in order, as deallocate() expects them. Throws ConfigError when a block is
  // empty, the segment overlaps another one or the capacity would be exceeded. (Expandable
  // segments are seeded through seed().)
  std::vector<Block> seed_segment(std::uint64_t addr, std::uint32_t stream, PyTorchPool pool,
                                  std::span<const PyTorchSeedBlock> blocks);

  // Allocator interface for simulating recordings: seed() takes cudaMalloc segments through seed_segment and
  // expandable mapped ranges (one reservation per stream and pool, at the planned base; ConfigError
  // without expandable_segments or off the page grid), assign_segment_addresses() places new
  // segments and reservations at the recorded addresses when they match (see
  // src/alloc/pytorch_impl.hpp), snapshot()
  // reports each cudaMalloc segment, and each contiguous mapped range of an expandable segment,
  // as a memory snapshot's `segments` list does.
  std::vector<Block> seed(std::span<const SeedSegment> segments) override;
  void assign_segment_addresses(std::span<const SegmentAddress> planned) override;
  [[nodiscard]] std::optional<std::vector<SeedSegment>> snapshot() const override;
  // Reports every cudaMalloc / cudaFree of a segment (recorded addresses included) and every page
  // map / unmap of an expandable segment, as PyTorch's history records them.
  bool observe_segments(SegmentObserver* observer) override;

  // The allocator's rounding rules, for tests and trace tools.
  [[nodiscard]] static std::uint64_t round_size(std::uint64_t size, const PyTorchOptions& opts);
  [[nodiscard]] static std::uint64_t allocation_size(std::uint64_t rounded_size);
  // Next multiple of (power-of-two floor of size) / divisions; a power of two stays (1200, 4 ->
  // 1280). round_size applies it only when divisions > 1 and size > 512 x divisions.
  [[nodiscard]] static std::uint64_t roundup_power2_next_division(std::uint64_t size, std::uint64_t divisions);

  struct Impl;  // opaque; defined in src/alloc/pytorch_impl.hpp

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace coopsim
