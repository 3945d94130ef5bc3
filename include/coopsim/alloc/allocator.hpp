// Allocator models: address-space placement only. No time, no eviction, no policy knowledge.
//
// Contract:
//  * allocate() returns a Block whose [addr, addr+size) does not overlap any other live block,
//    with size >= request.size (rounding), or nullopt when the model cannot serve it within the
//    device capacity (after its own upstream retry rules, e.g. releasing cached segments).
//  * deallocate() takes a Block exactly as returned by allocate() and still live.
//  * stats() is O(1) or O(log n); the engine reads it after every alloc/free.
//  * check_invariants() verifies every internal structure and throws InvariantError; tests call
//    it after every step, the CLI under --paranoid.
//  * Simulating a recording (e.g. a PyTorch memory snapshot) may start from a recorded state:
//    seed() installs it, assign_segment_addresses() hands over the device addresses the recording's
//    new segments received, snapshot() reads the state back in the same form. Models without
//    segments or without seeding support keep the defaults.
//  * observe_segments() lets the run log see the model's device segments come and go (the
//    `pytorch` model reports them; the others keep the default and report nothing).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "coopsim/base/error.hpp"
#include "coopsim/model/block.hpp"
#include "coopsim/model/segments.hpp"
#include "coopsim/model/report.hpp"
#include "coopsim/base/units.hpp"

namespace coopsim {

struct Trace;

struct AllocRequest {
  Bytes size;                // requested bytes, > 0
  std::uint32_t stream = 0;  // CUDA stream the allocation is made on
  TensorId tensor{};         // the trace tensor (storage root) the block is for: diagnostics,
                             // offline plans (smartpool) and placement hints
  bool high_end = false;     // policy hint: take the high end of the chosen hole (Coop's
                             // op-guided allocation); models without the rule ignore it
};

// PyTorch DeviceStats vocabulary (c10/core/CachingDeviceAllocator.h).
struct AllocatorStats {
  Bytes capacity;                    // device memory the model may take (the budget)
  Bytes reserved;                    // taken from the device: segments, reservations, the arena
  Bytes allocated;                   // sum of live block sizes (rounded)
  Bytes requested;                   // sum of live requested sizes
  Bytes active;                      // allocated + blocks not yet reusable (equal here)
  Bytes largest_free;                // largest single range allocate() could hand out without growing
  Bytes footprint;                   // fixed arenas: highest used end offset (what a tight arena
                                     // would need); other models: equal to reserved
  std::uint64_t free_ranges = 0;     // number of free (cached) ranges inside reserved memory
  std::uint64_t segments = 0;        // device allocations (cudaMalloc) currently held
  std::uint64_t device_mallocs = 0;  // cumulative cudaMalloc calls
  std::uint64_t device_frees = 0;    // cumulative cudaFree calls
  std::uint64_t alloc_retries = 0;   // allocations that needed a cache flush to succeed
};

// One free or used range, address-ordered, for diagnostics, tests and layout-aware policies.
struct Range {
  std::uint64_t addr = 0;
  Bytes size;
  bool free = false;
  std::uint64_t segment = 0;  // id of the device allocation it belongs to
};

// Told of every change a model makes to its device segments (observe_segments()). Only for
// the record: an observer must not call back into the allocator.
class SegmentObserver {
 public:
  virtual ~SegmentObserver() = default;
  virtual void segment_changed(const SegmentChange& change) = 0;
};

// Thrown by the default Allocator::seed(); the engine names the allocator in its message.
class SeedUnsupported : public ConfigError {
 public:
  SeedUnsupported() : ConfigError("allocator", "this allocator model cannot start from a recorded state") {}
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Offline (lifetime-aware) models plan from the whole trace here; the engine calls it once,
  // before seed() and the simulation. Online models ignore it.
  virtual void prepare(const Trace& trace) { (void)trace; }
  [[nodiscard]] virtual std::optional<Block> allocate(const AllocRequest& request) = 0;
  virtual void deallocate(const Block& block) = 0;
  // False for models where addresses carry no meaning (fungible memory): layout-aware
  // policies then fall back to their address-blind rule.
  [[nodiscard]] virtual bool address_aware() const { return true; }
  // The bytes allocate() would take for `request` (its rounding), for eviction searches.
  [[nodiscard]] virtual Bytes placement_size(const AllocRequest& request) const { return request.size; }
  // emptyCache(): give cached (fully free) device allocations back. No-op where not modelled.
  virtual void release_cached() {}
  [[nodiscard]] virtual AllocatorStats stats() const = 0;
  // Address-ordered list of every range the model manages (free and used). O(n); not hot.
  [[nodiscard]] virtual std::vector<Range> ranges() const = 0;
  // For eviction searches that walk only the free and the evictable ranges (Coop's window, DTE)
  // instead of ranges(): fills `out` with the free ranges in address order and returns true;
  // then segment_starts() gives the start address of every segment, in order (ranges tile each
  // segment, so two ranges that touch lie in different segments only when the second starts
  // one), and ranges_end() the end of the last range. Models that do not keep these cheaply
  // return false (the default) and the searches walk ranges().
  virtual bool free_ranges_by_address(std::vector<Range>& out) const {
    (void)out;
    return false;
  }
  virtual void segment_starts(std::vector<std::uint64_t>& out) const { out.clear(); }
  [[nodiscard]] virtual std::uint64_t ranges_end() const { return 0; }
  // Where the addresses that eviction may reclaim end: blocks at or above it lie in an area no
  // eviction serves (OneFlow's small-piece area: bestfit.small_area), which eviction searches
  // neither walk nor evict from. The default: every address.
  [[nodiscard]] virtual std::uint64_t reclaimable_end() const { return kEveryAddress; }
  static constexpr std::uint64_t kEveryAddress = ~std::uint64_t{0};
  virtual void check_invariants() const = 0;

