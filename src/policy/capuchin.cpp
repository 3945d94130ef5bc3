// capuchin: the Capuchin-like hybrid (src/policy/hybrid.hpp;
// docs/models/swap-policies.md): swap by FreeTime while copies hide, then MSPS for the rest.
#include <algorithm>
#include <numeric>

#include "hybrid.hpp"
#include "coopsim/policy/registry.hpp"
#include "hybrid_decisions.hpp"

namespace coopsim {

using hybrid_detail::Choice;
using hybrid_detail::Gap;
using hybrid_detail::HybridPlanner;

namespace {

// FreeTime = SwapInStart - SwapOutEnd = idle - out - in (ns; negative when the copies cannot hide).
std::int64_t free_time(const Gap& g) { return (g.idle - sat_add(g.out, g.in)).count(); }

}  // namespace

void CapuchinPolicy::choose(const HybridPlanner& planner, std::size_t b, std::size_t e, double limit,
                            std::vector<std::uint64_t>& load, std::vector<Gap>& chosen) {
  if (load.empty()) return;
  hybrid_detail::GreedyState state(planner, b, e, load, chosen);
  const std::vector<Gap>& all = state.gaps();
  auto take = [&](const Gap& from, Choice c, SimTime cost) {
    Gap g = from;
    g.choice = c;
    g.cost = cost;
    state.take(g, chosen);
  };
  auto over = [&](std::size_t& at) {
    const auto [peak, index] = state.peak();
    at = index;
    return static_cast<double>(peak) > limit;
  };
  auto open = [&](const Gap& g, std::size_t at) { return g.last_use < at && at < g.next_use && !state.taken(g); };

  // Phase 1: swaps in descending FreeTime (stable on the gaps' order), while they hide.
  std::vector<std::size_t> order(all.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t x, std::size_t y) { return free_time(all[x]) > free_time(all[y]); });
  std::size_t at = 0;
  while (over(at)) {
    const Gap* pick = nullptr;
    for (std::size_t k : order) {
      const Gap& g = all[k];
      if (free_time(g) <= 0) break;
      if (open(g, at) && planner.covers(g, Choice::Swap, at)) {
        pick = &g;
        break;
      }
    }
    if (pick == nullptr) break;
    take(*pick, Choice::Swap, SimTime{0});
  }

  // Phase 2: the highest MSPS among recomputable gaps covering the peak (re-evaluated after
  // each choice), swapped or recomputed, whichever adds less time; swaps alone when no gap
  // can be recomputed.
  while (over(at)) {
    const Gap* by_msps = nullptr;
    SimTime msps_cost{0};
    double best_msps = -1;
    const Gap* by_stall = nullptr;
    for (const Gap& g : state.opened_before(at)) {
      if (!open(g, at)) continue;
      if (planner.covers(g, Choice::Swap, at) &&
          (by_stall == nullptr || HybridPlanner::swap_stall(g) < HybridPlanner::swap_stall(*by_stall))) {
        by_stall = &g;
      }
      if (!g.recomputable || !planner.covers(g, Choice::Recompute, at)) continue;
      const SimTime cost = state.recompute_cost(g);
      const double msps =
          static_cast<double>(g.size.value) / static_cast<double>(std::max<std::int64_t>(cost.count(), 1));
      if (msps > best_msps) {
        best_msps = msps;
        by_msps = &g;
        msps_cost = cost;
      }
    }
    if (by_msps != nullptr) {
      const bool swap_ok = planner.covers(*by_msps, Choice::Swap, at);
      const SimTime stall = HybridPlanner::swap_stall(*by_msps);
      if (swap_ok && stall <= msps_cost) {
        take(*by_msps, Choice::Swap, stall);
      } else {
        take(*by_msps, Choice::Recompute, msps_cost);
      }
    } else if (by_stall != nullptr) {
      take(*by_stall, Choice::Swap, HybridPlanner::swap_stall(*by_stall));
    } else {
      break;  // nothing left that lowers this peak
    }
  }
  state.store(load);
}

// Its line in the registry (src/policy/registry.cpp).
PolicyRegistry::Entry capuchin_policy_entry() { return PolicyRegistry::entry_for<CapuchinPolicy>(); }

}  // namespace coopsim
