// Method dispatch and the default `planner`:
//  1. greedy construction from several orderings (local_search.cpp) gives the incumbent;
//  2. the exact decision search (exact.cpp) first asks for the max-live lower bound itself, then
//     bisects between the best proven bound and the incumbent's height;
//  3. when the exact phase found nothing better, the order local search improves the
//     construction with what is left.
// Every phase runs on a work limit derived from --time-limit, so the result does not depend on
// the machine; the wall clock is only a safety cut, reported in the result.
#include <algorithm>
#include <numeric>

#include "coopsim/base/error.hpp"
#include "exact_search.hpp"
#include "placement.hpp"

namespace coopsim::plan {

Method parse_method(const std::string& name) { return methods().get(name, "--method", "method").method; }

std::string method_name(Method method) {
  for (const MethodEntry& e : methods().entries())
    if (e.method == method) return e.name;
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
// With --capacity, the unit of the tries at the capacity: the exact budget / this.
constexpr std::uint64_t kCapacitySlices = 64;

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

// The Luby restart sequence 1 1 2 1 1 2 4 1 1 2 ... (i from 1): slices of every length, each
// length as much work in total as the next, for searches whose run length to success is unknown.
std::uint64_t luby(std::uint64_t i) {
  for (;;) {
    std::uint64_t k = 1;
    while ((std::uint64_t{1} << k) - 1 < i) ++k;
    if ((std::uint64_t{1} << k) - 1 == i) return std::uint64_t{1} << (k - 1);
    i -= (std::uint64_t{1} << (k - 1)) - 1;
  }
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
  // A given capacity is the next question: any placement that fits it will do, and any height
  // above it is a failure however low, so until one fits every try asks for the capacity itself
  // (slices of the exact budget in Luby's sequence, other restart seeds each time: on
  // MiniMalloc's A and I at their lower bound one long run, or half of what is left, finds no
  // placement in 10 s, short ones do). A proof that it is infeasible ends the tries.
  if (options.capacity && *options.capacity < result.height) {
    const std::int64_t cap = *options.capacity / g;
    bool asked = cap < lo;  // the bound question above was this one
    std::uint64_t tries = 0;
    while (cap >= proven() && result.height > *options.capacity && left > 0 && !clock.fired()) {
      if (asked) ++pass;
      asked = true;
      if (attempt(cap, (budget / kCapacitySlices + 1) * luby(++tries)) == Decision::Infeasible) break;
    }
    if (result.height > *options.capacity) return;  // nothing fits: the caller reports it
  }
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

PlanResult run_planner(const Problem& problem, const PlanOptions& options, PlanResult result, detail::Clock& clock) {
  const double seconds = std::max(0.0, options.time_limit_s);
  result.conflicts = count_conflicts(problem);
  result.proven_bound = result.lower_bound;
  std::uint64_t work = 0;
  // Too many pairs to list (or no time left to list them): the orderings decoded without
  // lists, on a budget (all stacked when the clock has already expired).
  const auto conflicts =
      result.conflicts > options.max_conflicts ? std::nullopt : detail::build_conflicts(problem, &clock);
  if (!conflicts) {
    result.without_lists = result.conflicts > options.max_conflicts;
    const detail::Construction best =
        detail::best_construction(problem, nullptr, work_for(seconds, kScanWorkPerSecond), clock, work);
    result.offsets = best.offsets;
    result.height = best.height;
    result.time_cut = clock.fired();
    return result;
  }
  detail::Construction best =
      detail::best_construction(problem, &*conflicts, work_for(seconds, kConstructionWorkPerSecond), clock, work);
  result.offsets = best.offsets;
  result.height = best.height;
  const bool exact =
      problem.buffers.size() <= kExactMaxBuffers && result.height > result.lower_bound && !clock.expired();
  if (exact) run_exact_phase(problem, options, work_for(seconds, kExactWorkPerSecond), clock, result);
  if (result.height == best.height && result.height > result.proven_bound && !clock.expired()) {
    const double rate = exact ? kLocalReservePerSecond : kLocalWorkPerSecond;
    result.iterations =
        detail::local_search(problem, *conflicts, best, work_for(seconds, rate), result.proven_bound, clock);
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

PlanResult detail::plan_with_clock(const Problem& problem, const PlanOptions& options, Clock& clock) {
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
    case Method::Planner: result = run_planner(problem, options, result, clock); break;
  }
  result.height = placement_height(problem, result.offsets);
  result.proven_optimal = result.height <= result.proven_bound;
  if (options.capacity && result.height > *options.capacity)
    throw Error(problem.file + ": " + method_name(options.method) + " found height " + std::to_string(result.height) +
                " > capacity " + std::to_string(*options.capacity));
  return result;
}

PlanResult plan(const Problem& problem, const PlanOptions& options) {
  detail::Clock clock(std::max(0.0, options.time_limit_s));
  return detail::plan_with_clock(problem, options, clock);
}

}  // namespace coopsim::plan
