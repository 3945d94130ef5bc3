// Static Dynamic-Storage-Allocation problems in MiniMalloc's CSV format (google/minimalloc,
// src/converter.cc): header `id,lower,upper,size`, lifetimes half-open [lower, upper), sizes in
// bytes. A placement gives every buffer an offset; its height is max(offset + size).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "coopsim/base/params.hpp"

namespace coopsim::plan {

// Caps on what one problem may make `coopsim plan` hold (docs/limits.md, "Planner"), set with
// `coopsim plan --limit KEY=VALUE`. Buffers are indexed with 32 bits.
struct PlanLimits {
  static constexpr std::uint64_t kDefaultMaxBuffers = 1'000'000;
  static constexpr std::uint64_t kDefaultMaxConflicts = 16'000'000;
  static constexpr std::uint64_t kMostBuffers = 0xffffffffULL;        // the largest max_buffers
  static constexpr std::size_t kMaxLineBytes = std::size_t{1} << 20;  // one CSV line (fixed)

  std::uint64_t max_buffers = kDefaultMaxBuffers;      // rows of a problem (and of a solution)
  std::uint64_t max_conflicts = kDefaultMaxConflicts;  // lifetime-overlapping pairs the planner
                                                       // stores; above it, no conflict lists
};

// The planner's "limits" keys with defaults and help; and a checked read of KEY=VALUE settings
// (ConfigError "limits.max_buffers: ..." on an unknown key or a value out of range).
std::vector<ParamDoc> plan_limit_param_docs();
PlanLimits plan_limits_from_json(const nlohmann::json& section);

struct Buffer {
  std::string id;
  std::int64_t lower = 0;  // first time step alive
  std::int64_t upper = 0;  // first time step dead (exclusive)
  std::int64_t size = 0;   // bytes, > 0
  std::uint64_t line = 0;  // 1-based line in the source file
};

struct Problem {
  std::string file;
  std::vector<Buffer> buffers;
};

// offset + size, saturating at 2^63 - 1. Problems read by parse_problem never reach it (their
// sizes add up to at most that); other callers (the smartpool allocator) take a height of
// 2^63 - 1 as "does not fit in 64 bits".
inline std::int64_t end_of(std::int64_t offset, std::int64_t size) {
  return offset > INT64_MAX - size ? INT64_MAX : offset + size;
}

// size x lifetime width, the "A" of MiniMalloc's preorderings; saturates at 2^63 - 1 (only an
// ordering key, so saturated ties fall to the next key).
inline std::int64_t lifetime_area(const Buffer& b) {
  std::int64_t area = 0;
  return __builtin_mul_overflow(b.size, b.upper - b.lower, &area) ? INT64_MAX : area;
}

// Two buffers conflict when their half-open lifetimes intersect.
inline bool lifetimes_overlap(const Buffer& a, const Buffer& b) { return a.lower < b.upper && b.lower < a.upper; }

// Parses a problem. Throws InputError ("file:line: problem") on a bad header, a wrong column
// count, a non-integer, lower >= upper, lower < 0, size <= 0, a duplicate id, a line longer
// than PlanLimits::kMaxLineBytes, more than `limits.max_buffers` rows, or sizes adding up to
// more than 2^63 - 1: every height and offset a method computes is at most that sum, so no
// arithmetic on them can wrap (docs/limits.md, "Arithmetic").
Problem parse_problem(std::istream& in, const std::string& file, const PlanLimits& limits = {});
Problem load_problem(const std::string& path, const PlanLimits& limits = {});

// Reads one line (without its '\n') into `line`; false at end of input. Throws InputError when
// the line is longer than PlanLimits::kMaxLineBytes (`line_no` names it).
bool read_line(std::istream& in, std::string& line, const std::string& file, std::uint64_t line_no);

// Lifetime-overlapping pairs, counted in O(n log n) without listing them.
std::uint64_t count_conflicts(const Problem& problem);

// max(offset + size) (saturating, see end_of); 0 for an empty problem.
std::int64_t placement_height(const Problem& problem, const std::vector<std::int64_t>& offsets);

// Maximum over time of the bytes alive: a lower bound on the height of any valid placement.
std::int64_t max_live_bytes(const Problem& problem);

// The input rows plus an `offset` column, in input order, with a header line.
std::string format_solution(const Problem& problem, const std::vector<std::int64_t>& offsets);

}  // namespace coopsim::plan
