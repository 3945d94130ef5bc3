// The bundled traces (traces/*.jsonl.gz, relative to the project root the tests run in), sorted.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
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

}  // namespace coopsim::test
