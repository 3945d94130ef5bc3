// Internal: conflict lists and the greedy decoder shared by the greedy methods and the planner,
// the planner's construction and local search (local_search.cpp), and its safety clock.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "coopsim/plan/planner.hpp"

namespace coopsim::plan::detail {

using Conflicts = std::vector<std::vector<std::size_t>>;

// conflicts[i] = indices of buffers whose lifetimes overlap buffer i's, ascending.
Conflicts build_conflicts(const Problem& problem);

// Places order[from..] given that order[..from) already hold valid offsets in `offsets`.
// `position[i]` must be i's index in `order`. Buffers placed later never move earlier ones.
// Returns the number of conflict-list entries visited (a machine-independent work measure).
std::uint64_t place_suffix(const Problem& problem, const Conflicts& conflicts,
                  const std::vector<std::size_t>& order, const std::vector<std::size_t>& position,
                  std::size_t from, Fit fit, std::vector<std::int64_t>& offsets);

// The wall-clock safety cut: results must come from work budgets; this only stops a run that
// would overstay the time limit on a very slow machine (and says so in the result).
class Clock {
 public:
  using Seconds = std::chrono::duration<double>;
  explicit Clock(double seconds)
      : deadline_(std::chrono::time_point_cast<Seconds>(std::chrono::steady_clock::now()) + Seconds(seconds)) {}
  bool expired() {
    if (!expired_ && std::chrono::steady_clock::now() > deadline_) expired_ = true;
    return expired_;
  }
  bool fired() const { return expired_; }

 private:
  std::chrono::time_point<std::chrono::steady_clock, Seconds> deadline_;
  bool expired_ = false;
};

// A placement with the order and fit rule that decode to it.
struct Construction {
  std::vector<std::size_t> order;
  Fit fit = Fit::Best;
  std::vector<std::int64_t> offsets;
  std::int64_t height = 0;
};

// The lowest of 7 orderings x {best, first} fit.
Construction best_construction(const Problem& problem, const Conflicts& conflicts);

// Improves `best` in place until `budget` work units are spent, its height reaches `stop_at`
// or the clock expires. Returns the iterations run.
std::uint64_t local_search(const Problem& problem, const Conflicts& conflicts, Construction& best,
                           std::uint64_t budget, std::int64_t stop_at, Clock& clock);

}  // namespace coopsim::plan::detail
