// Kineto (PyTorch profiler) Chrome traces -> coopsim trace v1.
//
// Source format: Kineto's Chrome-trace JSON (pytorch/kineto libkineto/src/output_json.cpp,
// ChromeTraceLogger; category names of 2021-era and 2023+ traces; docs/import-kineto.md). Conversion rules
// (user-facing description in docs/import-kineto.md):
//  * Memory: the selected CUDA device's [memory] events ("Device Type" 1, "Device Id" =
//    --device) become alloc / free events at their ts, paired into tensors by
//    kineto_memory.cpp. CPU and other devices' events are only counted (header source).
//  * Ops: Chrome "X" events of a thread nest like a call stack, so every CPU op is one or more
//    levels inside a top-level op. Each top-level CPU op (per thread; ProfilerStep ranges and
//    record_function user ranges are not ops) becomes one v1 op and one compute event, so no
//    time is counted twice. Its duration is the GPU time it caused: the kernels, memcpys and
//    memsets on the device whose correlation id matches a runtime call inside the op
//    (docs/import-kineto.md); in a trace without GPU activity, the op's own CPU dur. Its outputs are the
//    tensors allocated inside it (at any depth) that are still live when it ends; it has no
//    inputs (Kineto does not record dataflow). With KinetoOptions::et, the ops and their
//    tensors come from an Execution Trace of the same run instead (src/import/et_*.cpp). The compute event sits at the
//    op's end, after the op's own allocations and frees.
//  * A tensor is named after the innermost op around its allocation (same pid/tid, ts within
//    [op ts, op ts + dur]), followed by " in <top-level op>" when that differs; tensors
//    allocated and freed inside one top-level op are its workspace.
//  * Iterations: ProfilerStep#N ranges; the header's iterations is their number, everything
//    before the first step belongs to no iteration. [OutOfMemory] events become mark "oom".
//  * Time: t in us relative to the earliest op, step or memory event (exact: fractional ts
//    keep their nanosecond digits).
#include <fmt/format.h>

#include <algorithm>
#include <new>
#include <filesystem>
#include <numeric>
#include <set>
#include <tuple>

#include "coopsim/import/registry.hpp"
#include "coopsim/base/error.hpp"
#include "coopsim/import/importers.hpp"
#include "et_detail.hpp"
#include "kineto_detail.hpp"

namespace coopsim {
namespace {

using namespace kineto_detail;
using json = nlohmann::json;

// "worker0.pt.trace.json.gz" -> "worker0".
std::string model_name(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  for (bool cut = true; cut;) {
    cut = false;
    for (const std::string_view ext : {".gz", ".json", ".trace", ".pt"}) {
      if (name.size() > ext.size() && std::string_view(name).substr(name.size() - ext.size()) == ext) {
        name.resize(name.size() - ext.size());
        cut = true;
      }
    }
  }
  return name;
}

// ns as an exact decimal number of microseconds: 1500 -> "1.5".
std::string micros(std::int64_t ns) {
  const bool negative = ns < 0;
  const std::uint64_t mag = negative ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  std::string out = fmt::format("{}{}", negative ? "-" : "", mag / 1000);
  if (mag % 1000 != 0) {
    std::string frac = fmt::format("{:03}", mag % 1000);
    while (frac.back() == '0') frac.pop_back();
    out += "." + frac;
  }
  return out;
}

class Converter {
 public:
  Converter(std::string path, const KinetoOptions& options, TopLevel top, Collected& c, MemoryCap& cap)
      : path_(std::move(path)),
        options_(options),
        top_(std::move(top)),
        c_(c),
        cap_(cap),
        nesting_(nest_ops(c)),
        memory_(pair_memory(path_, c, nesting_)) {}

  Trace run() {
    order_computes();
    gpu_durations();
    origin_ = find_origin();
    trace_.path = path_;
    emit_events();
    fill_header();
    return std::move(trace_);
  }

