// Internal: conflict lists and the greedy decoder shared by the greedy methods and the planner.
#pragma once

#include <cstdint>
#include <vector>

#include "coopsim/plan/planner.hpp"

namespace coopsim::plan::detail {

// conflicts[i] = indices of buffers whose lifetimes overlap buffer i's, ascending.
std::vector<std::vector<std::size_t>> build_conflicts(const Problem& problem);

// Places order[from..] given that order[..from) already hold valid offsets in `offsets`.
// `position[i]` must be i's index in `order`. Buffers placed later never move earlier ones.
// Returns the number of conflict-list entries visited (a machine-independent work measure).
std::uint64_t place_suffix(const Problem& problem, const std::vector<std::vector<std::size_t>>& conflicts,
                  const std::vector<std::size_t>& order, const std::vector<std::size_t>& position,
                  std::size_t from, Fit fit, std::vector<std::int64_t>& offsets);

}  // namespace coopsim::plan::detail
