// Shared machinery of the swap policies (autoswap, vdnn): the offline view of a trace they plan
// from (per-storage use positions, modelled event times, iteration and phase ranges), the
// runtime executor that turns a plan into SwapOut/SwapIn actions at the planned event indices,
// and the furthest-next-use (Belady) fallback for allocation failures the plan did not prevent.
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <set>
#include <utility>
#include <vector>

#include "coopsim/model/link.hpp"
#include "coopsim/policy/policy.hpp"

namespace coopsim::swap_detail {

// Where each storage tensor is used: Access events and the inputs/outputs of Compute events,
// views resolved to their base, ascending event index.
class UseIndex {
 public:
  explicit UseIndex(const Trace& trace);
  [[nodiscard]] const std::vector<std::uint32_t>& uses(std::uint32_t storage) const { return uses_[storage]; }
  // First use strictly after event `after`, or kNoIndex.
  [[nodiscard]] std::uint32_t next_use(std::uint32_t storage, std::size_t after) const;

 private:
  std::vector<std::vector<std::uint32_t>> uses_;
};

// Start and end time of every event in a stall-free simulation, the engine's clock rule: recorded
// timestamps are floors, op durations advance the clock.
struct EventTimes {
  std::vector<SimTime> start, end;
};
EventTimes model_event_times(const Trace& trace);

// Half-open event ranges [first, last) of the trace's iterations (one range when it has no
// iteration events; events before the first iteration event belong to the first range).
std::vector<std::pair<std::size_t, std::size_t>> iteration_ranges(const Trace& trace);

// Requested live bytes after each event (SINGA's origin_load, built in Append): +size at Alloc,
// -size at Free, tensors of the initial state live from the start.
std::vector<std::uint64_t> load_curve(const Trace& trace);

// One planned offload: swap `tensor` out at the first event >= out_at where it is resident and
// not in use, and back in at the first event >= in_at (before use_at) where it is swapped out
// and fits the budget by allocated bytes. Past use_at the engine's on-demand swap-in covers it.
struct PlannedSwap {
  std::uint32_t tensor = 0;
  std::uint32_t out_at = 0, in_at = 0, use_at = 0;
};

class SwapSchedule {
 public:
  void set(std::vector<PlannedSwap> plan);  // sorted here by (out_at, tensor)
  [[nodiscard]] std::vector<Action> due(const MemoryView& view);
  [[nodiscard]] const std::vector<PlannedSwap>& plan() const { return plan_; }

 private:
  enum class State : std::uint8_t { Waiting, Out, Done };
  std::vector<PlannedSwap> plan_;
  std::vector<State> state_;
  std::size_t next_ = 0;  // first plan entry not yet activated
  // Activated, not Done entries: those that may act at this event, in plan (= activation) order,
  // and those swapped out whose swap-in moment and use are still ahead, by the event that wakes
  // them (a pass over every active entry at every event was quadratic in the graph's width).
  std::set<std::uint32_t> awake_;
  std::priority_queue<std::pair<std::uint32_t, std::uint32_t>, std::vector<std::pair<std::uint32_t, std::uint32_t>>,
                      std::greater<>>
      parked_;
};

// Belady: swap out the resident, unpinned storage whose next use is furthest away (never used
// again counts as furthest; lowest index on ties). Empty when nothing qualifies.
std::vector<Action> furthest_next_use_swap_out(const UseIndex& uses, const MemoryView& view);

// Planning link: the named preset of include/coopsim/model/link.hpp.
LinkModel planning_link(const std::string& preset);
std::vector<std::string> link_preset_names();

}  // namespace coopsim::swap_detail