 private:
  struct Pending {
    enum class Kind : std::uint8_t { Iteration = 0, Memory = 1, Compute = 2 } kind;  // order at equal ts
    std::int64_t ts;
    std::uint64_t seq;
    std::uint32_t index;
  };

  // Top-level ops in order of their end (then start, then file position).
  void order_computes() {
    for (std::uint32_t i = 0; i < c_.ops.size(); ++i) {
      if (nesting_.root[i] == i) top_level_.push_back(i);
    }
    std::sort(top_level_.begin(), top_level_.end(), [&](std::uint32_t a, std::uint32_t b) {
      const OpRange &x = c_.ops[a], &y = c_.ops[b];
      return std::tie(x.end, x.begin, x.index) < std::tie(y.end, y.begin, y.index);
    });
  }

  void gpu_durations() {
    gpu_ns_.assign(c_.ops.size(), 0);
    for (std::size_t r = 0; r < c_.runtime.size(); ++r) {
      const std::uint32_t op = nesting_.runtime_root[r];
      if (op == kNone) continue;
      const auto it = c_.gpu_ns_by_correlation.find(c_.runtime[r].correlation);
      if (it == c_.gpu_ns_by_correlation.end()) continue;
      gpu_ns_[op] = add_ns(gpu_ns_[op], it->second);
      gpu_ns_attributed_ = add_ns(gpu_ns_attributed_, it->second);
      c_.gpu_ns_by_correlation.erase(it);  // each GPU activity counts once
    }
  }

  std::int64_t duration_of(std::uint32_t op) const {
    return c_.gpu_activities > 0 ? gpu_ns_[op] : c_.ops[op].end - c_.ops[op].begin;
  }

  // The earliest emitted time; every t is relative to it.
  std::int64_t find_origin() const {
    std::optional<std::int64_t> first, last;
    const auto see = [&](std::int64_t ts) {
      first = std::min(first.value_or(ts), ts);
      last = std::max(last.value_or(ts), ts);
    };
    for (const MemoryEvent& e : c_.memory) see(e.ts);
    for (const ProfilerStep& s : steps()) see(s.ts);
    for (const std::uint32_t op : top_level_) {
      see(c_.ops[op].begin);
      see(c_.ops[op].end);
    }
    if (!first) return 0;
    if (std::int64_t span = 0; __builtin_sub_overflow(*last, *first, &span)) {
      throw Error(fmt::format("{}: timestamps span more than 2^63 ns", path_));
    }
    return *first;
  }

  // ProfilerStep ranges by start (a step number seen twice counts once).
  std::vector<ProfilerStep> steps() const {
    std::vector<ProfilerStep> s = c_.steps;
    std::stable_sort(s.begin(), s.end(), [](const ProfilerStep& a, const ProfilerStep& b) {
      return std::tie(a.ts, a.number) < std::tie(b.ts, b.number);
    });
    std::vector<ProfilerStep> unique;
    std::set<std::uint64_t> seen;
    for (const ProfilerStep& step : s) {
      if (seen.insert(step.number).second) unique.push_back(step);
    }
    return unique;
  }

  // Names are copied from the op names into every tensor and op: their text is counted here.
  void hold_text(std::size_t size) {
    if (!cap_.add(memory_cost::text(size))) throw Error(fmt::format("{}: {}", path_, cap_.problem()));
  }

