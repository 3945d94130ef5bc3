// Shared helpers of the libFuzzer harnesses (tests/fuzz/*_fuzz.cpp). Each harness defines
// LLVMFuzzerTestOneInput; it is linked either with libFuzzer (scripts/fuzz.sh, clang) or with
// replay_main.cpp, which feeds it every file of a corpus (the 'fuzz-replay' Meson tests).
//
// The oracles: bad input may only throw coopsim::Error, whose message is one non-empty line
// without control characters; anything else (another exception, a sanitizer report, a broken
// round trip) aborts, which both drivers report as a failure.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "coopsim/base/error.hpp"
#include "coopsim/model/trace.hpp"
#include "coopsim/formats/trace_file.hpp"

namespace coopsim::fuzz {

[[noreturn]] inline void die(std::string_view what, std::string_view detail) {
  std::fprintf(stderr, "fuzz oracle failed: %.*s: %.*s\n", static_cast<int>(what.size()), what.data(),
               static_cast<int>(detail.size()), detail.data());
  std::abort();
}

inline void require(bool ok, std::string_view what, std::string_view detail = {}) {
  if (!ok) die(what, detail);
}

// The caps every harness reads with: a memory cap far below libFuzzer's -rss_limit_mb=2048
// (scripts/fuzz.sh), so that a small input describing huge data (a gzip bomb, a pickle whose
// memo references expand, 10^8 events) ends in the one-line limits.max_memory error, never in
// an out-of-memory report. ASan's redzones and quarantine come on top of what the budget counts.
inline Limits fuzz_limits() {
  Limits l;
  l.max_memory = std::uint64_t{256} << 20;
  return l;
}

// A bad-input message must be one non-empty line with no control characters.
inline void check_message(const std::exception& e) {
  const std::string_view m = e.what();
  require(!m.empty(), "empty error message");
  for (const char c : m) {
    const auto u = static_cast<unsigned char>(c);
    require(u >= 0x20 && u != 0x7f, "control character in error message", m);
  }
}

// The temporary files of this process, removed when it exits normally (a crash leaves them).
struct TempFiles {
  std::vector<std::string> paths;
  TempFiles() = default;
  TempFiles(const TempFiles&) = delete;
  TempFiles& operator=(const TempFiles&) = delete;
  ~TempFiles() {
    for (const auto& p : paths) std::remove(p.c_str());
  }
};

// A file in the temporary directory, unique per process and name, rewritten per input.
inline std::string temp_path(const std::string& name) {
  static TempFiles files;
  const auto dir = std::filesystem::temp_directory_path();
  std::string path = (dir / ("coopsim-fuzz-" + std::to_string(::getpid()) + "-" + name)).string();
  if (std::find(files.paths.begin(), files.paths.end(), path) == files.paths.end()) files.paths.push_back(path);
  return path;
}

inline std::string write_temp(const std::string& name, const std::uint8_t* data, std::size_t size) {
  const std::string path = temp_path(name);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  require(f != nullptr, "cannot create temporary file", path);
  if (size > 0) require(std::fwrite(data, 1, size, f) == size, "cannot write temporary file", path);
  require(std::fclose(f) == 0, "cannot close temporary file", path);
  return path;
}

// A trace that a loader or importer accepted must be writable and read back unchanged.
inline void check_round_trip(const Trace& t) {
  const std::string path = temp_path("round-trip.jsonl");
  try {
    write_trace(t, path);
  } catch (const Error& e) {
    die("accepted trace cannot be written", e.what());
  }
  Trace back;
  try {
    back = load_trace(path);
  } catch (const Error& e) {
    die("written trace does not load", e.what());
  }
  std::remove(path.c_str());
  require(back.header == t.header, "round trip changed the header");
  require(back.tensors == t.tensors, "round trip changed the tensors");
  require(back.ops == t.ops, "round trip changed the ops");
  require(back.events == t.events, "round trip changed the events");
  require(back.labels == t.labels, "round trip changed the labels");
  require(back.initial_segments == t.initial_segments, "round trip changed the initial segments");
  require(back.segment_addresses == t.segment_addresses, "round trip changed the segment addresses");
}

}  // namespace coopsim::fuzz
