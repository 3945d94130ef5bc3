// Offline placement methods for the static Dynamic Storage Allocation problem.
//  * smartpool-bf / smartpool-ff: SmartPool (apache/singa PR #412, memory.cc SmartMemPool):
//    order size descending, ties by lower ascending; best fit (optionally with SINGA's quirk of
//    ignoring the gap below the lowest occupied range when there are >= 2 ranges) / first fit.
//  * greedy-by-size: TFLite GPU delegate GreedyBySizeAssignment: size descending (stable: ties
//    in input order), smallest fitting gap among time-overlapping tensors, else on top.
//  * planner: several orderings decoded by best and first fit give the incumbent; then an exact
//    decision search over canonical placements (src/planner/exact.hpp) asks for the
//    max-live lower bound and bisects between the best proven bound and the incumbent; when
//    that finds nothing better, a deterministic order-perturbation local search. Every phase
//    runs on a work limit derived from the time limit (the wall clock is only a safety cut,
//    read in every phase), so results do not depend on the machine. Problems with more
//    overlapping pairs than max_conflicts get the construction only, without conflict lists.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "coopsim/base/registry.hpp"
#include "coopsim/planner/problem.hpp"

namespace coopsim::plan {

enum class Method { SmartPoolBF, SmartPoolFF, GreedyBySize, Planner };

// The methods by name, one line each in src/planner/registry.cpp, in `coopsim list` order.
struct MethodEntry {
  std::string name;
  std::string help;
  Method method;
};
const NamedList<MethodEntry>& methods();

// A method by its name in methods(); throws ConfigError("--method", "unknown method ...").
Method parse_method(const std::string& name);
std::string method_name(Method method);

struct PlanOptions {
  Method method = Method::Planner;
  bool bf_quirk = true;                                            // smartpool-bf: reproduce SINGA's gap-below quirk
  std::optional<std::int64_t> capacity;                            // height must not exceed it
  double time_limit_s = 10.0;                                      // planner: sets the work limit; also a safety cut
  std::uint64_t max_conflicts = PlanLimits::kDefaultMaxConflicts;  // conflict pairs stored at most
};

struct PlanResult {
  std::vector<std::int64_t> offsets;  // by buffer index
  std::int64_t height = 0;
  std::int64_t lower_bound = 0;   // max live bytes
  std::int64_t proven_bound = 0;  // no placement is lower: lower_bound, or above a capacity
                                  // the exact search proved infeasible (planner)
  std::uint64_t iterations = 0;   // planner: local-search iterations run
  std::uint64_t exact_work = 0;   // planner: exact-search work units spent
  bool time_cut = false;          // planner: stopped by the wall clock, not the budget
  bool proven_optimal = false;    // height == proven_bound
  std::uint64_t conflicts = 0;    // planner: lifetime-overlapping pairs
  bool without_lists = false;     // planner: conflicts > max_conflicts, so no conflict lists
                                  // were built and only the construction ran
};

// Greedy placement of buffers in `order` (indices into problem.buffers). With more than
// `max_conflicts` overlapping pairs no conflict lists are built (same offsets, O(n) memory).
enum class Fit { Best, BestQuirk, First };
std::vector<std::int64_t> place_in_order(const Problem& problem, const std::vector<std::size_t>& order, Fit fit,
                                         std::uint64_t max_conflicts = PlanLimits::kDefaultMaxConflicts);

// Runs a method. Throws coopsim::Error when a capacity is given and the height exceeds it.
PlanResult plan(const Problem& problem, const PlanOptions& options);

}  // namespace coopsim::plan