  std::uint32_t define_tensor(std::uint32_t record) {
    const TensorRecord& r = memory_.tensors[record];
    if (!r.residual && !r.before_profiling && r.innermost != kNone) {
      hold_text(c_.names[c_.ops[r.innermost].name].size() +
                (r.top_op != r.innermost ? 4 + c_.names[c_.ops[r.top_op].name].size() : 0));
    }
    TensorInfo t;
    const auto index = static_cast<std::uint32_t>(trace_.tensors.size());
    t.id = TensorId{index};
    t.file_id = index;
    t.size = Bytes{r.bytes};
    t.role = TensorRole::Other;
    if (r.residual) {
      t.name = "(live before profiling, never freed: from Total Allocated)";
    } else if (r.before_profiling) {
      t.name = "(allocated before profiling)";
    } else if (r.innermost != kNone) {
      // The innermost op names the tensor; the top-level op, when different, gives context.
      t.name = c_.names[c_.ops[r.innermost].name];
      if (r.top_op != r.innermost) t.name += " in " + c_.names[c_.ops[r.top_op].name];
    } else {
      t.name = "(outside ops)";
    }
    trace_.tensors.push_back(std::move(t));
    final_id_[record] = index;
    return index;
  }

  void push(TraceEvent e, std::int64_t ts) {
    e.time = SimTime{ts - origin_};
    trace_.events.push_back(e);
  }

  void emit_events() {
    const std::vector<ProfilerStep> step_list = steps();
    std::vector<Pending> pending;
    pending.reserve(step_list.size() + memory_.actions.size() + top_level_.size());
    for (std::uint32_t i = 0; i < step_list.size(); ++i)
      pending.push_back({Pending::Kind::Iteration, step_list[i].ts, i, i});
    for (std::uint32_t i = 0; i < memory_.actions.size(); ++i) {
      pending.push_back({Pending::Kind::Memory, memory_.actions[i].ts, i, i});
    }
    for (std::uint32_t i = 0; i < top_level_.size(); ++i) {
      pending.push_back({Pending::Kind::Compute, c_.ops[top_level_[i]].end, i, top_level_[i]});
    }
    std::sort(pending.begin(), pending.end(), [](const Pending& a, const Pending& b) {
      return std::tie(a.ts, a.kind, a.seq) < std::tie(b.ts, b.kind, b.seq);
    });

    // Tensors allocated inside each top-level op, in allocation order.
    std::vector<std::vector<std::uint32_t>> inside(c_.ops.size());
    for (std::uint32_t r = 0; r < memory_.tensors.size(); ++r) {
      if (memory_.tensors[r].top_op != kNone) inside[memory_.tensors[r].top_op].push_back(r);
    }
    enum class State : std::uint8_t { Never, Live, Freed };
    std::vector<State> state(memory_.tensors.size(), State::Never);
    final_id_.assign(memory_.tensors.size(), kNoIndex);

    for (const std::uint32_t r : memory_.initially_live) {
      push(TraceEvent::alloc(TensorId{define_tensor(r)}, 0, memory_.tensors[r].addr), origin_);
      state[r] = State::Live;
    }
    for (const Pending& p : pending) {
      switch (p.kind) {
        case Pending::Kind::Iteration: push(TraceEvent::iteration(p.index), p.ts); break;
        case Pending::Kind::Memory: {
          const MemoryAction& a = memory_.actions[p.index];
          if (a.kind == MemoryAction::Kind::Alloc) {
            push(TraceEvent::alloc(TensorId{define_tensor(a.tensor)}, 0, memory_.tensors[a.tensor].addr), p.ts);
            state[a.tensor] = State::Live;
          } else if (a.kind == MemoryAction::Kind::Free) {
            push(TraceEvent::free(TensorId{final_id_[a.tensor]}), p.ts);
            state[a.tensor] = State::Freed;
          } else {
            push(TraceEvent::mark(label("oom")), p.ts);
          }
          break;
        }
        case Pending::Kind::Compute: {
          OpInfo op;
          const auto index = static_cast<std::uint32_t>(trace_.ops.size());
          op.id = OpId{index};
          op.file_id = index;
          hold_text(c_.names[c_.ops[p.index].name].size());
          op.name = c_.names[c_.ops[p.index].name];
          op.duration = SimTime{duration_of(p.index)};
          for (const std::uint32_t r : inside[p.index]) {
            if (state[r] == State::Live) op.outputs.push_back(TensorId{final_id_[r]});
            if (state[r] == State::Freed) trace_.tensors[final_id_[r]].role = TensorRole::Workspace;
          }
          trace_.ops.push_back(std::move(op));
          push(TraceEvent::compute(OpId{index}), p.ts);
          break;
        }
      }
    }
    iterations_ = static_cast<std::uint32_t>(step_list.size());
    for (const ProfilerStep& s : step_list) step_numbers_.push_back(s.number);
  }

