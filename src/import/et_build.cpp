// Kineto trace + Execution Trace -> coopsim trace v1 with dataflow (docs/import-kineto.md,
// "Dataflow from an Execution Trace"). The ET gives the ops and their tensors, the Kineto trace
// the durations (et_link.cpp links the two).
//  * Ops: the ET's top-level ops (op nodes with no op among their ancestors; nested ATen calls
//    are part of their top-level op), in start (id) order.
//  * Tensors: storage lifetimes on the selected device. The observer names a storage by its
//    data pointer (getObjectID(storage.data()) in pytorch/pytorch @018d5f29
//    torch/csrc/profiler/standalone/execution_trace_observer.cpp), so views share a storage
//    id, and a storage id reappearing as the output of an op that does not read it is a new
//    allocation at a reused address: the old lifetime ends at its last use before it.
//    Size: the largest (offset + numel) x element bytes seen in the lifetime (checked).
//  * In-place writes (mutated): inputs whose schema argument carries a '!' alias annotation
//    ("Tensor(a!) self", "Tensor(a!)[] self"); for a node without op_schema, an output that is
//    an input tensor itself. Any other output sharing an input's storage is a view or alias
//    (no storage of its own).
//  * Storages first seen as inputs exist before the trace: allocated at the start, never freed
//    (unless their address is reused); role parameter when some op writes them in place,
//    otherwise input. Storages created by an op are allocated just before it and freed right
//    after their last use (the ET records no deallocation).
//  * Structure: ProfilerStep#N ranges -> iterations; "## forward/backward/optimizer ##"
//    ranges, Optimizer.step# ranges and autograd::engine::evaluate_function ops -> marks and
//    roles (activation / gradient / other for storages created in each phase).
//  * Time: op durations from the linked Kineto op (GPU time of the kernels, memcpys and
//    memsets its runtime calls launched, nested calls included; its CPU dur when the trace has
//    no GPU activity); 0 for an unlinked op. Event times are the running sum of durations.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <unordered_map>

#include "coopsim/base/error.hpp"
#include "et_detail.hpp"

namespace coopsim::et_detail {
namespace {

using json = nlohmann::json;
using kineto_detail::Collected;

enum class Phase : std::uint8_t { None, Forward, Backward, Optimizer };
constexpr const char* kPhaseName[] = {"", "forward", "backward", "optimizer"};

struct Lifetime {
  std::uint64_t storage = 0;
  std::uint64_t bytes = 0;
  std::uint32_t born = kNone;      // op index that creates it; kNone = exists before the trace
  std::uint32_t last_use = kNone;  // op index
  bool reused = false;             // its address is reused later: it was freed
  bool written = false;            // mutated by some op
  Phase phase = Phase::None;       // phase of the creating op
  std::uint32_t trace_index = kNone;
};

struct OpPlan {
  std::uint32_t node = 0;
  std::vector<std::uint32_t> members;                   // the op node and its nested op nodes, in id order
  std::vector<std::uint32_t> inputs, outputs, mutated;  // lifetimes
  std::int64_t step = -1;                               // ProfilerStep range node id
  Phase phase = Phase::None;
  bool random = false;
};

bool is_random(const std::string& name) {
  for (const char* k : {"rand", "dropout", "bernoulli", "uniform_", "normal_", "multinomial", "exponential_",
                        "geometric_", "cauchy_", "log_normal_"}) {
    if (name.find(k) != std::string::npos) return true;
  }
  return false;
}

class Builder {
 public:
  Builder(const std::string& kineto_path, const KinetoOptions& options, const EtTrace& et, const Link& link,
          const Collected& c, MemoryCap& memory)
      : kineto_path_(kineto_path), options_(options), et_(et), link_(link), c_(c), memory_(memory) {}

  Trace run() {
    durations();
    plan_ops();
    plan_tensors();
    emit();
    return std::move(trace_);
  }

