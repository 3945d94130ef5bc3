// PyTorch memory snapshot -> coopsim trace v1 (docs/import-torch-snapshot.md).
//
// One trace per device: a tensor per allocation (requested bytes; name from the stack frames), an
// `alloc` event with the recorded address and stream at each `alloc` entry, a `free` at each
// `free_completed` (the block is reusable only then; `free_requested` only ends the tensor's use:
// pytorch/pytorch @001074d2 c10/cuda/CUDACachingAllocator.cpp, free / process_events), marks for snapshot / oom /
// annotate / segment_* entries and external annotations, and timestamps from time_us when every entry has one (older
// files have none). The allocator state at the start of the history is rebuilt from the end-state `segments`
// (torch_snapshot_state.cpp) and carried as `segment` records; new segments' recorded addresses as `segment_address`
// records; the end state as header extra "final_segments". No ops and no compute events: snapshots record no compute
// cost, so these traces drive allocator-only simulations.
#include "coopsim/import/registry.hpp"
#include "coopsim/import/torch_snapshot.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <new>
#include <map>
#include <memory>
#include <optional>

#include "coopsim/engine/engine.hpp"
#include "coopsim/policy/keep.hpp"

#include "coopsim/base/error.hpp"
#include "coopsim/formats/pickle_stream.hpp"
#include "torch_snapshot_detail.hpp"

namespace coopsim {
namespace torch_snapshot {
namespace {

using namespace detail;

constexpr std::size_t kMaxSimulationRounds = 256;           // each round pins one block; bounds the work
constexpr std::uint32_t kNoEventEntry = ~std::uint32_t{0};  // an event of no entry (kNoEntry, in 4 bytes)

// "medium_128_training" from ".../medium_128_training_memory_snapshot.pickle.gz".
std::string model_name(const std::string& path) {
  std::string name = path.substr(path.find_last_of("/\\") == std::string::npos ? 0 : path.find_last_of("/\\") + 1);
  for (const std::string_view ext : {".gz", ".pickle", ".pkl"}) {
    if (name.size() > ext.size() && name.compare(name.size() - ext.size(), ext.size(), ext) == 0) {
      name.resize(name.size() - ext.size());
    }
  }
  for (const std::string_view suffix : {"_memory_snapshot", "_snapshot"}) {
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      name.resize(name.size() - suffix.size());
      break;
    }
  }
  return name;
}

nlohmann::json final_segments_json(const Snapshot& snap, const History& h) {
  nlohmann::json out = nlohmann::json::array();
  for (const SnapSegment& g : snap.segments) {
    nlohmann::json seg = {
        {"addr", g.addr}, {"size", g.size}, {"stream", dense_stream(h, g.stream)}, {"pool", to_string(g.pool)}};
    if (g.expandable) seg["expandable"] = true;
    nlohmann::json blocks = nlohmann::json::array();
    for (const SnapBlock& b : g.blocks) {
      nlohmann::json blk = {{"size", b.size}};
      if (b.active()) blk["requested"] = b.requested;
      blk["state"] = b.state == BlockState::Allocated      ? "active_allocated"
                     : b.state == BlockState::AwaitingFree ? "active_awaiting_free"
                                                           : "inactive";
      blocks.push_back(std::move(blk));
    }
    seg["blocks"] = std::move(blocks);
    out.push_back(std::move(seg));
  }
  return out;
}

class Builder {
 public:
  // Takes the tensor names out of `h` (a new round reconstructs it anew).
  Builder(const Snapshot& snap, History& h, Trace& t) : snap_(snap), h_(h), t_(t) {}

  void run() {
    t_.tensors.reserve(h_.tensors.size());
    for (std::size_t i = 0; i < h_.tensors.size(); ++i) {
      TensorInfo info;
      info.id = TensorId{static_cast<std::uint32_t>(i)};
      info.file_id = i;
      info.size = Bytes{h_.tensors[i].requested};
      info.name = std::move(h_.tensors[i].name);
      t_.tensors.push_back(std::move(info));
    }
    // Their names are the trace's now; a round that needs them reconstructs h anew. (Swapped
    // out: `= {}` would keep the array's capacity.)
    std::vector<Tensor>().swap(h_.tensors);
    t_.initial_segments = h_.initial;
    t_.segment_addresses = h_.segment_addresses;
    events();
  }