  std::uint32_t label(const std::string& text) {
    const auto it = std::find(trace_.labels.begin(), trace_.labels.end(), text);
    if (it != trace_.labels.end()) return static_cast<std::uint32_t>(it - trace_.labels.begin());
    trace_.labels.push_back(text);
    return static_cast<std::uint32_t>(trace_.labels.size() - 1);
  }

  json source() const {
    json s = json::object();
    s["tool"] = "kineto-import";
    s["file"] = path_;
    s["device"] = options_.device;
    const bool legacy = c_.legacy_categories > 0, current = c_.current_categories > 0;
    s["categories"] = legacy && current ? "mixed 2021 and 2023+"
                      : legacy          ? "2021 (Operator, Kernel, Runtime, Memcpy, Memset)"
                      : current ? "2023+ (cpu_op, user_annotation, kernel, cuda_runtime, gpu_memcpy, gpu_memset)"
                                : "none recognised";
    for (const auto& [from, to] : {std::pair{"schemaVersion", "schema_version"},
                                   {"traceName", "trace_name"},
                                   {"distributedInfo", "distributed_info"}}) {
      if (top_.fields.contains(from)) s[to] = top_.fields[from];
    }
    s["ts_origin_us"] = micros(origin_);
    const MemoryCounts& m = c_.memory_counts;
    s["memory_events"] = {{"device", m.selected},
                          {"cpu", m.cpu},
                          {"other_cuda_devices", m.other_cuda},
                          {"other_device_types", m.other_type},
                          {"zero_bytes", memory_.zero_byte_events}};
    switch (memory_.pairing) {
      case Pairing::None: s["memory_pairing"] = "none (no memory events for the device)"; break;
      case Pairing::Address: s["memory_pairing"] = "by address (args.Addr)"; break;
      case Pairing::InferredLifoPerSize:
        s["memory_pairing"] =
            "inferred (the trace has no Addr): a free of B bytes ends the most recent live allocation of exactly "
            "B bytes (LIFO per size); live bytes are exact, individual lifetimes are not";
        break;
    }
    s["allocations_outside_ops"] = memory_.allocations_outside_ops;
    s["freed_before_allocated"] = {{"tensors", memory_.freed_before_allocated},
                                   {"bytes", memory_.freed_before_allocated_bytes}};
    if (memory_.live_before_profiling) {
      s["live_before_profiling_bytes"] = *memory_.live_before_profiling;
      s["total_allocated_mismatches"] = memory_.total_allocated_mismatches;
      if (memory_.total_allocated_inconsistent) s["total_allocated_inconsistent"] = true;
    }
    if (memory_.peak_total_allocated) s["recorded_peak_allocated_bytes"] = *memory_.peak_total_allocated;
    if (memory_.peak_total_reserved) s["recorded_peak_reserved_bytes"] = *memory_.peak_total_reserved;
    s["ops"] = {{"cpu_ops", c_.ops.size()}, {"top_level", top_level_.size()}, {"annotations", c_.annotations}};
    s["op_duration"] = c_.gpu_activities > 0
                           ? "gpu: kernel, memcpy and memset time on the device, linked to the op's runtime calls "
                             "by correlation id"
                           : "cpu: the op's dur (the trace has no GPU activity)";
    s["gpu_time_ns"] = c_.gpu_ns_selected;
    s["gpu_time_outside_ops_ns"] = c_.gpu_ns_selected - gpu_ns_attributed_;
    s["profiler_steps"] = step_numbers_;
    if (!memory_.ooms.empty()) {
      json ooms = json::array();
      for (const MemoryEvent* e : memory_.ooms) {
        json o = {{"t_us", micros(e->ts - origin_)}, {"bytes", e->bytes}};
        if (e->total_allocated) o["total_allocated"] = *e->total_allocated;
        if (e->total_reserved) o["total_reserved"] = *e->total_reserved;
        ooms.push_back(std::move(o));
      }
      s["oom_events"] = std::move(ooms);
    }
    return s;
  }

