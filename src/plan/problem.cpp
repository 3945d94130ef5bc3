// MiniMalloc CSV problems (google/minimalloc src/converter.cc: `id,lower,upper,size`, optional
// `offset`; half-open lifetimes).
#include "coopsim/plan/problem.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "coopsim/error.hpp"
#include "csv.hpp"

namespace coopsim::plan {

Problem parse_problem(std::istream& in, const std::string& file) {
  Problem problem;
  problem.file = file;
  std::string line;
  std::uint64_t line_no = 0;
  if (!std::getline(in, line)) throw TraceError(file, 1, "empty file: expected header id,lower,upper,size");
  ++line_no;
  const auto header = csv::split(line);
  const bool with_offset = header.size() == 5 && header[4] == "offset";
  if (!(header.size() == 4 || with_offset) || header[0] != "id" || header[1] != "lower" ||
      header[2] != "upper" || header[3] != "size")
    throw TraceError(file, 1, "bad header: expected id,lower,upper,size");
  std::map<std::string, std::uint64_t> seen;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line == "\r") continue;
    const auto cells = csv::split(line);
    if (cells.size() != header.size())
      throw TraceError(file, line_no, "expected " + std::to_string(header.size()) + " columns, got " +
                                          std::to_string(cells.size()));
    Buffer b;
    b.id = cells[0];
    b.line = line_no;
    if (b.id.empty()) throw TraceError(file, line_no, "empty id");
    b.lower = csv::integer(cells[1], "lower", file, line_no);
    b.upper = csv::integer(cells[2], "upper", file, line_no);
    b.size = csv::integer(cells[3], "size", file, line_no);
    if (b.lower < 0) throw TraceError(file, line_no, "lower is negative");
    if (b.lower >= b.upper) throw TraceError(file, line_no, "lower >= upper (lifetime is empty)");
    if (b.size <= 0) throw TraceError(file, line_no, "size must be positive");
    const auto [it, fresh] = seen.emplace(b.id, line_no);
    if (!fresh)
      throw TraceError(file, line_no, "duplicate id '" + b.id + "' (first on line " +
                                          std::to_string(it->second) + ")");
    problem.buffers.push_back(std::move(b));
  }
  return problem;
}

Problem load_problem(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(path + ": cannot open");
  return parse_problem(f, path);
}

std::int64_t placement_height(const Problem& problem, const std::vector<std::int64_t>& offsets) {
  std::int64_t h = 0;
  for (std::size_t i = 0; i < problem.buffers.size(); ++i)
    h = std::max(h, offsets[i] + problem.buffers[i].size);
  return h;
}

std::int64_t max_live_bytes(const Problem& problem) {
  // Sweep: at equal times, frees (upper) come before allocations since lifetimes are half-open.
  std::vector<std::pair<std::int64_t, std::int64_t>> events;
  for (const auto& b : problem.buffers) {
    events.emplace_back(b.lower, b.size);
    events.emplace_back(b.upper, -b.size);
  }
  std::sort(events.begin(), events.end());
  std::int64_t live = 0, peak = 0;
  for (const auto& [t, delta] : events) {
    live += delta;
    peak = std::max(peak, live);
  }
  return peak;
}

std::string format_solution(const Problem& problem, const std::vector<std::int64_t>& offsets) {
  std::ostringstream out;
  out << "id,lower,upper,size,offset\n";
  for (std::size_t i = 0; i < problem.buffers.size(); ++i) {
    const auto& b = problem.buffers[i];
    out << b.id << ',' << b.lower << ',' << b.upper << ',' << b.size << ',' << offsets[i] << '\n';
  }
  return out.str();
}

}  // namespace coopsim::plan
