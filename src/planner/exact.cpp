// The exact decision driver: splits the problem into independent parts (no buffer alive across
// their boundary), and decides each with a portfolio of the level search (MiniMalloc's
// canonical search) and the skyline search: complete runs over MiniMalloc's preorderings under
// a node limit that doubles each round (MiniMalloc's round robin, docs/models/static-planners.md),
// interleaved with short randomized restarts. Every reported placement is re-verified here.
#include <algorithm>
#include <iterator>
#include <numeric>
#include <random>

#include "coopsim/base/error.hpp"
#include "exact_search.hpp"

namespace coopsim::plan {

namespace detail {

namespace {

// Buffer indices of each independent part, in time order.
std::vector<std::vector<std::size_t>> independent_parts(const Problem& problem) {
  const auto& bs = problem.buffers;
  std::vector<std::size_t> order(bs.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return bs[a].lower < bs[b].lower; });
  std::vector<std::vector<std::size_t>> parts;
  std::int64_t reach = 0;
  for (const std::size_t i : order) {
    if (parts.empty() || bs[i].lower >= reach) parts.emplace_back();
    parts.back().push_back(i);
    reach = std::max(reach, bs[i].upper);
  }
  for (auto& p : parts) std::sort(p.begin(), p.end());
  return parts;
}

Problem subproblem(const Problem& problem, const std::vector<std::size_t>& indices) {
  Problem sub;
  sub.file = problem.file;
  for (const std::size_t i : indices) sub.buffers.push_back(problem.buffers[i]);
  return sub;
}

// Independent check of a placement a search reports (a failure is a bug in the search).
void verify(const Layout& l, const std::vector<std::int64_t>& offsets, std::int64_t capacity) {
  for (std::size_t i = 0; i < l.buffers(); ++i) {
    if (offsets[i] < 0 || offsets[i] + l.size[i] > capacity)
      throw InvariantError("exact search: buffer outside [0, capacity)");
    for (const std::uint32_t j : l.overlaps[i])
      if (offsets[i] < offsets[j] + l.size[j] && offsets[j] < offsets[i] + l.size[i])
        throw InvariantError("exact search: overlapping placement");
  }
}

// A preorder shuffled a little: each rank moves by a random amount in [0, spread] (integer
// arithmetic and raw draws only, so every platform shuffles alike).
std::vector<std::uint32_t> perturbed(const std::vector<std::uint32_t>& base, std::uint64_t spread,
                                     std::mt19937_64& rng) {
  constexpr std::uint64_t kScale = 1024;
  std::vector<std::pair<std::uint64_t, std::uint32_t>> keyed;
  keyed.reserve(base.size());
  for (std::size_t r = 0; r < base.size(); ++r) keyed.emplace_back(r * kScale + rng() % (spread * kScale + 1), base[r]);
  std::sort(keyed.begin(), keyed.end());
  std::vector<std::uint32_t> order;
  order.reserve(base.size());
  for (const auto& k : keyed) order.push_back(k.second);
  return order;
}

// One part: rounds of (a) complete searches with the next static preorder under a node limit
// that doubles each round (MiniMalloc's round robin; only these can prove infeasibility), then
// (b) short randomized restarts of the skyline search with slightly shuffled preorders, eight
// times (a)'s work. The searches are sensitive to tie-breaks among equally ranked buffers, so
// many short diverse runs find placements far more often than a few long ones (measured on
// MiniMalloc's challenging set: docs/results-planner.md).
Decision decide_part(const Layout& layout, std::int64_t capacity, std::uint64_t seed, Budget& budget,
                     std::vector<std::int64_t>& offsets) {
  const std::unique_ptr<Searcher> searchers[] = {make_skyline_search(layout, capacity, budget),
                                                 make_level_search(layout, capacity, budget)};
  auto attempt = [&](const std::unique_ptr<Searcher>& searcher, const std::vector<std::uint32_t>& preorder,
                     std::uint64_t limit) {
    const Outcome outcome = searcher->run(preorder, limit);
    if (outcome == Outcome::Found) {
      offsets = searcher->solution();
      verify(layout, offsets, capacity);
      return Decision::Feasible;
    }
    return outcome == Outcome::NotFound ? Decision::Infeasible : Decision::Unknown;
  };
  // Rank shifts of up to this many thousandths of the part's size (rounded up), mostly small.
  static constexpr std::uint64_t kSpreadsPermille[] = {10, 10, 50, 10, 100, 10, 20, 5};
  constexpr std::uint64_t kRestartShare = 8;
  const std::size_t n = layout.buffers();
  const std::uint64_t restart_limit = std::max<std::uint64_t>(1000, 3 * n);
  std::mt19937_64 rng((0x9e3779b97f4a7c15ULL * (seed + 1)) ^ static_cast<std::uint64_t>(capacity));
  std::uint64_t node_limit = std::max<std::uint64_t>(n, 1), restart = 0;
  for (std::size_t round = 0; !budget.spent(); ++round) {
    node_limit *= 2;
    const std::uint64_t before = budget.used;
    for (const auto& searcher : searchers) {
      const Decision d = attempt(searcher, layout.preorders[round % layout.preorders.size()], node_limit);
      if (d != Decision::Unknown) return d;
      if (budget.spent()) return Decision::Unknown;
    }
    for (const std::uint64_t until = budget.used + kRestartShare * (budget.used - before); budget.used < until;
         ++restart) {
      const auto& base = layout.preorders[restart % layout.preorders.size()];
      const std::uint64_t spread = (kSpreadsPermille[restart % std::size(kSpreadsPermille)] * n + 999) / 1000;
      const Decision d = attempt(searchers[0], perturbed(base, spread, rng), restart_limit);
      if (d != Decision::Unknown) return d;  // the search is complete under any preorder
      if (budget.spent()) return Decision::Unknown;
    }
  }
  return Decision::Unknown;
}

}  // namespace

ExactSolver::ExactSolver(const Problem& problem) : buffers_(problem.buffers.size()) {
  for (auto& indices : independent_parts(problem)) {
    layouts_.emplace_back(subproblem(problem, indices));
    parts_.push_back(std::move(indices));
  }
}

ExactResult ExactSolver::decide(std::int64_t capacity, std::uint64_t work_budget, Clock* clock,
                                std::uint64_t seed) const {
  ExactResult result;
  // Quick answers: a section alive above the capacity, or a buffer taller than it.
  for (const auto& l : layouts_) {
    const bool over = std::any_of(l.live.begin(), l.live.end(), [&](std::int64_t v) { return v > capacity; }) ||
                      std::any_of(l.size.begin(), l.size.end(), [&](std::int64_t v) { return v > capacity; });
    if (over) {
      result.decision = Decision::Infeasible;
      return result;
    }
  }
  Budget budget{0, work_budget, clock, 0};
  std::vector<std::int64_t> offsets(buffers_, 0), part_offsets;
  result.decision = Decision::Feasible;
  for (std::size_t p = 0; p < parts_.size(); ++p) {
    const Decision d = decide_part(layouts_[p], capacity, seed, budget, part_offsets);
    if (d != Decision::Feasible) {
      result.decision = d;
      break;
    }
    for (std::size_t k = 0; k < parts_[p].size(); ++k) offsets[parts_[p][k]] = part_offsets[k];
  }
  if (result.decision == Decision::Feasible) result.offsets = std::move(offsets);
  result.work = budget.used;
  return result;
}

}  // namespace detail

ExactResult decide_capacity(const Problem& problem, std::int64_t capacity, std::uint64_t work_budget) {
  return detail::ExactSolver(problem).decide(capacity, work_budget);
}

}  // namespace coopsim::plan