  // Installs recorded segments (taken from the device before the simulation starts) with their
  // blocks. Returns the allocated blocks in input order (segment by segment, then by address),
  // exactly as deallocate() expects them. Throws ConfigError on a layout the model cannot hold
  // (overlaps, capacity, a pool or block it would never have produced) and SeedUnsupported by
  // default. Call it on a fresh allocator, before any allocate().
  virtual std::vector<Block> seed(std::span<const SeedSegment> segments) {
    (void)segments;
    throw SeedUnsupported();
  }
  // The device addresses the recording's new segments received, in order: a model that takes a
  // segment of the same size, stream and pool as the next unused entry places it there (a
  // recorded cudaMalloc result); any other segment goes where the model would put it. Ignored
  // by default.
  virtual void assign_segment_addresses(std::span<const SegmentAddress> planned) { (void)planned; }
  // The current segments and their blocks, in address order, in the form seed() takes; nullopt
  // for models that do not keep segments.
  [[nodiscard]] virtual std::optional<std::vector<SeedSegment>> snapshot() const { return std::nullopt; }
  // From now on, tell `observer` (nullptr: nobody) of every segment the model takes from or
  // gives back to the device, and of expandable pages it maps or unmaps; segments installed by
  // seed() are not changes. Returns whether this model reports segments: the default reports
  // none and returns false (its snapshot() is nullopt too).
  virtual bool observe_segments(SegmentObserver* observer) {
    (void)observer;
    return false;
  }
  // Offline pool models report their pool and fall-back figures; others nullopt.
  [[nodiscard]] virtual std::optional<PoolFigures> pool_figures() const { return std::nullopt; }
};

// The simulated device beneath caching allocators: cudaMalloc/cudaFree against a capacity.
// Addresses are handed out by a bump pointer aligned to `alignment` and never reused, so
// consecutive device allocations are adjacent (as cudaMalloc often makes them) and models
// must not merge across them on their own rules.
class DeviceMemory {
 public:
  static constexpr std::uint64_t kBaseAddress = 0x7f0000000000ULL;
  explicit DeviceMemory(Bytes capacity, std::uint64_t alignment = 512) : capacity_(capacity), alignment_(alignment) {}

  // nullopt when used + size would exceed the capacity (cudaErrorMemoryAllocation).
  [[nodiscard]] std::optional<std::uint64_t> malloc(Bytes size);
  void free(std::uint64_t addr, Bytes size);

  [[nodiscard]] Bytes capacity() const { return capacity_; }
  [[nodiscard]] Bytes used() const { return used_; }
  [[nodiscard]] std::uint64_t mallocs() const { return mallocs_; }
  [[nodiscard]] std::uint64_t frees() const { return frees_; }

 private:
  Bytes capacity_;
  std::uint64_t alignment_;
  Bytes used_;
  std::uint64_t next_ = kBaseAddress;
  std::uint64_t mallocs_ = 0;
  std::uint64_t frees_ = 0;
};

}  // namespace coopsim
