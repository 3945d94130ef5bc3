// Static Dynamic-Storage-Allocation problems in MiniMalloc's CSV format (google/minimalloc,
// src/converter.cc): header `id,lower,upper,size`, lifetimes half-open [lower, upper), sizes in
// bytes. A placement gives every buffer an offset; its height is max(offset + size).
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace coopsim::plan {

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

// Two buffers conflict when their half-open lifetimes intersect.
inline bool lifetimes_overlap(const Buffer& a, const Buffer& b) {
  return a.lower < b.upper && b.lower < a.upper;
}

// Parses a problem. Throws TraceError ("file:line: problem") on a bad header, a wrong column
// count, a non-integer, lower >= upper, lower < 0, size <= 0 or a duplicate id.
Problem parse_problem(std::istream& in, const std::string& file);
Problem load_problem(const std::string& path);

// max(offset + size); 0 for an empty problem.
std::int64_t placement_height(const Problem& problem, const std::vector<std::int64_t>& offsets);

// Maximum over time of the bytes alive: a lower bound on the height of any valid placement.
std::int64_t max_live_bytes(const Problem& problem);

// The input rows plus an `offset` column, in input order, with a header line.
std::string format_solution(const Problem& problem, const std::vector<std::int64_t>& offsets);

}  // namespace coopsim::plan
