// Internal: line splitting and strict integer parsing shared by the problem and solution readers.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <vector>

#include "coopsim/base/error.hpp"

namespace coopsim::plan::csv {

inline std::vector<std::string> split(std::string line) {
  if (!line.empty() && line.back() == '\r') line.pop_back();
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const auto comma = line.find(',', start);
    out.push_back(line.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

inline std::int64_t integer(const std::string& text, const char* column, const std::string& file, std::uint64_t line) {
  std::int64_t value = 0;
  const char* begin = text.data();
  const char* end = begin + text.size();
  const auto [ptr, ec] = std::from_chars(begin, end, value);
  if (text.empty() || ec != std::errc() || ptr != end)
    throw InputError(file, line, std::string(column) + " is not an integer: '" + text + "'");
  return value;
}

}  // namespace coopsim::plan::csv
