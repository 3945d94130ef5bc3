// Independent validator for a placement: knows nothing of how it was made. Reads the solution
// CSV (`id,lower,upper,size,offset`) itself and compares it with the problem.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "coopsim/planner/problem.hpp"

namespace coopsim::plan {

struct CheckResult {
  std::vector<std::string> violations;  // one line each, "file:line: problem"
  std::int64_t height = 0;
  bool ok() const { return violations.empty(); }
};

// Malformed solution CSVs throw InputError, as do more than `limits.max_buffers` rows.
// Placement violations are collected: a problem id missing or given twice, an id not in the
// problem, lifetimes/sizes that differ from the problem, a negative offset, an offset + size
// past 2^63 - 1, two lifetime-overlapping buffers whose address ranges overlap (each buffer
// that overlaps a buffer starting before it, or at the same time on an earlier line, is
// reported once per such buffer not itself reported), and a height above `capacity` when one
// is given. Work O(n log n + violations).
CheckResult check_solution(const Problem& problem, const std::string& solution_path,
                           std::optional<std::int64_t> capacity, const PlanLimits& limits = {});

}  // namespace coopsim::plan