 private:
  [[noreturn]] void fail(const EtNode& n, const std::string& problem) const {
    throw InputError(options_.et, n.line, fmt::format("nodes[{}] (id {}): {}", n.index, n.id, problem));
  }

  // Per Kineto op: the GPU time launched inside it (nested ops included), or its CPU dur.
  void durations() {
    const kineto_detail::Nesting nest = kineto_detail::nest_ops(c_);
    op_ns_.assign(c_.ops.size(), 0);
    if (c_.gpu_activities == 0) {
      for (std::size_t k = 0; k < c_.ops.size(); ++k) op_ns_[k] = c_.ops[k].end - c_.ops[k].begin;
      return;
    }
    std::unordered_map<std::int64_t, std::int64_t> gpu = c_.gpu_ns_by_correlation;
    for (std::size_t r = 0; r < c_.runtime.size(); ++r) {
      const auto it = gpu.find(c_.runtime[r].correlation);
      if (it == gpu.end() || nest.runtime_innermost[r] == kNone) continue;
      for (std::uint32_t o = nest.runtime_innermost[r]; o != kNone; o = nest.parent[o]) {
        op_ns_[o] = kineto_detail::add_ns(op_ns_[o], it->second);
      }
      gpu.erase(it);  // each GPU activity counts once
    }
  }

  // Top-level ops with their step and phase, from the chain of enclosing nodes.
  void plan_ops() {
    std::unordered_map<std::int64_t, std::uint32_t> by_id;
    for (std::uint32_t i = 0; i < et_.nodes.size(); ++i) by_id.emplace(et_.nodes[i].id, i);
    std::vector<std::uint32_t> top(et_.nodes.size(), kNone);  // per op node: its top-level op's plan
    for (std::uint32_t i = 0; i < et_.nodes.size(); ++i) {
      const EtNode& n = et_.nodes[i];
      if (is_range(et_, n)) continue;
      OpPlan p;
      p.node = i;
      std::uint32_t op_ancestor = kNone;
      std::size_t hops = 0;
      for (std::int64_t up = n.parent; up >= 0;) {
        const auto it = by_id.find(up);
        if (it == by_id.end()) break;
        const EtNode& a = et_.nodes[it->second];
        if (++hops > et_.nodes.size()) fail(n, "its parent chain has a cycle");
        if (!is_range(et_, a)) {
          op_ancestor = it->second;
          break;
        }
        const std::string& name = et_.names[a.name];
        if (p.step < 0 && name.rfind("ProfilerStep#", 0) == 0) p.step = a.id;
        if (p.phase == Phase::None) {
          if (name == "## forward ##") p.phase = Phase::Forward;
          if (name == "## backward ##") p.phase = Phase::Backward;
          if (name == "## optimizer ##" || name.rfind("Optimizer.step#", 0) == 0) p.phase = Phase::Optimizer;
        }
        if (a.parent == a.id) break;  // the process node is its own parent
        up = a.parent;
      }
      if (op_ancestor != kNone) {
        if (op_ancestor == i) fail(n, "its parent chain has a cycle");
        if (op_ancestor > i || top[op_ancestor] == kNone) fail(n, "its parent op starts after it");
        top[i] = top[op_ancestor];
        plans_[top[i]].members.push_back(i);
        if (is_random(et_.names[n.name])) plans_[top[i]].random = true;
        continue;
      }
      const std::string& name = et_.names[n.name];
      if (p.phase == Phase::None && name.rfind("autograd::engine::evaluate_function", 0) == 0)
        p.phase = Phase::Backward;
      p.random = is_random(name);
      p.members.push_back(i);
      top[i] = static_cast<std::uint32_t>(plans_.size());
      plans_.push_back(std::move(p));
    }
    // Without any phase marker, ops outside backward and optimizer are the forward pass.
    const bool markers =
        std::any_of(plans_.begin(), plans_.end(), [](const OpPlan& p) { return p.phase == Phase::Forward; });
    if (!markers) {
      for (OpPlan& p : plans_) {
        if (p.phase == Phase::None) p.phase = Phase::Forward;
      }
    }
  }

