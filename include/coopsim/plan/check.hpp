// Independent validator for a placement: knows nothing of how it was made. Reads the solution
// CSV (`id,lower,upper,size,offset`) itself and compares it with the problem.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "coopsim/plan/problem.hpp"

namespace coopsim::plan {

struct CheckResult {
  std::vector<std::string> violations;  // one line each, "file:line: problem"
  std::int64_t height = 0;
  bool ok() const { return violations.empty(); }
};

// Malformed solution CSVs throw TraceError. Placement violations are collected: a problem id
// missing or given twice, an id not in the problem, lifetimes/sizes that differ from the
// problem, a negative offset, two lifetime-overlapping buffers whose address ranges overlap,
// and a height above `capacity` when one is given.
CheckResult check_solution(const Problem& problem, const std::string& solution_path,
                           std::optional<std::int64_t> capacity);

}  // namespace coopsim::plan