  void fill_header() {
    TraceHeader& h = trace_.header;
    h.model = model_name(path_);
    h.time_unit = "us";
    h.iterations = std::max<std::uint32_t>(iterations_, 1);
    h.source = source();
    h.extra = json::object();
    h.extra["device"] = options_.device;
    const auto props = top_.fields.find("deviceProperties");
    if (props != top_.fields.end() && props->is_array()) {
      for (const json& d : *props) {
        if (!d.is_object() || !d.contains("id") || d["id"] != options_.device) continue;
        if (d.contains("name") && d["name"].is_string()) h.extra["device"] = d["name"];
        if (d.contains("totalGlobalMem") && d["totalGlobalMem"].is_number_integer()) {
          h.extra["device_total_memory"] = d["totalGlobalMem"];
        }
      }
    }
  }

  std::string path_;
  KinetoOptions options_;
  TopLevel top_;
  Collected& c_;
  MemoryCap& cap_;  // limits.max_memory
  Nesting nesting_;
  PairedMemory memory_;
  std::vector<std::uint32_t> top_level_;
  std::vector<std::int64_t> gpu_ns_;
  std::int64_t gpu_ns_attributed_ = 0;
  std::int64_t origin_ = 0;
  std::vector<std::uint32_t> final_id_;
  std::uint32_t iterations_ = 0;
  std::vector<std::uint64_t> step_numbers_;
  Trace trace_;
};

Trace convert(const std::string& path, const KinetoOptions& options, const Limits& limits) {
  if (options.device < 0)
    throw ConfigError("device", fmt::format("must be a CUDA device index >= 0 (got {})", options.device));
  Collector collector(path, options.device);
  MemoryCap memory(limits.max_memory);
  CollectedMemory kept(path, memory);
  TopLevel top = read_kineto_json(path, limits.max_input_bytes, memory, [&](RawEvent& e) {
    collector.add(e);
    kept.update(collector.result(), e.line);
  });
  Collected& c = collector.result();
  if (!c.devices_seen.empty() && c.devices_seen.count(options.device) == 0) {
    std::string seen;
    for (const std::int64_t d : c.devices_seen) seen += (seen.empty() ? "" : ", ") + std::to_string(d);
    throw Error(
        fmt::format("{}: device {} has no [memory] events or GPU activity in this trace (devices with events: {})",
                    path, options.device, seen));
  }
  if (!options.et.empty()) {
    Trace linked = et_detail::build_linked_trace(path, options, std::move(top), c, limits, memory);
    check_limits(linked, limits, path);
    return linked;
  }
  Trace t = Converter(path, options, std::move(top), c, memory).run();
  check_limits(t, limits, path);
  return t;
}

}  // namespace

Trace import_kineto(const std::string& path, const KinetoOptions& options, const Limits& limits) {
  try {
    return convert(path, options, limits);
  } catch (const std::bad_alloc&) {
    throw out_of_memory(path, limits.max_memory);
  }
}

// Its line in the registry (src/import/registry.cpp).
ImporterEntry kineto_importer_entry() {
  return {"kineto", "a Kineto / PyTorch profiler trace, with --et its Execution Trace (docs/import-kineto.md)",
          {"--device", "--et"}, {}, [](const std::string& input, const ImportOptions& o) {
            return import_kineto(input, KinetoOptions{o.device, o.et}, o.limits);
          }, nullptr};
}

}  // namespace coopsim
