// Paths used by tests. Tests run with the project root as working directory.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

namespace coopsim::test {

// ../shared relative to the project root; tests that need it skip when it is absent.
inline std::filesystem::path shared_dir() { return std::filesystem::path("..") / "shared"; }
inline bool have_shared() { return std::filesystem::exists(shared_dir() / "traces"); }

// A fresh scratch directory under the build tree for this test binary.
inline std::filesystem::path scratch_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("coopsim-test-" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Writes `text` to dir/name byte for byte; returns the path.
inline std::string write_file(const std::filesystem::path& dir, const std::string& name, const std::string& text) {
  const std::string p = (dir / name).string();
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

// A coopsim trace's header line: 38 bytes and a newline, so line 1 holds bytes 1..39.
inline const std::string kTraceHeader = "{\"format\":\"coopsim-trace\",\"version\":1}\n";

}  // namespace coopsim::test