  std::int64_t origin_us() const { return origin_; }
  const std::vector<std::size_t>& oom_events() const { return oom_events_; }
  const std::vector<std::uint32_t>& event_entries() const { return event_entry_; }
  std::uint64_t clamped() const { return clamped_; }

 private:
  void events() {
    // Time origin: the earliest recorded time (entries and this device's annotations).
    if (snap_.has_time) {
      origin_ = snap_.entries.front().time_us;
      for (const Annotation& a : snap_.annotations) {
        if (a.time_us >= 0) origin_ = std::min(origin_, a.time_us);
      }
    }
    // At most one event per entry, three per oom: reserved whole, as growing would copy them.
    std::size_t most = h_.start_allocs.size() + snap_.annotations.size() + snap_.entries.size();
    for (const Entry& en : snap_.entries) most += en.action == Action::Oom ? 2 : 0;
    t_.events.reserve(most);
    event_entry_.reserve(most);
    for (const std::uint32_t tensor : h_.start_allocs) push(TraceEvent::alloc(TensorId{tensor}), -1);
    // Annotations go after the entries recorded at or before their time.
    std::vector<const Annotation*> anns;
    for (const Annotation& a : snap_.annotations) anns.push_back(&a);
    if (snap_.has_time) {
      std::stable_sort(anns.begin(), anns.end(),
                       [](const Annotation* a, const Annotation* b) { return a->time_us < b->time_us; });
    }
    std::size_t next_ann = 0;
    auto annotations_until = [&](std::int64_t time_us) {
      while (next_ann < anns.size() && (snap_.has_time ? anns[next_ann]->time_us < time_us : false)) {
        mark(anns[next_ann]->stage + " " + anns[next_ann]->name, anns[next_ann]->time_us);
        ++next_ann;
      }
    };
    for (const Entry& en : snap_.entries) {
      annotations_until(en.time_us);
      entry_ = en.index;
      const std::uint32_t tensor = h_.tensor_of_entry[en.index];
      const std::uint16_t stream = dense_stream(h_, en.stream);
      switch (en.action) {
        case Action::Alloc: push(TraceEvent::alloc(TensorId{tensor}, stream, en.addr), en.time_us); break;
        case Action::FreeCompleted: push(TraceEvent::free(TensorId{tensor}, stream), en.time_us); break;
        case Action::FreeRequested: break;  // the block is not reusable yet: nothing changes for the allocator
        case Action::Annotate: mark(en.name == 0 ? "annotate" : "annotate " + snap_.names[en.name], en.time_us); break;
        case Action::Oom:
          mark("oom", en.time_us);
          if (tensor == ~std::uint32_t{0}) break;  // a 0-byte request: mark only
          oom_events_.push_back(t_.events.size());
          // No recorded address: the request failed.
          push(TraceEvent::alloc(TensorId{tensor}, stream), en.time_us);
          push(TraceEvent::free(TensorId{tensor}, stream), en.time_us);
          break;
        default: mark(std::string(action_name(en.action)), en.time_us); break;
      }
    }
    entry_ = kNoEntry;
    while (next_ann < anns.size()) {
      mark(anns[next_ann]->stage + " " + anns[next_ann]->name, anns[next_ann]->time_us);
      ++next_ann;
    }
  }

  void mark(const std::string& label, std::int64_t time_us) {
    auto it = labels_.find(label);
    if (it == labels_.end()) {
      it = labels_.emplace(label, static_cast<std::uint32_t>(t_.labels.size())).first;
      t_.labels.push_back(label);
    }
    push(TraceEvent::mark(it->second), time_us);
  }