  std::uint64_t tuple_bytes(const EtNode& n, const EtTensor& t) const {
    std::uint64_t elems = 0, bytes = 0;
    if (__builtin_add_overflow(t.offset, t.numel, &elems) || __builtin_mul_overflow(elems, t.elem_bytes, &bytes) ||
        bytes > (std::uint64_t{1} << 53)) {
      fail(n, fmt::format("tensor {} of storage {}: (offset {} + numel {}) x {} bytes is out of range", t.tensor_id,
                          t.storage_id, t.offset, t.numel, t.elem_bytes));
    }
    return bytes;
  }

  bool on_device(const EtTensor& t) const { return t.storage_id != 0 && et_.devices[t.device] == device_; }

  void use(std::uint32_t life, std::uint32_t op, std::uint64_t bytes) {
    lives_[life].last_use = op;
    lives_[life].bytes = std::max(lives_[life].bytes, bytes);
  }

  static void push_unique(std::vector<std::uint32_t>& v, std::uint32_t x) {
    if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
  }

  // The tensors of every node of an op (wrappers such as autograd::engine::evaluate_function
  // record none of their own; their nested calls do): storages that exist when the op starts
  // are its inputs, storages first written inside it its outputs (temporaries included).
  void plan_tensors() {
    device_ = fmt::format("cuda:{}", options_.device);
    std::unordered_map<std::uint64_t, std::uint32_t> current;  // storage id -> live lifetime
    for (std::uint32_t k = 0; k < plans_.size(); ++k) {
      for (const std::uint32_t member : plans_[k].members) plan_node(k, et_.nodes[member], current);
    }
  }

  void plan_node(std::uint32_t k, const EtNode& n, std::unordered_map<std::uint64_t, std::uint32_t>& current) {
    OpPlan& p = plans_[k];
    for (const EtTensor& t : n.inputs) {
      if (!on_device(t)) continue;
      auto [it, fresh] = current.try_emplace(t.storage_id, static_cast<std::uint32_t>(lives_.size()));
      if (fresh) lives_.push_back(Lifetime{t.storage_id});
      use(it->second, k, tuple_bytes(n, t));
      if (lives_[it->second].born != k) {
        push_unique(p.inputs, it->second);
        if (t.written) {
          push_unique(p.mutated, it->second);
          lives_[it->second].written = true;
        }
      }
    }
    for (const EtTensor& t : n.outputs) {
      if (!on_device(t)) continue;
      const auto it = current.find(t.storage_id);
      const bool read =
          it != current.end() && std::find(p.inputs.begin(), p.inputs.end(), it->second) != p.inputs.end();
      const bool made_here = it != current.end() && lives_[it->second].born == k;
      if (read || made_here) {
        // Without a schema, returning an input tensor itself is taken as an in-place write;
        // with one, only '!' arguments are written (aten::to returns self unchanged).
        const bool same_tensor = !n.has_schema && std::any_of(n.inputs.begin(), n.inputs.end(), [&](const EtTensor& x) {
          return x.tensor_id == t.tensor_id && x.storage_id == t.storage_id;
        });
        if (read && same_tensor) {
          push_unique(p.mutated, it->second);
          lives_[it->second].written = true;
        }
        use(it->second, k, tuple_bytes(n, t));
        continue;
      }
      if (it != current.end()) lives_[it->second].reused = true;  // address reused: a new storage
      const auto life = static_cast<std::uint32_t>(lives_.size());
      Lifetime l{t.storage_id};
      l.born = k;
      l.phase = p.phase;
      lives_.push_back(l);
      current[t.storage_id] = life;
      use(life, k, tuple_bytes(n, t));
      p.outputs.push_back(life);
    }
  }

