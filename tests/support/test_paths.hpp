// Paths used by tests. Tests run with the project root as working directory.
#pragma once

#include <filesystem>
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

}  // namespace coopsim::test
