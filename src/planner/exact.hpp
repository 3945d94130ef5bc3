// Exact decision search: "can every buffer be placed within [0, capacity)?" — depth-first
// searches over canonical placements with section inference, dominance pruning and dynamic
// decomposition, written from the ideas published for MiniMalloc (Moffitt, ASPLOS 2023;
// docs/models/static-planners.md), plus a skyline (bottom-left-fill) variant. No
// MiniMalloc code is used.
//
// The search is complete: `Infeasible` is a proof that no placement of height <= capacity
// exists. It stops with `Unknown` when its work limit (a machine-independent count of inner-
// loop steps) runs out, so the answer never depends on the machine's speed.
#pragma once

#include <cstdint>
#include <vector>

#include "coopsim/planner/problem.hpp"

namespace coopsim::plan {

enum class Decision { Feasible, Infeasible, Unknown };

struct ExactResult {
  Decision decision = Decision::Unknown;
  std::vector<std::int64_t> offsets;  // Feasible: a valid placement of height <= capacity
  std::uint64_t work = 0;             // work units spent (<= budget + one node's work)
};

// Decides `capacity` for `problem`, part by part (parts: no buffer alive across their
// boundary). Per part: complete searches (MiniMalloc's level search and a skyline search) with
// the static preorderings WAT, TAW, TWA in turn under a node limit that doubles each round,
// interleaved with short restarts under slightly shuffled preorders (a fixed-seed generator),
// until a decision or until `work_budget` units are spent. Deterministic. The searches recurse
// once per placement (the planner uses them up to 4,096 buffers).
ExactResult decide_capacity(const Problem& problem, std::int64_t capacity, std::uint64_t work_budget);

}  // namespace coopsim::plan