  TensorRole role(const Lifetime& l) const {
    if (l.born == kNone) return l.written ? TensorRole::Parameter : TensorRole::Input;
    switch (l.phase) {
      case Phase::Backward: return TensorRole::Gradient;
      case Phase::Optimizer: return TensorRole::Other;
      default: return TensorRole::Activation;
    }
  }

  // limits.max_memory: names are copied into every op and tensor; their text is counted here.
  void hold_text(std::size_t size) {
    if (!memory_.add(memory_cost::text(size))) throw Error(fmt::format("{}: {}", options_.et, memory_.problem()));
  }

  std::uint32_t define(std::uint32_t life) {
    Lifetime& l = lives_[life];
    TensorInfo t;
    const auto index = static_cast<std::uint32_t>(trace_.tensors.size());
    t.id = TensorId{index};
    t.file_id = index;
    t.size = Bytes{l.bytes};
    t.role = role(l);
    t.name = l.born == kNone
                 ? fmt::format("storage {} (before the trace)", l.storage)
                 : fmt::format("storage {} ({})", l.storage, et_.names[et_.nodes[plans_[l.born].node].name]);
    hold_text(t.name.size());  // a copy of an op's name per tensor
    trace_.tensors.push_back(std::move(t));
    l.trace_index = index;
    return index;
  }

  void push(TraceEvent e) {
    e.time = SimTime{now_};
    trace_.events.push_back(e);
  }

  std::uint32_t label(const std::string& text) {
    const auto it = std::find(trace_.labels.begin(), trace_.labels.end(), text);
    if (it != trace_.labels.end()) return static_cast<std::uint32_t>(it - trace_.labels.begin());
    trace_.labels.push_back(text);
    return static_cast<std::uint32_t>(trace_.labels.size() - 1);
  }

  std::vector<TensorId> ids(const std::vector<std::uint32_t>& lives) const {
    std::vector<TensorId> out;
    for (const std::uint32_t l : lives) {
      if (lives_[l].bytes > 0) out.push_back(TensorId{lives_[l].trace_index});
    }
    return out;
  }

  void emit() {
    // Storages that exist before the trace, then the ops; zero-byte storages are left out.
    for (std::uint32_t l = 0; l < lives_.size(); ++l) {
      if (lives_[l].born == kNone && lives_[l].bytes > 0) push(TraceEvent::alloc(TensorId{define(l)}));
    }
    std::vector<std::vector<std::uint32_t>> frees(plans_.size());
    for (std::uint32_t l = 0; l < lives_.size(); ++l) {
      if ((lives_[l].born != kNone || lives_[l].reused) && lives_[l].bytes > 0) frees[lives_[l].last_use].push_back(l);
    }
    std::int64_t step = -1;
    Phase phase = Phase::None;
    for (std::uint32_t k = 0; k < plans_.size(); ++k) {
      const OpPlan& p = plans_[k];
      if (p.step >= 0 && p.step != step) {
        step = p.step;
        push(TraceEvent::iteration(iterations_++));
        phase = Phase::None;
      }
      if (p.phase != phase && p.phase != Phase::None)
        push(TraceEvent::mark(label(kPhaseName[static_cast<int>(p.phase)])));
      phase = p.phase;
      for (const std::uint32_t l : p.outputs) {
        if (lives_[l].bytes > 0) push(TraceEvent::alloc(TensorId{define(l)}));
      }
      const EtNode& n = et_.nodes[p.node];
      OpInfo op;
      op.id = OpId{k};
      op.file_id = k;
      hold_text(et_.names[n.name].size());
      op.name = et_.names[n.name];
      const std::uint32_t kop = link_.kineto[p.node];
      op.duration = SimTime{kop == kNone ? 0 : op_ns_[kop]};
      if (kop == kNone) ++unlinked_top_;
      op.inputs = ids(p.inputs);
      op.outputs = ids(p.outputs);
      op.mutated = ids(p.mutated);
      op.random = p.random;
      trace_.ops.push_back(std::move(op));
      push(TraceEvent::compute(OpId{k}));
      now_ = kineto_detail::add_ns(now_, op_ns_.empty() || kop == kNone ? 0 : op_ns_[kop]);
      for (const std::uint32_t l : frees[k]) push(TraceEvent::free(TensorId{lives_[l].trace_index}));
    }
    fill_header();
  }

