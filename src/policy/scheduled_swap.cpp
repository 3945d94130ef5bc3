// Plan execution and fallback shared by autoswap and vdnn (scheduled_swap.hpp).
#include "scheduled_swap.hpp"

#include "swap_schedule.hpp"

namespace coopsim {

ScheduledSwapPolicy::ScheduledSwapPolicy(bool fallback)
    : fallback_(fallback), schedule_(std::make_unique<swap_detail::SwapSchedule>()) {}
ScheduledSwapPolicy::~ScheduledSwapPolicy() = default;

const swap_detail::UseIndex& ScheduledSwapPolicy::index_uses(const Trace& trace) {
  uses_ = std::make_unique<swap_detail::UseIndex>(trace);
  return *uses_;
}

void ScheduledSwapPolicy::set_plan(std::vector<swap_detail::PlannedSwap> plan) { schedule_->set(std::move(plan)); }

std::vector<Action> ScheduledSwapPolicy::after_event(const MemoryView& view) { return schedule_->due(view); }

std::vector<Action> ScheduledSwapPolicy::on_alloc_failure(const AllocRequest&, const MemoryView& view) {
  if (!fallback_ || !uses_) return {};
  return swap_detail::furthest_next_use_swap_out(*uses_, view);
}

std::vector<ScheduledSwapPolicy::Entry> ScheduledSwapPolicy::plan() const {
  std::vector<Entry> out;
  for (const swap_detail::PlannedSwap& p : schedule_->plan()) out.push_back({p.tensor, p.out_at, p.in_at, p.use_at});
  return out;
}

}  // namespace coopsim
