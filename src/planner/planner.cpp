// Method dispatch and the default `planner`:
//  1. greedy construction from several orderings (local_search.cpp) gives the incumbent;
//  2. the exact decision search (exact.cpp) first asks for the max-live lower bound itself, then
//     bisects between the best proven bound and the incumbent's height;
//  3. when the exact phase found nothing better, the order local search improves the
//     construction with what is left.
// Every phase runs on a work budget derived from --time-limit, so the result does not depend on
// the machine; the wall clock is only a safety cut, reported in the result.
#include <algorithm>
#include <numeric>

#include "coopsim/base/error.hpp"
#include "exact_search.hpp"
#include "placement.hpp"

namespace coopsim::plan {

Method parse_method(const std::string& name) {
  if (name == "smartpool-bf") return Method::SmartPoolBF;
  if (name == "smartpool-ff") return Method::SmartPoolFF;
  if (name == "greedy-by-size") return Method::GreedyBySize;
  if (name == "planner") return Method::Planner;
  throw ConfigError("--method",
                    "unknown method '" + name + "' (expected smartpool-bf, smartpool-ff, greedy-by-size or planner)");
}

std::string method_name(Method method) {
  switch (method) {
    case Method::SmartPoolBF: return "smartpool-bf";
    case Method::SmartPoolFF: return "smartpool-ff";
    case Method::GreedyBySize: return "greedy-by-size";
    case Method::Planner: return "planner";
  }
  return "?";
}

namespace {

// Machine-independent budgets per second of --time-limit, set so that a full run ends well
// inside the limit on the shared development machine (measured; see docs/results-planner.md).
constexpr double kExactWorkPerSecond = 350e6;  // exact-search work units
// Decoding work is conflict-list entries visited plus k log2 k for sorting k ranges (the sort
// dominates on dense problems; measured 250-370 million units per second on that machine).
constexpr double kLocalWorkPerSecond = 50e6;         // local-search work units
constexpr double kLocalReservePerSecond = 10e6;      // ... after an exact phase
constexpr double kConstructionWorkPerSecond = 50e6;  // the construction's decodings (all 14 on
                                                     // small problems)
constexpr double kScanWorkPerSecond = 150e6;         // placed buffers visited without conflict lists
// The exact searches recurse once per placement; above this many buffers the planner keeps to
// the heuristics (bounded stack depth, and the O(n^2) overlap lists stay small).
constexpr std::size_t kExactMaxBuffers = 4096;

// A budget of `rate` units per second, capped far below overflow.
std::uint64_t work_for(double seconds, double rate) {
  return static_cast<std::uint64_t>(std::min(seconds * rate, 1e18));
}

// Every canonical placement's height is a sum of sizes, so deciding capacity c is deciding the
// largest multiple of the sizes' gcd not above c.
std::int64_t size_gcd(const Problem& problem) {
  std::int64_t g = 0;
  for (const auto& b : problem.buffers) g = std::gcd(g, b.size);
  return std::max<std::int64_t>(g, 1);
}

void run_exact_phase(const Problem& problem, const PlanOptions& options, std::uint64_t budget, detail::Clock& clock,
                     PlanResult& result) {
  const detail::ExactSolver solver(problem);
  const std::int64_t g = size_gcd(problem);
  std::uint64_t left = budget, pass = 0;
  auto attempt = [&](std::int64_t units, std::uint64_t slice) {
    const ExactResult r = solver.decide(units * g, std::min(slice, left), &clock, pass);
    left -= std::min(left, r.work);
    result.exact_work += r.work;
    if (r.decision == Decision::Feasible) {
      const std::int64_t h = placement_height(problem, r.offsets);
      if (h < result.height) {
        result.height = h;
        result.offsets = r.offsets;
      }
    }
    if (r.decision == Decision::Infeasible) result.proven_bound = std::max(result.proven_bound, (units + 1) * g);
    return r.decision;
  };
  // Heights in units of g: bounds rounded up, the incumbent rounded down.
  auto proven = [&] { return (result.proven_bound + g - 1) / g; };
  if (attempt(proven(), budget / 5 * 2) == Decision::Feasible) return;
  std::int64_t lo = proven() + 1;  // the bound is infeasible, or too hard to settle: look above
  // A given capacity is the next question: any placement that fits it will do.
  if (options.capacity && *options.capacity / g >= lo && *options.capacity < result.height &&
      attempt(*options.capacity / g, left / 2) != Decision::Feasible)
    lo = *options.capacity / g + 1;
  // Bisect between lo and the incumbent; an undecided target counts as a failure. Each pass
  // uses other random restarts, so budget left after one pass goes to another, from the bound.
  for (;;) {
    bool asked = false;
    while (left > 0 && !clock.fired() && lo < result.height / g) {
      const std::int64_t hi = result.height / g - 1;  // the best target still worth asking
      const std::int64_t target = lo + (hi - lo) / 2;
      asked = true;
      if (attempt(target, left / 3 + 1) != Decision::Feasible) lo = target + 1;
    }
    if (!asked || left == 0 || clock.fired()) return;
    ++pass;
    lo = proven();
  }
}

PlanResult run_planner(const Problem& problem, const PlanOptions& options, PlanResult result) {
  const double seconds = std::max(0.0, options.time_limit_s);
  detail::Clock clock(seconds);
  result.conflicts = count_conflicts(problem);
  result.proven_bound = result.lower_bound;
  std::uint64_t work = 0;
  if (result.conflicts > options.max_conflicts) {
    // Too many pairs to list: the orderings decoded without lists, on a budget.
    result.without_lists = true;
    const detail::Construction best =
        detail::best_construction(problem, nullptr, work_for(seconds, kScanWorkPerSecond), clock, work);
    result.offsets = best.offsets;
    result.height = best.height;
    result.time_cut = clock.fired();
    return result;
  }
  const auto conflicts = detail::build_conflicts(problem);
  detail::Construction best =
      detail::best_construction(problem, &conflicts, work_for(seconds, kConstructionWorkPerSecond), clock, work);
  result.offsets = best.offsets;
  result.height = best.height;
  const bool exact =
      problem.buffers.size() <= kExactMaxBuffers && result.height > result.lower_bound && !clock.expired();
  if (exact) run_exact_phase(problem, options, work_for(seconds, kExactWorkPerSecond), clock, result);
  if (result.height == best.height && result.height > result.proven_bound && !clock.expired()) {
    const double rate = exact ? kLocalReservePerSecond : kLocalWorkPerSecond;
    result.iterations =
        detail::local_search(problem, conflicts, best, work_for(seconds, rate), result.proven_bound, clock);
    if (best.height < result.height) {
      result.height = best.height;
      result.offsets = best.offsets;
    }
  }
  result.time_cut = clock.fired();
  return result;
}

std::vector<std::size_t> size_descending(const Problem& problem, bool ties_by_lower) {
  std::vector<std::size_t> order(problem.buffers.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  const auto& bs = problem.buffers;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (bs[a].size != bs[b].size) return bs[a].size > bs[b].size;
    return ties_by_lower && bs[a].lower < bs[b].lower;
  });
  return order;
}

}  // namespace

PlanResult plan(const Problem& problem, const PlanOptions& options) {
  PlanResult result;
  result.lower_bound = max_live_bytes(problem);
  result.proven_bound = result.lower_bound;
  switch (options.method) {
    case Method::SmartPoolBF:
      result.offsets = place_in_order(problem, size_descending(problem, true),
                                      options.bf_quirk ? Fit::BestQuirk : Fit::Best, options.max_conflicts);
      break;
    case Method::SmartPoolFF:
      result.offsets = place_in_order(problem, size_descending(problem, true), Fit::First, options.max_conflicts);
      break;
    case Method::GreedyBySize:
      result.offsets = place_in_order(problem, size_descending(problem, false), Fit::Best, options.max_conflicts);
      break;
    case Method::Planner: result = run_planner(problem, options, result); break;
  }
  result.height = placement_height(problem, result.offsets);
  result.proven_optimal = result.height <= result.proven_bound;
  if (options.capacity && result.height > *options.capacity)
    throw Error(problem.file + ": " + method_name(options.method) + " found height " + std::to_string(result.height) +
                " > capacity " + std::to_string(*options.capacity));
  return result;
}

}  // namespace coopsim::plan