  void fill_header() {
    TraceHeader& h = trace_.header;
    std::string model = std::filesystem::path(options_.et).filename().string();
    for (const char* ext : {".gz", ".json"}) {
      if (model.size() > std::string(ext).size() && model.ends_with(ext))
        model.resize(model.size() - std::string(ext).size());
    }
    h.model = model;
    h.time_unit = "us";
    h.iterations = std::max<std::uint32_t>(iterations_, 1);
    json s = json::object();
    s["tool"] = "kineto-import";
    s["file"] = kineto_path_;
    s["device"] = options_.device;
    s["execution_trace"] = {{"file", options_.et},
                            {"schema", et_.schema},
                            {"layout", et_.chakra_nodes > 0 ? "chakra (inputs {values, shapes, types}, attrs)"
                                                            : "1.0.1 (flat inputs / input_types)"},
                            {"nodes", et_.nodes.size()}};
    if (et_.pid) s["execution_trace"]["pid"] = *et_.pid;
    s["link"] = {{"method", link_.method},
                 {"et_ops", link_.et_ops},
                 {"linked", link_.linked},
                 {"name_mismatches", link_.name_mismatches},
                 {"missing", link_.unmatched},
                 {"tolerance_percent", kMismatchPercent},
                 {"top_level_ops_unlinked", unlinked_top_}};
    if (!link_.threads.empty()) s["link"]["threads"] = link_.threads;
    s["dataflow"] = "ET tensor tuples: one tensor per storage lifetime on " + device_ +
                    "; sizes (offset + numel) x element bytes; frees after last use";
    s["op_duration"] = c_.gpu_activities > 0 ? "gpu: kernel, memcpy and memset time launched by the linked Kineto op "
                                               "(nested ops included)"
                                             : "cpu: the linked Kineto op's dur (the trace has no GPU activity)";
    s["kineto_memory_events_ignored"] = c_.memory.size();
    h.source = std::move(s);
    h.extra = json::object();
    h.extra["device"] = options_.device;
  }

  const std::string& kineto_path_;
  const KinetoOptions& options_;
  const EtTrace& et_;
  const Link& link_;
  const Collected& c_;
  MemoryCap& memory_;  // limits.max_memory
  std::string device_;
  std::vector<std::int64_t> op_ns_;
  std::vector<OpPlan> plans_;
  std::vector<Lifetime> lives_;
  std::uint32_t iterations_ = 0;
  std::uint64_t unlinked_top_ = 0;
  std::int64_t now_ = 0;
  Trace trace_;
};

}  // namespace

Trace build_linked_trace(const std::string& kineto_path, const KinetoOptions& options, kineto_detail::TopLevel /*top*/,
                         Collected& c, const Limits& limits, MemoryCap& memory) {
  const EtTrace et = read_et(options.et, limits, memory);
  const Link link = link_traces(options.et, et, kineto_path, c);
  Trace t = Builder(kineto_path, options, et, link, c, memory).run();
  t.path = kineto_path;
  if (t.tensors.empty()) {
    std::string devices;
    for (const std::string& d : et.devices) devices += (devices.empty() ? "" : ", ") + (d.empty() ? "(none)" : d);
    throw Error(fmt::format("{}: no tensor of the Execution Trace is on cuda:{} (devices: {})", options.et,
                            options.device, devices.empty() ? "none" : devices));
  }
  return t;
}

}  // namespace coopsim::et_detail