  // Timestamps in ns from the origin; kept non-decreasing (entries of several threads could
  // interleave out of order; none of the known files do).
  void push(TraceEvent e, std::int64_t time_us) {
    if (snap_.has_time && time_us >= 0) {
      std::int64_t ns = (time_us - origin_) * 1000;
      if (ns < last_) {
        ns = last_;
        ++clamped_;
      }
      e.time = SimTime{ns};
      last_ = ns;
    }
    t_.events.push_back(e);
    // Entry indices are below 2^32 - 1 (EntryReader::keep): 4 bytes per event, not 8.
    event_entry_.push_back(entry_ == kNoEntry ? kNoEventEntry : static_cast<std::uint32_t>(entry_));
  }

  const Snapshot& snap_;
  History& h_;
  Trace& t_;
  std::map<std::string, std::uint32_t> labels_;
  std::int64_t origin_ = 0;
  std::int64_t last_ = 0;
  std::uint64_t clamped_ = 0;
  std::vector<std::size_t> oom_events_;     // event index of each imported oom request
  std::vector<std::uint32_t> event_entry_;  // per event: its entry, or kNoEventEntry
  std::size_t entry_ = kNoEntry;            // the entry being converted
};

// Simulates the trace with the `pytorch` model and explains its first misplaced allocation by an
// ambiguous pre-existing block's remainder, when it can: the model carved the request (rounded
// to s) from the free block right behind such a block B, still live, and the recording did not.
// Best fit took that block as the smallest one of at least s bytes; the recording's blocks were
// the same except that one, which is smaller there by B's unsplit remainder r (the gap behind B
// is r + f). Had f been at least s, it would have been an even better fit, and the recording's
// allocation would have landed in the gap, which the forward rule already pins; so f < s: B
// holds more than gap - s bytes of it. The smallest such remainder (in 512-byte units) is taken,
// or the whole gap when less than a free large block (> 1 MiB) would be left. Returns (address,
// block size), or nothing when the mismatch is not of this kind or the remainder would exceed
// what should_split leaves.
std::optional<std::pair<std::uint64_t, std::uint64_t>> remainder_from_simulation(
    const Trace& t, const History& h, const std::vector<std::uint32_t>& entries, const PyTorchOptions& opts) {
  constexpr std::uint64_t kBudget = 4ULL << 40;  // far above any device: no release path
  constexpr std::uint64_t kMinBlock = 512, kSmall = 1ULL << 20;
  PyTorchCachingAllocator alloc(Bytes{kBudget}, opts);
  KeepPolicy keep;
  EngineOptions eo;
  eo.budget = Bytes{kBudget};
  Report rep;
  try {
    run_engine(t, alloc, keep, eo, rep);
  } catch (const std::exception&) {
    return std::nullopt;  // e.g. expandable ranges without the setting: not this question
  }
  if (rep.addresses.mismatches == 0) return std::nullopt;
  const std::size_t ev = index_of(rep.addresses.first_mismatch_event);
  if (ev >= t.events.size() || ev >= entries.size()) return std::nullopt;
  const std::size_t entry = entries[ev] == kNoEventEntry ? kNoEntry : entries[ev];
  const std::uint64_t got = rep.addresses.first_got;
  const std::uint64_t s = PyTorchCachingAllocator::round_size(t.tensor(t.events[ev].tensor()).size.value, opts);
  for (const History::Ambiguous& a : h.ambiguous) {
    if (a.addr + a.size != got || entry >= a.free_entry || a.limit - got < s) continue;
    const std::uint64_t gap = a.limit - got;
    std::uint64_t add = gap - s + kMinBlock;
    if (gap - add <= kSmall) add = gap;
    const std::uint64_t remainder = a.size + add - a.rounded;
    const bool oversize = a.rounded >= opts.max_split_size.value;
    if (oversize ? remainder >= opts.max_non_split_rounding_size.value : remainder > kSmall) return std::nullopt;
    return std::make_pair(a.addr, a.size + add);
  }
  return std::nullopt;
}

// Reserved bytes just before each oom entry: the initial state's segments (and mapped pages),
// then segment_alloc / segment_map add and segment_free / segment_unmap subtract.
std::vector<std::uint64_t> reserved_at_ooms(const Snapshot& snap, const History& h) {
  std::uint64_t reserved = 0;
  for (const InitialSegment& g : h.initial) reserved += g.size().value;
  std::vector<std::uint64_t> out;
  for (const Entry& e : snap.entries) {
    switch (e.action) {
      case Action::SegmentAlloc:
      case Action::SegmentMap: reserved += e.size; break;
      case Action::SegmentFree:
      case Action::SegmentUnmap: reserved = reserved >= e.size ? reserved - e.size : 0; break;
      case Action::Oom: out.push_back(reserved); break;
      default: break;
    }
  }
  return out;
}

}  // namespace

Trace import_value(const pickle::Value& root, const std::string& path, const TorchSnapshotOptions& options) {
  MemoryCap memory(Limits::default_max_memory());
  return import_value(root, path, options, memory);
}

namespace {

Trace import_snapshot(const Snapshot& snap, const std::string& path, const TorchSnapshotOptions& options) {
  PyTorchOptions opts;
  try {
    opts = allocator_options(snap.allocator_settings);
  } catch (const ConfigError& e) {
    throw Error(fmt::format("{}: {}", path, e.what()));
  }
  // Ambiguous remainders (torch_snapshot_state.cpp) are settled by simulating: each round pins
  // one from the first misplaced allocation, until none is explained that way.
  std::map<std::uint64_t, std::uint64_t> sizes;
  History h = reconstruct(snap, opts);
  Trace t;
  auto build = [&]() {
    t = Trace{};
    t.path = path;
    auto b = std::make_unique<Builder>(snap, h, t);
    b->run();
    return b;
  };
  std::unique_ptr<Builder> built = build();
  for (std::size_t round = 0; round < kMaxSimulationRounds && !h.ambiguous.empty(); ++round) {
    const auto fix = remainder_from_simulation(t, h, built->event_entries(), opts);
    if (!fix) break;
    sizes[fix->first] = fix->second;
    h = reconstruct(snap, opts, sizes);
    built = build();
  }
  const Builder& builder = *built;

  TraceHeader& hd = t.header;
  hd.model = model_name(path);
  hd.time_unit = "us";
  std::array<std::uint64_t, kActionNames.size()> per_action{};
  for (const Entry& e : snap.entries) ++per_action[static_cast<std::size_t>(e.action)];
  std::map<std::string, std::uint64_t> actions;
  for (std::size_t a = 0; a < per_action.size(); ++a) {
    if (per_action[a] != 0) actions[std::string(kActionNames[a].first)] = per_action[a];
  }
  nlohmann::json ooms = nlohmann::json::array();
  const std::vector<std::uint64_t> oom_reserved = reserved_at_ooms(snap, h);
  std::size_t k = 0, ev = 0;
  for (const Entry& e : snap.entries) {
    if (e.action != Action::Oom) continue;
    const std::uint64_t reserved = oom_reserved[k++];
    nlohmann::json o = {{"entry", e.index}, {"size", e.size}, {"device_free", e.device_free()}, {"reserved", reserved}};
    // The budget at which the simulation fails here as the recording did: cudaMalloc of the
    // allocation size failed with device_free bytes left next to `reserved`.
    if (reserved <= ~std::uint64_t{0} - e.device_free()) o["capacity"] = reserved + e.device_free();
    if (e.size > 0 && ev < builder.oom_events().size()) o["event"] = builder.oom_events()[ev++];
    ooms.push_back(std::move(o));
  }
  std::uint64_t final_reserved = 0;
  for (const SnapSegment& g : snap.segments) final_reserved += g.size;
  hd.source = {
      {"tool", "coopsim import torch-snapshot"},
      {"file", path},
      {"device", options.device},
      {"devices", snap.devices},
      {"entries", snap.entries.size()},
      {"actions", actions},
      {"streams", h.streams},
      {"timestamps", snap.has_time},
      {"time_origin_us", snap.has_time ? nlohmann::json(builder.origin_us()) : nlohmann::json(nullptr)},
      {"timestamps_clamped", builder.clamped()},
      {"annotations", snap.annotations.size()},
      {"ooms", ooms},
      {"truncated", h.truncated},
      {"initial_state", h.exact ? "exact" : "approximate"},
      {"preexisting_blocks_freed", h.preexisting_freed},
      {"preexisting_blocks_kept", h.preexisting_kept},
      {"absorbed_remainders", h.absorbed_remainders},
      {"remainders_from_replay", sizes.size()},
  };
  if (h.truncated) hd.source["truncation_evidence"] = h.truncation_evidence;
  hd.source["allocator_settings"] = snap.allocator_settings;
  if (!h.notes.empty()) hd.source["notes"] = h.notes;
  hd.extra = nlohmann::json::object();
  hd.extra["device"] = options.device;
  hd.extra["truncated"] = h.truncated;
  if (!snap.allocator_settings.is_null()) hd.extra["allocator_settings"] = snap.allocator_settings;
  hd.extra["final_segments"] = final_segments_json(snap, h);
  hd.extra["final_reserved"] = final_reserved;
  return t;
}

}  // namespace

Trace import_value(const pickle::Value& root, const std::string& path, const TorchSnapshotOptions& options,
                   MemoryCap& memory) {
  EntryReader entries(path, memory);
  return import_snapshot(read_snapshot(root, path, options.device, memory, entries), path, options);
}

namespace {

// The history streams into Entry records (torch_snapshot_entries.cpp); the rest of the snapshot
// (segments, settings) is small and read as a tree. `stream(memory, sink)` reads the pickle with
// the sink; `tree(memory)` reads it whole, for the rare pickle whose taken entries turn out to
// be referenced elsewhere too.
template <class Stream, class Tree>
Trace import_streaming(const std::string& path, const TorchSnapshotOptions& options, std::uint64_t max_memory,
                       Stream stream, Tree tree) {
  {
    MemoryCap memory(max_memory);
    EntryReader entries(path, memory);
    EntrySink sink(entries);
    pickle::ValuePtr root = stream(memory, sink);
    const pickle::Value* traces = root->get("device_traces");
    if (sink.empty() || (traces != nullptr && sink.only_in(*traces))) {
      const Snapshot snap = read_snapshot(*root, path, options.device, memory, entries, &sink);
      root.reset();  // the tree and the lists of taken() are done with
      sink.clear();
      return import_snapshot(snap, path, options);
    }
  }
  MemoryCap memory(max_memory);
  return import_value(*tree(memory), path, options, memory);
}

}  // namespace

Trace import_bytes(std::string_view bytes, const std::string& path, const TorchSnapshotOptions& options,
                   std::uint64_t max_memory) {
  return import_streaming(
      path, options, max_memory,
      [&](MemoryCap& memory, EntrySink& sink) { return pickle::stream(bytes, path, memory, sink); },
      [&](MemoryCap& memory) { return pickle::parse(bytes, path, memory); });
}

}  // namespace torch_snapshot

Trace import_torch_snapshot(const std::string& path, const TorchSnapshotOptions& options, const Limits& limits) {
  Trace t;
  try {
    t = torch_snapshot::import_streaming(
        path, options, limits.max_memory,
        [&](MemoryCap& memory, torch_snapshot::detail::EntrySink& sink) {
          return pickle::stream_file(path, limits.max_input_bytes, memory, sink);
        },
        [&](MemoryCap& memory) { return pickle::parse_file(path, limits.max_input_bytes, memory); });
  } catch (const std::bad_alloc&) {
    throw out_of_memory(path, limits.max_memory);
  }
  check_limits(t, limits, path);
  return t;
}

// Its line in the registry (src/import/registry.cpp).
ImporterEntry torch_snapshot_importer_entry() {
  return {"torch-snapshot",
          "a PyTorch memory snapshot pickle (torch.cuda.memory._snapshot(); docs/import-torch-snapshot.md)",
          {"--device"},
          {},
          [](const std::string& input, const ImportOptions& o) {
            return import_torch_snapshot(input, TorchSnapshotOptions{o.device}, o.limits);
          },
          &torch_snapshot::simulation_hints};
}

}  // namespace coopsim
