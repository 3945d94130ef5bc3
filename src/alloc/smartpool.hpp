// `smartpool`: SmartPool, SINGA's lifetime-aware offline pool (apache/singa PR #412 @0f3722d3,
// src/core/memory/memory.cc SmartMemPool; docs/models/smartpool.md). prepare() plans one
// iteration of the trace: its alloc/free pairs become blocks with half-open lifetimes, placed
// greedily by size (best fit with SINGA's quirk, or first fit) into one pool; at the planned
// iteration the pool is taken by one device allocation and every later request that matches a
// planned slot is served from it; anything else goes to the device (cudaMalloc/cudaFree).
// The rules, their sources and the departures are listed in src/alloc/smartpool.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "coopsim/alloc/allocator.hpp"
#include "coopsim/base/params.hpp"

namespace coopsim {

enum class SmartPoolFit : std::uint8_t { BestFit, FirstFit };

// How a request is matched to a planned slot.
enum class SmartPoolMatch : std::uint8_t {
  Tensor,  // a slot planned for the same tensor (AllocRequest::tensor), same size
  Index,   // SINGA's rule: the slot at (allocation index - first planned index) mod slots
};

struct SmartPoolOptions {
  SmartPoolFit fit = SmartPoolFit::BestFit;
  bool bf_quirk = true;              // best fit: ignore the gap below the lowest range (>= 2 ranges)
  std::int64_t plan_iteration = -1;  // -1: the second iteration if there are >= 2, else the first
  SmartPoolMatch match = SmartPoolMatch::Tensor;
};

// One planned block: the k-th allocation of the planned iteration.
struct SmartPoolSlot {
  std::uint32_t tensor = 0;  // TensorId index of the allocation
  Bytes size;
  std::uint64_t r = 0;           // trace event index of the alloc
  std::uint64_t d = 0;           // of the free; cross-iteration: the end of the iteration's events
  bool cross_iteration = false;  // not freed inside the planned iteration
  std::uint64_t offset = 0;      // primary copy, from the pool's start
  friend bool operator==(const SmartPoolSlot&, const SmartPoolSlot&) = default;
};

struct SmartPoolPlan {
  std::uint32_t iteration = 0;       // the planned iteration
  std::uint64_t first_alloc = 0;     // trace allocations before it: the switch point
  std::vector<SmartPoolSlot> slots;  // in allocation order inside the planned iteration
  Bytes cross_size;                  // SINGA's offset_cross_iteration: cross blocks' height
  Bytes pool_size;                   // 2 x cross_size + height of the normal blocks
  bool oversized = false;            // the pool would need 2^63 bytes or more: it is never
                                     // created (pool_size saturated at 2^64 - 1)
};

// Plans one iteration of `trace` (pure; the allocator's prepare() calls it). Throws ConfigError
// ("smartpool.plan_iteration") when the requested iteration is not in the trace and
// InvariantError when the placement it computed is not valid.
SmartPoolPlan plan_smartpool(const Trace& trace, const SmartPoolOptions& options);

// Places blocks (size, r, d, cross_iteration set; offset written) by SINGA's rules: cross-iteration
// blocks from 0, then normal blocks from 2 x their height. Sets plan.cross_size/pool_size.
void place_smartpool_slots(SmartPoolPlan& plan, const SmartPoolOptions& options);

// Run figures for reports (not part of AllocatorStats).
struct SmartPoolFigures {
  bool planned = false;                 // prepare() found an iteration with allocations
  bool pool_created = false;            // the pool's device allocation succeeded
  bool pool_refused = false;            // it did not fit the capacity: everything fell back
  Bytes pool_size;                      // planned pool bytes (held from the switch point on)
  Bytes cross_size;                     // bytes of one copy of the cross-iteration blocks
  std::uint64_t pool_allocs = 0;        // requests served from the pool
  std::uint64_t fallback_allocs = 0;    // requests served by the device
  Bytes fallback_bytes;                 // their total bytes
  std::uint64_t mismatched_allocs = 0;  // fallbacks after the switch point (no usable slot)
  Bytes mismatched_bytes;
  Bytes fallback_live;       // device bytes held by fallback blocks now
  Bytes peak_fallback_live;  // their maximum
};

class SmartPoolAllocator final : public Allocator {
 public:
  static constexpr std::string_view kName = "smartpool";
  static constexpr std::string_view kHelp =
      "SINGA SmartPool (offline, lifetime-aware): plans one iteration's blocks by size with best "
      "or first fit into one pool, serves matching requests from it from that iteration on, "
      "everything else by exact-size cudaMalloc";
  static constexpr std::uint64_t kDeviceAlignment = 512;  // addresses of device allocations

