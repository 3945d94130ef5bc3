// `coopsim snapshot timeline|diff` (docs/snapshot-diff.md): the documents they write, each a
// pure function of the memory profiles (snapshot_profile.hpp), so the output is deterministic.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "snapshot_profile.hpp"

namespace coopsim::snapshot_cli {

// --from / --to: times since the recording's first event (MemoryProfile::recorded_time).
struct TimeWindow {
  std::optional<SimTime> from, to;
};
std::string timeline_json(const MemoryProfile& p, const std::string& path, const TimeWindow& window);

// One recording's figures at its peaks.
struct PeakFigures {
  std::string path, model;
  std::uint64_t events = 0, allocs = 0;
  // The figures at the allocated peak (its first maximum) and at the reserved peak (of the
  // events where reserved bytes are at their maximum, the one with the most allocated: the cache
  // keeps reserved bytes at their peak long after it, and a snapshot's history may start with
  // the cache full). Fragmentation: free bytes in segments, reserved - allocated.
  MemorySample at_allocated_peak, at_reserved_peak;
  std::map<std::string, Bytes> frames;  // live bytes at the allocated peak by frame
  std::map<std::string, Bytes> sizes;   // the same by allocation size class
  std::map<std::string, std::string> settings;  // recorded allocator settings, flattened
};
PeakFigures peak_figures(const MemoryProfile& p, const std::string& path);

// A row of an attribution: a frame or size class and its live bytes at each side's peak.
struct DiffRow {
  std::string key;
  Bytes a, b;
  [[nodiscard]] std::int64_t delta() const {
    return static_cast<std::int64_t>(b.value) - static_cast<std::int64_t>(a.value);
  }
};
struct SnapshotDiff {
  PeakFigures a, b;
  std::vector<DiffRow> frames, sizes;  // by |delta| descending, then key; unchanged rows dropped
  std::vector<std::pair<std::string, std::pair<std::string, std::string>>> settings;  // key -> (a, b)
};
SnapshotDiff diff_profiles(const MemoryProfile& a, const std::string& path_a, const MemoryProfile& b,
                           const std::string& path_b);

std::string diff_text(const SnapshotDiff& d, std::size_t rows);
nlohmann::ordered_json diff_json(const SnapshotDiff& d);
// Bars of the peak figures of both sides and of the largest frame differences.
std::string diff_svg(const SnapshotDiff& d, std::size_t rows);

}  // namespace coopsim::snapshot_cli
