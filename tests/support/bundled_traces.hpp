// The bundled traces (traces/*.jsonl.gz, relative to the project root the tests run in), sorted.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace coopsim::test {

inline std::vector<std::filesystem::path> bundled_traces() {
  std::vector<std::filesystem::path> traces;
  for (const auto& e : std::filesystem::directory_iterator("traces")) {
    if (e.path().string().ends_with(".jsonl.gz")) traces.push_back(e.path());
  }
  std::sort(traces.begin(), traces.end());
  return traces;
}

// The budgets (percent of the no-eviction peak) a bundled suite runs: `full`, or with
// COOPSIM_SANITIZE=1 (scripts/test.sh --sanitize, where every run is several times slower)
// every other one, counted from the largest.
inline std::vector<int> bundled_percents(const std::vector<int>& full) {
  const char* s = std::getenv("COOPSIM_SANITIZE");
  if (s == nullptr || std::string_view(s) != "1") return full;
  std::vector<int> out;
  for (std::size_t i = full.size(); i > 0; i -= std::min<std::size_t>(i, 2)) out.insert(out.begin(), full[i - 1]);
  return out;
}

}  // namespace coopsim::test