  static std::vector<ParamDoc> param_docs();
  static std::unique_ptr<Allocator> create(const Params& p, Bytes capacity);

  explicit SmartPoolAllocator(Bytes capacity, SmartPoolOptions opts = {});

  // Plans from the trace. Without it every request goes to the device. Call once, before
  // any allocate(); throws InvariantError otherwise.
  void prepare(const Trace& trace) override;
  [[nodiscard]] std::optional<Block> allocate(const AllocRequest& request) override;
  void deallocate(const Block& block) override;
  [[nodiscard]] AllocatorStats stats() const override;
  [[nodiscard]] std::vector<Range> ranges() const override;
  void check_invariants() const override;

  [[nodiscard]] const SmartPoolOptions& options() const { return opts_; }
  [[nodiscard]] const std::optional<SmartPoolPlan>& plan() const { return plan_; }
  [[nodiscard]] const SmartPoolFigures& figures() const { return figures_; }
  [[nodiscard]] std::optional<PoolFigures> pool_figures() const override {
    if (!figures_.planned || !plan_) return std::nullopt;
    return PoolFigures{figures_.pool_size,      figures_.pool_created,     plan_->iteration,
                       figures_.pool_allocs,    figures_.fallback_allocs,  figures_.mismatched_allocs,
                       figures_.fallback_bytes, figures_.mismatched_bytes, figures_.peak_fallback_live};
  }
  // Device address of the pool; nullopt before the switch point or when it was refused.
  [[nodiscard]] std::optional<std::uint64_t> pool_address() const { return pool_addr_; }

 private:
  struct PoolUse {
    std::uint64_t size = 0;
    std::uint32_t slot = 0;
    bool backup = false;  // a cross-iteration block's second copy, cross_size above the primary
  };
  struct DeviceUse {
    std::uint64_t size = 0;
    std::uint64_t segment = 0;  // device allocation ordinal
  };

  // Pool offset for the request, or nullopt when no planned slot may serve it now.
  [[nodiscard]] std::optional<std::pair<std::uint32_t, bool>> find_slot(const AllocRequest& request) const;
  [[nodiscard]] bool pool_range_free(std::uint64_t offset, std::uint64_t size) const;
  [[nodiscard]] std::uint64_t slot_offset(std::uint32_t slot, bool backup) const;
  void switch_to_pool();
  Block take_slot(std::uint32_t slot, bool backup, const AllocRequest& request);
  std::optional<Block> device_alloc(const AllocRequest& request);
  void adjust_free_ranges(std::uint64_t begin, std::uint64_t end, bool inserting);

  Bytes capacity_;
  SmartPoolOptions opts_;
  DeviceMemory device_;
  std::optional<SmartPoolPlan> plan_;
  std::vector<std::uint32_t> first_slot_of_tensor_;       // Tensor match: tensor -> first slot
  std::vector<std::uint32_t> next_slot_same_tensor_;      // slot -> next slot of the same tensor
  std::vector<std::uint8_t> primary_live_, backup_live_;  // per slot
  bool prepared_ = false;
  bool switched_ = false;
  std::uint64_t allocations_ = 0;  // successful allocate() calls: the allocation index
  std::optional<std::uint64_t> pool_addr_;
  std::uint64_t pool_segment_ = 0;
  std::map<std::uint64_t, PoolUse> pool_live_;      // by pool offset
  std::map<std::uint64_t, DeviceUse> device_live_;  // fallback blocks by address
  std::uint64_t pool_live_bytes_ = 0;
  std::uint64_t pool_free_ranges_ = 0;
  SmartPoolFigures figures_;
};

}  // namespace coopsim
