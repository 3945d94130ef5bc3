// MiniMalloc CSV problems (google/minimalloc src/converter.cc: `id,lower,upper,size`, optional
// `offset`; half-open lifetimes).
#include "coopsim/planner/problem.hpp"

#include <algorithm>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#include "coopsim/base/error.hpp"
#include "coopsim/base/limits.hpp"
#include "csv.hpp"

namespace coopsim::plan {

std::vector<ParamDoc> plan_limit_param_docs() {
  return {
      {"max_buffers",
       ParamType::Int,
       std::to_string(PlanLimits::kDefaultMaxBuffers),
       "most buffers (rows) one problem, or one solution given to --check, may hold",
       {}},
      {"max_conflicts",
       ParamType::Int,
       std::to_string(PlanLimits::kDefaultMaxConflicts),
       "most lifetime-overlapping buffer pairs the planner stores as conflict lists (8 bytes each); "
       "above it the methods place buffers without lists and the planner skips its searches",
       {}},
  };
}

PlanLimits plan_limits_from_json(const nlohmann::json& section) {
  const Params p("limits", section, plan_limit_param_docs());
  auto count = [&](const char* key, std::uint64_t most) {
    const std::int64_t v = p.get_int(key);
    if (v < 1 || static_cast<std::uint64_t>(v) > most)
      throw ConfigError(std::string("limits.") + key, fmt::format("must be between 1 and {}, got {}", most, v));
    return static_cast<std::uint64_t>(v);
  };
  PlanLimits l;
  l.max_buffers = count("max_buffers", PlanLimits::kMostBuffers);
  l.max_conflicts = count("max_conflicts", std::numeric_limits<std::int64_t>::max());
  return l;
}

bool read_line(std::istream& in, std::string& line, const std::string& file, std::uint64_t line_no) {
  line.clear();
  std::streambuf* buf = in.rdbuf();
  if (!in.good() || buf == nullptr) return false;
  for (;;) {
    const int c = buf->sbumpc();
    if (c == std::char_traits<char>::eof()) {
      in.setstate(std::ios::eofbit);
      return !line.empty();
    }
    if (c == '\n') return true;
    if (line.size() >= PlanLimits::kMaxLineBytes)
      throw InputError(file, line_no, fmt::format("line longer than {} bytes", PlanLimits::kMaxLineBytes));
    line.push_back(static_cast<char>(c));
  }
}

Problem parse_problem(std::istream& in, const std::string& file, const PlanLimits& limits) {
  Problem problem;
  problem.file = file;
  std::string line;
  std::uint64_t line_no = 0;
  if (!read_line(in, line, file, 1)) throw InputError(file, 1, "empty file: expected header id,lower,upper,size");
  ++line_no;
  const auto header = csv::split(line);
  const bool with_offset = header.size() == 5 && header[4] == "offset";
  if (!(header.size() == 4 || with_offset) || header[0] != "id" || header[1] != "lower" || header[2] != "upper" ||
      header[3] != "size")
    throw InputError(file, 1, "bad header: expected id,lower,upper,size");
  std::map<std::string, std::uint64_t> seen;
  std::int64_t total = 0;  // sum of sizes: bounds every height and offset (see problem.hpp)
  while (read_line(in, line, file, line_no + 1)) {
    ++line_no;
    if (line.empty() || line == "\r") continue;
    if (problem.buffers.size() >= limits.max_buffers)
      throw InputError(file, line_no, limit_problem(limits.max_buffers, "buffers", "max_buffers"));
    const auto cells = csv::split(line);
    if (cells.size() != header.size())
      throw InputError(file, line_no,
                       "expected " + std::to_string(header.size()) + " columns, got " + std::to_string(cells.size()));
    Buffer b;
    b.id = cells[0];
    b.line = line_no;
    if (b.id.empty()) throw InputError(file, line_no, "empty id");
    b.lower = csv::integer(cells[1], "lower", file, line_no);
    b.upper = csv::integer(cells[2], "upper", file, line_no);
    b.size = csv::integer(cells[3], "size", file, line_no);
    if (b.lower < 0) throw InputError(file, line_no, "lower is negative");
    if (b.lower >= b.upper) throw InputError(file, line_no, "lower >= upper (lifetime is empty)");
    if (b.size <= 0) throw InputError(file, line_no, "size must be positive");
    if (b.size > std::numeric_limits<std::int64_t>::max() - total)
      throw InputError(file, line_no,
                       fmt::format("sizes add up to more than {} bytes (heights and offsets are signed 64-bit)",
                                   std::numeric_limits<std::int64_t>::max()));
    total += b.size;
    const auto [it, fresh] = seen.emplace(b.id, line_no);
    if (!fresh)
      throw InputError(file, line_no, "duplicate id '" + b.id + "' (first on line " + std::to_string(it->second) + ")");
    problem.buffers.push_back(std::move(b));
  }
  return problem;
}

Problem load_problem(const std::string& path, const PlanLimits& limits) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(path + ": cannot open");
  return parse_problem(f, path, limits);
}

std::uint64_t count_conflicts(const Problem& problem) {
  // Buffer i overlaps every j with lower_j < upper_i except those with upper_j <= lower_i
  // (which all have lower_j < upper_i); itself included once. Each pair is counted twice.
  std::vector<std::int64_t> lowers, uppers;
  lowers.reserve(problem.buffers.size());
  uppers.reserve(problem.buffers.size());
  for (const auto& b : problem.buffers) {
    lowers.push_back(b.lower);
    uppers.push_back(b.upper);
  }
  std::sort(lowers.begin(), lowers.end());
  std::sort(uppers.begin(), uppers.end());
  std::uint64_t twice = 0;
  for (const auto& b : problem.buffers) {
    const auto before_end = std::lower_bound(lowers.begin(), lowers.end(), b.upper) - lowers.begin();
    const auto ended = std::upper_bound(uppers.begin(), uppers.end(), b.lower) - uppers.begin();
    twice += static_cast<std::uint64_t>(before_end - ended - 1);
  }
  return twice / 2;
}

std::int64_t placement_height(const Problem& problem, const std::vector<std::int64_t>& offsets) {
  std::int64_t h = 0;
  for (std::size_t i = 0; i < problem.buffers.size(); ++i) h = std::max(h, end_of(offsets[i], problem.buffers[i].size));
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
