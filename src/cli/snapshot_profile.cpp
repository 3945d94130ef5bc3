// Memory profile of a recording (snapshot_profile.hpp).
#include "snapshot_profile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

#include "coopsim/base/error.hpp"
#include "coopsim/formats/trace_file.hpp"
#include "coopsim/import/importers.hpp"
#include "coopsim/import/torch_snapshot.hpp"
#include "coopsim/model/runlog.hpp"
#include "coopsim/sim/simulation.hpp"

namespace coopsim::snapshot_cli {
namespace {

bool named(std::string_view path, std::string_view ext) {
  return path.ends_with(ext) || path.ends_with(std::string(ext) + ".gz");
}

// Large enough that no recording runs out of it: the replay measures, it does not constrain.
constexpr std::uint64_t kUnlimitedBudget = std::uint64_t{1} << 44;

}  // namespace

Trace load_recording(const std::string& path) {
  const Limits limits;
  if (named(path, ".pickle")) return import_torch_snapshot(path, TorchSnapshotOptions{}, limits);
  if (named(path, ".jsonl")) return load_trace(path, limits);
  if (named(path, ".json")) return import_kineto(path, KinetoOptions{}, limits);
  throw Error(path +
              ": cannot tell the format from the name (expected .pickle[.gz] snapshot, .jsonl[.gz] trace v1 or "
              ".json[.gz] Kineto trace; `coopsim import` converts others)");
}

std::vector<std::uint32_t> live_after(const Trace& trace, std::uint32_t event) {
  std::vector<std::uint8_t> live(trace.tensors.size(), 0);
  std::vector<std::uint32_t> order;
  for (const InitialSegment& g : trace.initial_segments) {
    for (const InitialBlock& b : g.blocks) {
      if (b.is_free() || live[index_of(b.tensor)]) continue;
      live[index_of(b.tensor)] = 1;
      order.push_back(index_of(b.tensor));
    }
  }
  const std::size_t end = std::min<std::size_t>(trace.events.size(), std::size_t{event} + 1);
  for (std::size_t i = 0; i < end; ++i) {
    const TraceEvent& e = trace.events[i];
    if (e.kind == EventKind::Alloc && !live[index_of(e.tensor())]) {
      live[index_of(e.tensor())] = 1;
      order.push_back(index_of(e.tensor()));
    } else if (e.kind == EventKind::Free) {
      live[index_of(e.tensor())] = 0;
    }
  }
  // A tensor id allocated again after its free (trace v1 iterations reuse their tensors) is in
  // `order` once per allocation: keep its first entry only, and only when it is live.
  std::vector<std::uint32_t> out;
  for (const std::uint32_t t : order) {
    if (live[t] == 1) out.push_back(t);
    if (live[t] == 1) live[t] = 2;
  }
  return out;
}

MemoryProfile profile_memory(const std::string& path) {
  MemoryProfile p;
  p.trace = load_recording(path);
  SimConfig cfg;
  cfg.doc["allocator"] = "pytorch";
  cfg.doc["policy"] = "keep";
  cfg.doc["budget"] = kUnlimitedBudget;
  p.overrides = torch_snapshot::replay_overrides(p.trace);
  for (const std::string& s : p.overrides) apply_override(cfg, s);
  RunLog log;
  RunOptions options;
  options.log = &log;
  p.report = run_simulation(check_config(cfg), p.trace, options);
  if (p.report.status != RunStatus::Completed) {
    throw Error(fmt::format("{}: the replay on the pytorch model ended {} (expected it to complete)", path,
                            to_string(p.report.status)));
  }

  const Trace& t = p.trace;
  p.recorded_time = !t.events.empty() && std::all_of(t.events.begin(), t.events.end(),
                                                     [](const TraceEvent& e) { return e.timed(); });
  // The allocator's figures after each event: the last Memory record made while processing it.
  std::vector<const LogRecord*> memory(t.events.size(), nullptr);
  for (const LogRecord& r : log.records) {
    if (r.kind == LogKind::Memory && r.event != kNoEvent && index_of(r.event) < memory.size()) {
      memory[index_of(r.event)] = &r;
    }
  }
  Bytes allocated, reserved, live;
  SimTime clock{0};
  // The recorded initial state is installed before the first event.
  std::vector<std::uint8_t> is_live(t.tensors.size(), 0);
  for (const InitialSegment& g : t.initial_segments) {
    reserved += g.size();
    for (const InitialBlock& b : g.blocks) {
      if (b.is_free()) continue;
      allocated += b.size;
      live += t.tensor(b.tensor).size;
      is_live[index_of(b.tensor)] = 1;
    }
  }
  for (std::uint32_t i = 0; i < t.events.size(); ++i) {
    const TraceEvent& e = t.events[i];
    bool changed = false;
    if (e.kind == EventKind::Alloc && !is_live[index_of(e.tensor())]) {
      is_live[index_of(e.tensor())] = 1;
      live += t.tensor(e.tensor()).size;
      changed = true;
    } else if (e.kind == EventKind::Free && is_live[index_of(e.tensor())]) {
      is_live[index_of(e.tensor())] = 0;
      live -= t.tensor(e.tensor()).size;
      changed = true;
    }
    if (const LogRecord* r = memory[i]; r != nullptr) {
      changed = changed || r->allocated != allocated || r->reserved != reserved;
      allocated = r->allocated;
      reserved = r->reserved;
      clock = r->start;
    }
    if (changed) {
      p.samples.push_back(MemorySample{i, p.recorded_time ? e.time : clock, allocated, reserved, live});
    }
  }
  return p;
}

}  // namespace coopsim::snapshot_cli
