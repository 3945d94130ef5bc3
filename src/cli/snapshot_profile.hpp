// The memory profile of one recording for `coopsim snapshot timeline|diff`: the recording
// imported as a trace (a PyTorch snapshot through the streaming import, a trace v1 or a Kineto
// trace as they are), replayed on the `pytorch` allocator model with the recorded allocator
// settings, and the allocator's allocated / reserved bytes and the live requested bytes after
// each trace event. Why replay: a snapshot records its segments only at dump time and its
// history may start late; the importer rebuilds the state at the start of the history and the
// model, exact on snapshots (docs/import-torch-snapshot.md, --check-addresses), gives reserved
// bytes at every event, for every input format alike.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coopsim/base/units.hpp"
#include "coopsim/model/report.hpp"
#include "coopsim/model/trace.hpp"

namespace coopsim::snapshot_cli {

// Imports `path` by its name: *.pickle[.gz] a PyTorch memory snapshot (device 0), *.jsonl[.gz]
// a coopsim trace v1, *.json[.gz] a Kineto trace. Error "<path>: ..." for other names.
Trace load_recording(const std::string& path);

struct MemorySample {
  std::uint32_t event = 0;  // the trace event after which the figures hold
  SimTime time{0};          // see MemoryProfile::recorded_time
  Bytes allocated, reserved, live;
};

struct MemoryProfile {
  Trace trace;
  Report report;                       // the replay's report (peaks, fragmentation)
  std::vector<std::string> overrides;  // the allocator settings replayed ("pytorch.key=value")
  // Times: the recording's own timestamps (since its first) when every event has one, else the
  // replay's simulated compute clock (trace v1 op durations; 0 throughout for a trace without).
  bool recorded_time = false;
  std::vector<MemorySample> samples;  // in event order; one per event that changed a figure
};
MemoryProfile profile_memory(const std::string& path);

// The storages live just after trace event `event` (the recorded initial state's first, then
// in allocation order), as tensor indices.
std::vector<std::uint32_t> live_after(const Trace& trace, std::uint32_t event);

}  // namespace coopsim::snapshot_cli
