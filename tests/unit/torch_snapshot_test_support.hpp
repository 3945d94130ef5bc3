// Hand-built PyTorch memory snapshots (the dict torch.cuda.memory._snapshot() returns) as
// pickle::Value trees, for the torch-snapshot importer's tests.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "coopsim/alloc/pytorch.hpp"
#include "coopsim/engine/engine.hpp"
#include "coopsim/formats/pickle.hpp"
#include "coopsim/import/torch_snapshot.hpp"
#include "coopsim/policy/keep.hpp"

namespace snapshot_test {

using coopsim::pickle::Value;
using coopsim::pickle::ValuePtr;
using Kind = Value::Kind;

inline constexpr std::uint64_t MiB = 1ULL << 20;
inline constexpr std::uint64_t GiB = 1ULL << 30;

inline ValuePtr make(Kind k) {
  auto v = std::make_shared<Value>();
  v->kind = k;
  return v;
}
inline ValuePtr I(std::int64_t x) {
  auto v = std::make_shared<Value>();
  v->kind = Kind::Int;
  v->integer = x;
  return v;
}
inline ValuePtr U(std::uint64_t x) { return I(static_cast<std::int64_t>(x)); }
inline ValuePtr S(std::string s) {
  auto v = std::make_shared<Value>();
  v->kind = Kind::String;
  v->text = std::move(s);
  return v;
}
inline ValuePtr B(bool b) {
  auto v = std::make_shared<Value>();
  v->kind = Kind::Bool;
  v->boolean = b;
  return v;
}
inline ValuePtr F(double d) {
  auto v = std::make_shared<Value>();
  v->kind = Kind::Float;
  v->real = d;
  return v;
}
inline ValuePtr L(std::vector<ValuePtr> items) {
  auto v = std::make_shared<Value>();
  v->kind = Kind::List;
  v->items = std::move(items);
  return v;
}
inline ValuePtr T(std::vector<ValuePtr> items) {
  auto v = std::make_shared<Value>();
  v->kind = Kind::Tuple;
  v->items = std::move(items);
  return v;
}
using Fields = std::vector<std::pair<std::string, ValuePtr>>;
inline ValuePtr D(const Fields& fields) {
  auto v = std::make_shared<Value>();
  v->kind = Kind::Dict;
  for (const auto& [k, x] : fields) v->entries.emplace_back(S(k), x);
  return v;
}
inline ValuePtr frame(std::string name, std::string file = "??", std::int64_t line = 0) {
  return D({{"name", S(std::move(name))}, {"filename", S(std::move(file))}, {"line", I(line)}});
}

// A snapshot under construction: segments, one trace per device, annotations, settings.
struct Snap {
  std::vector<ValuePtr> segments;
  std::vector<std::vector<ValuePtr>> traces{{}};
  std::vector<ValuePtr> annotations;
  ValuePtr settings = default_settings();
  bool with_time = true;        // time_us on every entry (newer files)
  std::int64_t t0 = 1'000'000;  // time_us of entry i is t0 + 10 i
  bool with_requested = true;   // blocks carry requested_size (torch >= 2.1)

  static ValuePtr default_settings() {
    Fields div;
    for (int i = 0; i < 16; ++i) div.emplace_back(std::to_string(1 << i), I(0));
    return D({{"PYTORCH_CUDA_ALLOC_CONF", S("")},
              {"max_split_size", I(-1)},
              {"garbage_collection_threshold", F(0.0)},
              {"expandable_segments", B(false)},
              {"roundup_power2_divisions", D(div)}});
  }

  struct Blk {
    std::uint64_t size;
    std::uint64_t requested;  // 0 = inactive
    std::string state = "";   // default: active_allocated when requested > 0, else inactive
    ValuePtr frames = nullptr;
  };
  Snap& segment(std::uint64_t addr, std::uint64_t stream, const std::string& type, const std::vector<Blk>& blocks,
                int device = 0, bool expandable = false) {
    std::vector<ValuePtr> bl;
    std::uint64_t at = addr, total = 0;
    for (const Blk& b : blocks) {
      const std::string state = !b.state.empty() ? b.state : b.requested > 0 ? "active_allocated" : "inactive";
      Fields f{{"address", U(at)}, {"size", U(b.size)}, {"state", S(state)}, {"frames", b.frames ? b.frames : L({})}};
      if (with_requested) f.emplace_back("requested_size", U(b.requested));
      bl.push_back(D(f));
      at += b.size;
      total += b.size;
    }
    segments.push_back(D({{"device", I(device)},
                          {"address", U(addr)},
                          {"total_size", U(total)},
                          {"stream", U(stream)},
                          {"segment_type", S(type)},
                          {"segment_pool_id", T({I(0), I(0)})},
                          {"is_expandable", B(expandable)},
                          {"frames", L({})},
                          {"blocks", L(bl)}}));
    return *this;
  }
  Snap& entry(const std::string& action, std::uint64_t addr, std::uint64_t size, std::uint64_t stream = 0,
              ValuePtr frames = nullptr, int device = 0, Fields extra = {}) {
    while (traces.size() <= static_cast<std::size_t>(device)) traces.emplace_back();
    auto& tr = traces[static_cast<std::size_t>(device)];
    Fields f{{"action", S(action)}};
    if (action != "oom") f.emplace_back("addr", U(addr));
    f.emplace_back("size", U(size));
    f.emplace_back("stream", U(stream));
    if (with_time) f.emplace_back("time_us", I(t0 + 10 * static_cast<std::int64_t>(tr.size())));
    f.emplace_back("frames", frames ? frames : L({}));
    for (auto& x : extra) f.push_back(std::move(x));
    tr.push_back(D(f));
    return *this;
  }
  // free_requested + free_completed, as a single-stream program records them.
  Snap& free(std::uint64_t addr, std::uint64_t size, std::uint64_t stream = 0) {
    entry("free_requested", addr, size, stream);
    return entry("free_completed", addr, size, stream);
  }
  Snap& annotation(const std::string& stage, const std::string& name, std::int64_t time_us, int device = 0) {
    annotations.push_back(D({{"stage", S(stage)}, {"name", S(name)}, {"device", I(device)}, {"time_us", I(time_us)}}));
    return *this;
  }
  [[nodiscard]] ValuePtr build() const {
    std::vector<ValuePtr> tr;
    for (const auto& t : traces) tr.push_back(L(t));
    Fields top{{"segments", L(segments)}, {"device_traces", L(tr)}};
    if (settings) top.emplace_back("allocator_settings", settings);
    if (with_time) top.emplace_back("external_annotations", L(annotations));
    return D(top);
  }
};

// A replay of an imported snapshot: keep policy, the recorded allocator settings, paranoid
// invariant checks after every event; the model's end state and stats.
struct Replay {
  coopsim::Report report;
  std::vector<coopsim::SeedSegment> end;
  coopsim::AllocatorStats stats;
};

inline Replay replay(const coopsim::Trace& t, coopsim::Bytes budget = coopsim::Bytes{80 * GiB}) {
  using namespace coopsim;
  PyTorchCachingAllocator alloc(
      budget, torch_snapshot::allocator_options(t.header.extra.value("allocator_settings", nlohmann::json())));
  KeepPolicy keep;
  EngineOptions opt;
  opt.budget = budget;
  opt.paranoid = true;
  Replay r;
  run_engine(t, alloc, keep, opt, r.report);
  r.end = *alloc.snapshot();
  r.stats = alloc.stats();
  return r;
}

}  // namespace snapshot_test
