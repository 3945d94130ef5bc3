// The comparison of two recordings of one training step (snapshot_commands.hpp): each side's
// peaks and the live bytes there, attributed to frames, allocation size classes and the
// recorded allocator settings.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <set>

#include "coopsim/base/units.hpp"
#include "snapshot_commands.hpp"

namespace coopsim::snapshot_cli {
namespace {

// The frame a tensor is charged to: the Python stack top when its name has one (the snapshot
// importer names tensors "op in function (file.py:line)" or "function (file.py:line)"), else
// the op or tensor name it has, else the op that produced it (trace v1 names may be empty).
std::string frame_of(const Trace& t, std::uint32_t tensor, const std::vector<std::string>& producer) {
  const std::string& name = t.tensors[tensor].name;
  if (const auto in = name.find(" in "); in != std::string::npos && name.ends_with(")")) return name.substr(in + 4);
  if (!name.empty()) return name;
  if (!producer[tensor].empty()) return producer[tensor];
  return "(unnamed)";
}

// Power-of-two size classes of the requested bytes: "[1 MiB, 2 MiB)"; zero bytes on their own.
std::string size_class(Bytes b) {
  if (b.value == 0) return "0 B";
  const std::uint64_t low = std::bit_floor(b.value);
  return fmt::format("[{}, {})", format_bytes(Bytes{low}), format_bytes(Bytes{low * 2}));
}

void flatten(const nlohmann::json& j, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) flatten(v, prefix.empty() ? k : prefix + "." + k, out);
  } else {
    out[prefix.empty() ? "(value)" : prefix] = j.dump();
  }
}

// The first sample where `field` is largest; of those with the largest `field`, the one where
// `then` is largest. Why the tie-break: reserved bytes stay at their peak while the cache holds
// the segments, and a snapshot's history may start with the cache already full; the moment the
// peak footprint was most used is the one that explains it.
const MemorySample* peak(const std::vector<MemorySample>& samples, Bytes MemorySample::*field,
                         Bytes MemorySample::*then) {
  const MemorySample* best = nullptr;
  for (const MemorySample& s : samples) {
    if (best == nullptr || s.*field > best->*field || (s.*field == best->*field && s.*then > best->*then)) best = &s;
  }
  return best;
}

std::vector<DiffRow> rows(const std::map<std::string, Bytes>& a, const std::map<std::string, Bytes>& b) {
  std::set<std::string> keys;
  for (const auto& [k, v] : a) keys.insert(k);
  for (const auto& [k, v] : b) keys.insert(k);
  std::vector<DiffRow> out;
  for (const std::string& k : keys) {
    const auto ia = a.find(k);
    const auto ib = b.find(k);
    DiffRow r{k, ia == a.end() ? Bytes{} : ia->second, ib == b.end() ? Bytes{} : ib->second};
    if (r.delta() != 0) out.push_back(std::move(r));
  }
  std::stable_sort(out.begin(), out.end(), [](const DiffRow& x, const DiffRow& y) {
    const auto dx = x.delta() < 0 ? -x.delta() : x.delta();
    const auto dy = y.delta() < 0 ? -y.delta() : y.delta();
    return dx > dy;
  });
  return out;
}

}  // namespace

PeakFigures peak_figures(const MemoryProfile& p, const std::string& path) {
  PeakFigures f;
  const Trace& t = p.trace;
  f.path = path;
  f.model = t.header.model;
  f.events = t.events.size();
  f.allocs = static_cast<std::uint64_t>(std::count_if(
      t.events.begin(), t.events.end(), [](const TraceEvent& e) { return e.kind == EventKind::Alloc; }));
  if (!p.samples.empty()) {
    f.at_allocated_peak = *peak(p.samples, &MemorySample::allocated, &MemorySample::allocated);
    f.at_reserved_peak = *peak(p.samples, &MemorySample::reserved, &MemorySample::allocated);
  }
  std::vector<std::string> producer(t.tensors.size());
  for (const OpInfo& op : t.ops) {
    for (const TensorId out : op.outputs) {
      if (producer[index_of(out)].empty()) producer[index_of(out)] = op.name;
    }
  }
  if (!p.samples.empty()) {
    for (const std::uint32_t tensor : live_after(t, f.at_allocated_peak.event)) {
      const Bytes size = t.tensors[tensor].size;
      f.frames[frame_of(t, tensor, producer)] += size;
      f.sizes[size_class(size)] += size;
    }
  }
  const nlohmann::json& extra = t.header.extra;
  if (extra.is_object() && extra.contains("allocator_settings")) flatten(extra["allocator_settings"], "", f.settings);
  return f;
}

SnapshotDiff diff_profiles(const MemoryProfile& a, const std::string& path_a, const MemoryProfile& b,
                           const std::string& path_b) {
  SnapshotDiff d{peak_figures(a, path_a), peak_figures(b, path_b), {}, {}, {}};
  d.frames = rows(d.a.frames, d.b.frames);
  d.sizes = rows(d.a.sizes, d.b.sizes);
  // A side that records no settings (a trace v1, a snapshot before torch ~2.5) is not compared
  // key by key: every key would differ, and what it ran with is unknown, not "unset".
  std::set<std::string> keys;
  if (!d.a.settings.empty() && !d.b.settings.empty()) {
    for (const auto& [k, v] : d.a.settings) keys.insert(k);
    for (const auto& [k, v] : d.b.settings) keys.insert(k);
  }
  for (const std::string& k : keys) {
    const auto ia = d.a.settings.find(k);
    const auto ib = d.b.settings.find(k);
    const std::string va = ia == d.a.settings.end() ? "(not recorded)" : ia->second;
    const std::string vb = ib == d.b.settings.end() ? "(not recorded)" : ib->second;
    if (va != vb) d.settings.push_back({k, {va, vb}});
  }
  return d;
}

}  // namespace coopsim::snapshot_cli
