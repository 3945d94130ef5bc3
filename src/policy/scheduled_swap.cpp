// Plan execution and fallback shared by autoswap and vdnn (scheduled_swap.hpp).
#include "scheduled_swap.hpp"

#include "furthest_next_use.hpp"
#include "swap_schedule.hpp"

namespace coopsim {

ScheduledSwapPolicy::ScheduledSwapPolicy(bool fallback)
    : fallback_(fallback), schedule_(std::make_unique<swap_detail::SwapSchedule>()) {}
ScheduledSwapPolicy::~ScheduledSwapPolicy() = default;

const swap_detail::UseIndex& ScheduledSwapPolicy::index_uses(const Trace& trace) {
  uses_ = std::make_unique<swap_detail::UseIndex>(trace);
  furthest_ = std::make_unique<swap_detail::FurthestNextUse>(*uses_, trace);
  return *uses_;
}

void ScheduledSwapPolicy::set_plan(std::vector<swap_detail::PlannedSwap> plan) { schedule_->set(std::move(plan)); }

std::vector<Action> ScheduledSwapPolicy::after_event(const MemoryView& view) {
  std::vector<Action> actions = schedule_->due(view);
  if (furthest_) {
    for (const Action& a : actions) {
      if (a.kind == Action::Kind::SwapIn) furthest_->note_swap_in(index_of(a.tensor));
    }
  }
  return actions;
}

std::vector<Action> ScheduledSwapPolicy::on_alloc_failure(const AllocRequest&, const MemoryView& view) {
  if (!fallback_ || !furthest_) return {};
  return furthest_->choose(view);
}

std::vector<ScheduledSwapPolicy::Entry> ScheduledSwapPolicy::plan() const {
  std::vector<Entry> out;
  for (const swap_detail::PlannedSwap& p : schedule_->plan()) out.push_back({TensorId{p.tensor}, p.out_at, p.in_at, p.use_at});
  return out;
}

}  // namespace coopsim
