// The part of the offline swap planners (autoswap, vdnn) that is the same for both: prepare()
// makes a plan of PlannedSwaps from the trace's use index; the plan is then carried out by
// swap_detail::SwapSchedule at the planned event indices, and an allocation the plan did not
// prevent falls back (when enabled) to swapping out the tensor used furthest in the future.
#pragma once

#include <memory>
#include <vector>

#include "coopsim/policy/policy.hpp"

namespace coopsim {

namespace swap_detail {
class UseIndex;
class FurthestNextUse;
class SwapSchedule;
struct PlannedSwap;
}  // namespace swap_detail

class ScheduledSwapPolicy : public Policy {
 public:
  [[nodiscard]] std::vector<Action> on_alloc_failure(const AllocRequest& request, const MemoryView& view) override;
  [[nodiscard]] std::vector<Action> after_event(const MemoryView& view) override;

  // The plan made by prepare(), sorted by swap-out index.
  using Entry = SwapPlanEntry;
  [[nodiscard]] std::vector<Entry> plan() const;

 protected:
  explicit ScheduledSwapPolicy(bool fallback);
  ~ScheduledSwapPolicy() override;
  // Builds the use index of `trace` (the first step of prepare()).
  const swap_detail::UseIndex& index_uses(const Trace& trace);
  void set_plan(std::vector<swap_detail::PlannedSwap> plan);

 private:
  bool fallback_;
  std::unique_ptr<swap_detail::UseIndex> uses_;
  std::unique_ptr<swap_detail::FurthestNextUse> furthest_;  // the fallback's candidates (after uses_)
  std::unique_ptr<swap_detail::SwapSchedule> schedule_;
};

}  // namespace coopsim
