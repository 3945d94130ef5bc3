// Placement validator, written from the problem statement alone (the validity rules of
// google/minimalloc src/validator.cc: offset >= 0, offset + size <= capacity, no two buffers
// overlapping in both time and space). It does not use the planner's code.
#include "coopsim/plan/check.hpp"

#include <algorithm>
#include <fstream>
#include <map>

#include "coopsim/error.hpp"
#include "csv.hpp"

namespace coopsim::plan {

namespace {

struct Row {
  std::string id;
  std::int64_t lower, upper, size, offset;
  std::uint64_t line;
};

std::vector<Row> read_rows(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open");
  std::string line;
  if (!std::getline(in, line)) throw TraceError(path, 1, "empty file: expected header id,lower,upper,size,offset");
  const auto header = csv::split(line);
  if (header != std::vector<std::string>{"id", "lower", "upper", "size", "offset"})
    throw TraceError(path, 1, "bad header: expected id,lower,upper,size,offset");
  std::vector<Row> rows;
  std::uint64_t line_no = 1;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line == "\r") continue;
    const auto cells = csv::split(line);
    if (cells.size() != 5)
      throw TraceError(path, line_no, "expected 5 columns, got " + std::to_string(cells.size()));
    if (cells[0].empty()) throw TraceError(path, line_no, "empty id");
    rows.push_back(Row{cells[0], csv::integer(cells[1], "lower", path, line_no),
                       csv::integer(cells[2], "upper", path, line_no),
                       csv::integer(cells[3], "size", path, line_no),
                       csv::integer(cells[4], "offset", path, line_no), line_no});
  }
  return rows;
}

std::string where(const std::string& path, std::uint64_t line) {
  return path + ":" + std::to_string(line) + ": ";
}

}  // namespace

CheckResult check_solution(const Problem& problem, const std::string& solution_path,
                           std::optional<std::int64_t> capacity) {
  const auto rows = read_rows(solution_path);
  CheckResult result;
  std::map<std::string, const Buffer*> wanted;
  for (const auto& b : problem.buffers) wanted.emplace(b.id, &b);
  std::map<std::string, std::uint64_t> seen;
  std::vector<const Row*> placed;  // rows that match a problem buffer, first occurrence only
  for (const auto& r : rows) {
    const auto it = wanted.find(r.id);
    if (it == wanted.end()) {
      result.violations.push_back(where(solution_path, r.line) + "id '" + r.id + "' is not in the problem");
      continue;
    }
    if (const auto [first, fresh] = seen.emplace(r.id, r.line); !fresh) {
      result.violations.push_back(where(solution_path, r.line) + "id '" + r.id + "' placed twice (first on line " +
                                  std::to_string(first->second) + ")");
      continue;
    }
    const Buffer& b = *it->second;
    if (r.lower != b.lower || r.upper != b.upper || r.size != b.size)
      result.violations.push_back(where(solution_path, r.line) + "id '" + r.id +
                                  "' lower/upper/size differ from the problem (line " + std::to_string(b.line) + ")");
    if (r.offset < 0) result.violations.push_back(where(solution_path, r.line) + "negative offset");
    placed.push_back(&r);
    // Use the problem's lifetime and size for the overlap test, the solution's offset.
    result.height = std::max(result.height, r.offset + b.size);
  }
  for (const auto& b : problem.buffers)
    if (!seen.count(b.id))
      result.violations.push_back(where(problem.file, b.line) + "id '" + b.id + "' has no offset in " + solution_path);
  for (std::size_t i = 0; i < placed.size(); ++i) {
    const Buffer& bi = *wanted.at(placed[i]->id);
    for (std::size_t j = i + 1; j < placed.size(); ++j) {
      const Buffer& bj = *wanted.at(placed[j]->id);
      const bool in_time = bi.lower < bj.upper && bj.lower < bi.upper;
      const bool in_space = placed[i]->offset < placed[j]->offset + bj.size &&
                            placed[j]->offset < placed[i]->offset + bi.size;
      if (in_time && in_space)
        result.violations.push_back(where(solution_path, placed[j]->line) + "id '" + bj.id + "' overlaps id '" +
                                    bi.id + "' (line " + std::to_string(placed[i]->line) + ") in time and address");
    }
  }
  if (capacity && result.height > *capacity)
    result.violations.push_back(solution_path + ": height " + std::to_string(result.height) + " exceeds capacity " +
                                std::to_string(*capacity));
  return result;
}

}  // namespace coopsim::plan
