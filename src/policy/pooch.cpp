// pooch: the PoocH-like greedy (src/policy/hybrid.hpp; docs/models/pooch.md).
#include <algorithm>
#include <limits>
#include <set>

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
  const std::vector<Gap> all = planner.gaps(b, e);
  std::set<std::pair<std::uint32_t, std::uint32_t>> taken;
  for (const Gap& g : chosen) taken.emplace(g.tensor, g.last_use);
  hybrid_detail::ChosenRecomputes recomputes(chosen);
  if (load.empty()) return;
  swap_detail::PeakTree tree(load, 0, load.size());  // apply + peak_of, in O(log n)
  // Recompute costs by gap, reused while no recompute was chosen since (ChosenRecomputes::version).
  std::vector<SimTime> cost_of(all.size());
  std::vector<std::uint64_t> cost_version(all.size(), std::numeric_limits<std::uint64_t>::max());
  auto recompute_cost = [&](const Gap& g) {
    const auto k = static_cast<std::size_t>(&g - all.data());
    if (cost_version[k] != recomputes.version()) {
      cost_of[k] = planner.recompute_cost(g, recomputes);
      cost_version[k] = recomputes.version();
    }
    return cost_of[k];
  };
  for (;;) {
    const auto [peak, offset] = tree.peak();
    if (static_cast<double>(peak) <= limit) break;
    const std::size_t at = b + offset;
    const Gap* best = nullptr;
    Choice best_choice = Choice::Keep;
    SimTime best_cost{0};
    double best_score = 0;
    for (const Gap& g : all) {
      if (!(g.last_use < at && at < g.next_use) || taken.count({g.tensor, g.last_use}) != 0) continue;
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
        consider(Choice::Recompute, recompute_cost(g));
      }
    }
    if (best == nullptr) break;  // nothing left that lowers this peak
    Gap g = *best;
    g.choice = best_choice;
    g.cost = best_cost;
    planner.apply(g, tree, b);
    taken.emplace(g.tensor, g.last_use);
    recomputes.add(g);
    chosen.push_back(g);
  }
  tree.store(load);
}

// Its line in the registry (src/policy/registry.cpp).
PolicyRegistry::Entry pooch_policy_entry() { return PolicyRegistry::entry_for<PoochPolicy>(); }

}  // namespace coopsim
