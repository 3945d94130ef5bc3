// pooch: the PoocH-like greedy (src/policy/hybrid.hpp; docs/models/pooch.md).

#include "hybrid.hpp"
#include "coopsim/policy/registry.hpp"
#include "hybrid_decisions.hpp"

namespace coopsim {

using hybrid_detail::Choice;
using hybrid_detail::Gap;

// Each step: over the gaps that cover the current peak, the action (swap or recompute) with the
// least estimated added time per byte saved; ties: swap, then the larger tensor, then the
// earlier gap.
void PoochPolicy::choose(const hybrid_detail::HybridPlanner& planner, std::size_t b, std::size_t e, double limit,
                         std::vector<std::uint64_t>& load, std::vector<Gap>& chosen) {
  if (load.empty()) return;
  hybrid_detail::GreedyState state(planner, b, e, load, chosen);
  for (;;) {
    const auto [peak, at] = state.peak();
    if (static_cast<double>(peak) <= limit) break;
    const Gap* best = nullptr;
    Choice best_choice = Choice::Keep;
    SimTime best_cost{0};
    double best_score = 0;
    for (const Gap& g : state.opened_before(at)) {
      if (!(g.last_use < at && at < g.next_use) || state.taken(g)) continue;
      auto consider = [&](Choice c, SimTime cost) {
        const double score = static_cast<double>(cost.count()) / static_cast<double>(g.size.value);
        const bool better = best == nullptr || score < best_score ||
                            (score == best_score && c == Choice::Swap && best_choice == Choice::Recompute) ||
                            (score == best_score && c == best_choice && g.size > best->size);
        if (!better) return;
        best = &g;
        best_choice = c;
        best_cost = cost;
        best_score = score;
      };
      if (planner.covers(g, Choice::Swap, at)) consider(Choice::Swap, hybrid_detail::HybridPlanner::swap_stall(g));
      if (g.recomputable && planner.covers(g, Choice::Recompute, at)) {
        consider(Choice::Recompute, state.recompute_cost(g));
      }
    }
    if (best == nullptr) break;  // nothing left that lowers this peak
    Gap g = *best;
    g.choice = best_choice;
    g.cost = best_cost;
    state.take(g, chosen);
  }
  state.store(load);
}

// Its line in the registry (src/policy/registry.cpp).
PolicyRegistry::Entry pooch_policy_entry() { return PolicyRegistry::entry_for<PoochPolicy>(); }

}  // namespace coopsim
