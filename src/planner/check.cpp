// Placement validator, written from the problem statement alone (the validity rules of
// google/minimalloc src/validator.cc: offset >= 0, offset + size <= capacity, no two buffers
// overlapping in both time and space). It does not use the planner's code.
#include "coopsim/planner/check.hpp"

#include <algorithm>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>

#include "coopsim/base/error.hpp"
#include "coopsim/base/limits.hpp"
#include "csv.hpp"

namespace coopsim::plan {

namespace {

struct Row {
  std::string id;
  std::int64_t lower, upper, size, offset;
  std::uint64_t line;
};

std::vector<Row> read_rows(const std::string& path, const PlanLimits& limits) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open");
  std::string line;
  if (!read_line(in, line, path, 1))
    throw InputError(path, 1, "empty file: expected header id,lower,upper,size,offset");
  const auto header = csv::split(line);
  if (header != std::vector<std::string>{"id", "lower", "upper", "size", "offset"})
    throw InputError(path, 1, "bad header: expected id,lower,upper,size,offset");
  std::vector<Row> rows;
  std::uint64_t line_no = 1;
  while (read_line(in, line, path, line_no + 1)) {
    ++line_no;
    if (line.empty() || line == "\r") continue;
    if (rows.size() >= limits.max_buffers)
      throw InputError(path, line_no, limit_problem(limits.max_buffers, "buffers", "max_buffers"));
    const auto cells = csv::split(line);
    if (cells.size() != 5) throw InputError(path, line_no, "expected 5 columns, got " + std::to_string(cells.size()));
    if (cells[0].empty()) throw InputError(path, line_no, "empty id");
    rows.push_back(Row{cells[0], csv::integer(cells[1], "lower", path, line_no),
                       csv::integer(cells[2], "upper", path, line_no), csv::integer(cells[3], "size", path, line_no),
                       csv::integer(cells[4], "offset", path, line_no), line_no});
  }
  return rows;
}

std::string where(const std::string& path, std::uint64_t line) { return path + ":" + std::to_string(line) + ": "; }

}  // namespace

CheckResult check_solution(const Problem& problem, const std::string& solution_path,
                           std::optional<std::int64_t> capacity, const PlanLimits& limits) {
  const auto rows = read_rows(solution_path, limits);
  CheckResult result;
  std::map<std::string, const Buffer*> wanted;
  for (const auto& b : problem.buffers) wanted.emplace(b.id, &b);
  std::map<std::string, std::uint64_t> seen;
  struct Placed {
    const Row* row;
    const Buffer* buffer;
  };
  std::vector<Placed> placed;  // rows that match a problem buffer, first occurrence only
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
    // Use the problem's lifetime and size for the overlap test, the solution's offset. An end
    // past 2^63 - 1 cannot be an address: reported, and left out of the other tests.
    if (r.offset > std::numeric_limits<std::int64_t>::max() - b.size) {
      result.violations.push_back(where(solution_path, r.line) + "offset " + std::to_string(r.offset) + " + size " +
                                  std::to_string(b.size) + " is past the largest address " +
                                  std::to_string(std::numeric_limits<std::int64_t>::max()));
      continue;
    }
    placed.push_back({&r, &b});
    result.height = std::max(result.height, r.offset + b.size);
  }
  for (const auto& b : problem.buffers)
    if (!seen.count(b.id))
      result.violations.push_back(where(problem.file, b.line) + "id '" + b.id + "' has no offset in " + solution_path);
  // Sweep over time (ends before starts at equal times: lifetimes are half-open). The live
  // buffers accepted so far never overlap in address, so the ones a new buffer overlaps are
  // consecutive in address order; a buffer that overlaps any is reported with each of them and
  // not accepted. O(n log n + violations).
  struct Point {
    std::int64_t time;
    bool start;
    std::size_t k;  // into placed
  };
  std::vector<Point> points;
  points.reserve(2 * placed.size());
  for (std::size_t k = 0; k < placed.size(); ++k) {
    points.push_back({placed[k].buffer->lower, true, k});
    points.push_back({placed[k].buffer->upper, false, k});
  }
  std::sort(points.begin(), points.end(), [&](const Point& a, const Point& b) {
    if (a.time != b.time) return a.time < b.time;
    if (a.start != b.start) return !a.start;
    return placed[a.k].row->line < placed[b.k].row->line;
  });
  std::map<std::int64_t, std::size_t> live;  // offset -> k, accepted buffers only
  std::vector<std::uint8_t> accepted(placed.size(), 0);
  for (const Point& p : points) {
    const Row& r = *placed[p.k].row;
    if (!p.start) {
      if (accepted[p.k]) live.erase(r.offset);
      continue;
    }
    const std::int64_t end = r.offset + placed[p.k].buffer->size;
    auto it = live.lower_bound(end);  // the first live buffer at or above our end
    bool clash = false;
    while (it != live.begin()) {
      --it;
      const Placed& other = placed[it->second];
      if (it->first + other.buffer->size <= r.offset) break;
      clash = true;
      result.violations.push_back(where(solution_path, r.line) + "id '" + r.id + "' overlaps id '" + other.row->id +
                                  "' (line " + std::to_string(other.row->line) + ") in time and address");
    }
    if (clash) continue;
    live.emplace(r.offset, p.k);
    accepted[p.k] = 1;
  }
  if (capacity && result.height > *capacity)
    result.violations.push_back(solution_path + ": height " + std::to_string(result.height) + " exceeds capacity " +
                                std::to_string(*capacity));
  return result;
}

}  // namespace coopsim::plan
