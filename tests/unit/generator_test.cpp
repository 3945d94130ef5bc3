// Synthetic training-step generator: validity (independent liveness checker), hand-computed
// expectations for tiny configurations, determinism, option validation and scale.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "coopsim/base/error.hpp"
#include "test_paths.hpp"
#include "coopsim/generate/generator.hpp"
#include "coopsim/base/params.hpp"
#include "coopsim/model/trace.hpp"
#include "coopsim/formats/trace_file.hpp"

using namespace coopsim;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace generator_test {

namespace {

struct Check {
  bool ok = true;
  std::string problem;  // first problem found
  std::uint64_t peak_live = 0;
  std::uint64_t persistent_bytes = 0;  // live at the first Iteration event
  std::uint64_t allocs = 0, frees = 0, computes = 0, accesses = 0, iterations = 0;
  std::map<std::string, std::uint64_t> marks;
  [[nodiscard]] std::uint64_t mark(const std::string& label) const {
    auto it = marks.find(label);
    return it == marks.end() ? 0 : it->second;
  }
};

// Replays the event stream the way the loader validates it: storage alloc'd once until freed,
// views never alloc'd / freed, every tensor of a compute (inputs, outputs, mutated) live,
// iterations numbered 0..N-1, and nothing but the prologue's tensors live at each iteration
// start and at the end.
Check check_trace(const Trace& tr) {
  Check c;
  std::vector<bool> live(tr.tensors.size(), false);
  std::uint64_t live_bytes = 0;
  std::set<std::uint32_t> baseline;
  bool have_baseline = false;
  auto fail = [&](std::size_t i, const std::string& what) {
    if (c.ok) c.problem = "event " + std::to_string(i) + ": " + what;
    c.ok = false;
  };
  auto live_set = [&] {
    std::set<std::uint32_t> s;
    for (std::uint32_t t = 0; t < live.size(); ++t) {
      if (live[t]) s.insert(t);
    }
    return s;
  };
  for (std::size_t t = 0; t < tr.tensors.size(); ++t) {
    const auto& ti = tr.tensors[t];
    if (index_of(ti.id) != t) fail(0, "tensor id is not its index");
    if (ti.is_view() && (index_of(ti.view_of) >= tr.tensors.size() || tr.tensor(ti.view_of).is_view())) {
      fail(0, "bad view base of " + ti.name);
    }
    if (ti.is_view() && ti.size.value != 0) fail(0, "view with own bytes " + ti.name);
  }
  for (const auto& op : tr.ops) {
    for (auto m : op.mutated) {
      if (std::find(op.inputs.begin(), op.inputs.end(), m) == op.inputs.end()) {
        fail(0, "mutated tensor not an input of " + op.name);
      }
    }
    if (op.duration.count() < 0) fail(0, "negative duration");
  }
  auto need_live = [&](std::size_t i, std::uint32_t t, const std::string& ctx) {
    const auto s = tr.storage_of(t);
    if (!live[s]) fail(i, ctx + ": " + tr.tensors[t].name + " not live");
  };
  for (std::size_t i = 0; i < tr.events.size(); ++i) {
    const auto& e = tr.events[i];
    if (e.timed()) fail(i, "timestamp recorded");
    switch (e.kind) {
      case EventKind::Alloc: {
        ++c.allocs;
        const std::uint32_t ti = index_of(e.tensor());
        const auto& t = tr.tensors.at(ti);
        if (t.is_view()) fail(i, "alloc of a view");
        if (live[ti]) fail(i, "double alloc of " + t.name);
        live[ti] = true;
        live_bytes += t.size.value;
        c.peak_live = std::max(c.peak_live, live_bytes);
        break;
      }
      case EventKind::Free: {
        ++c.frees;
        const std::uint32_t ti = index_of(e.tensor());
        const auto& t = tr.tensors.at(ti);
        if (t.is_view()) fail(i, "free of a view");
        if (!live[ti]) fail(i, "free of dead " + t.name);
        live[ti] = false;
        live_bytes -= t.size.value;
        break;
      }
      case EventKind::Access:
        ++c.accesses;
        need_live(i, index_of(e.tensor()), "access");
        break;
      case EventKind::Compute: {
        ++c.computes;
        const auto& op = tr.ops.at(index_of(e.compute_op()));
        for (auto t : op.inputs) need_live(i, index_of(t), op.name + " input");
        for (auto t : op.outputs) need_live(i, index_of(t), op.name + " output");
        break;
      }
      case EventKind::Iteration:
        if (e.iteration_index() != c.iterations) fail(i, "iteration index out of order");
        ++c.iterations;
        if (!have_baseline) {
          baseline = live_set();
          have_baseline = true;
          c.persistent_bytes = live_bytes;
        } else if (live_set() != baseline) {
          fail(i, "per-iteration tensors still live at iteration start");
        }
        break;
      case EventKind::Mark:
        if (e.label_index() >= tr.labels.size())
          fail(i, "bad label");
        else
          ++c.marks[tr.labels[e.label_index()]];
        break;
    }
  }
  if (live_set() != baseline) fail(tr.events.size(), "per-iteration tensors live at the end");
  if (c.iterations != tr.header.iterations) fail(tr.events.size(), "iteration count != header");
  return c;
}

GeneratorOptions tiny_mlp() {
  GeneratorOptions o;
  o.model = "mlp";
  o.layers = 2;
  o.batch = 4;
  o.width = 8;
  o.optimizer = "sgd";
  o.workspace = false;
  o.iterations = 2;
  return o;
}

std::size_t count_ops(const Trace& tr, const std::string& name) {
  return static_cast<std::size_t>(
      std::count_if(tr.ops.begin(), tr.ops.end(), [&](const OpInfo& op) { return op.name == name; }));
}

std::uint64_t role_bytes(const Trace& tr, TensorRole r) {
  std::uint64_t b = 0;
  for (const auto& t : tr.tensors) b += t.role == r ? t.size.value : 0;
  return b;
}

const TensorInfo* find_tensor(const Trace& tr, const std::string& name) {
  for (const auto& t : tr.tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

bool same_structure(const Trace& a, const Trace& b) {
  if (a.tensors.size() != b.tensors.size() || a.ops.size() != b.ops.size() || a.events.size() != b.events.size() ||
      a.labels != b.labels) {
    return false;
  }
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    const auto &x = a.tensors[i], &y = b.tensors[i];
    if (x.size != y.size || x.role != y.role || x.name != y.name || x.view_of != y.view_of) return false;
  }
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    const auto &x = a.ops[i], &y = b.ops[i];
    if (x.name != y.name || x.inputs != y.inputs || x.outputs != y.outputs || x.mutated != y.mutated ||
        x.random != y.random) {
      return false;
    }
  }
  for (std::size_t i = 0; i < a.events.size(); ++i) {
    if (!(a.events[i] == b.events[i])) return false;
  }
  return true;
}

std::string config_error_key(const GeneratorOptions& o) {
  try {
    (void)generate_training_trace(o);
  } catch (const ConfigError& e) {
    return e.key();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("tiny mlp matches the hand-computed construction", "[generator]") {
  const Trace tr = generate_training_trace(tiny_mlp());
  const Check c = check_trace(tr);
  INFO(c.problem);
  REQUIRE(c.ok);

  // input, labels; 6 params + 6 grads; per layer h + view (4); logits, loss, log_softmax,
  // logits.grad, head.in.grad (5); L2: relu.grad, in.grad; L1: relu.grad (3).
  CHECK(tr.tensors.size() == 26);
  CHECK(std::count_if(tr.tensors.begin(), tr.tensors.end(), [](const TensorInfo& t) { return t.is_view(); }) == 2);
  // W1, W2 8x8, b1, b2 8, head W 10x8, head b 10; fp32.
  CHECK(role_bytes(tr, TensorRole::Parameter) == 4 * (64 + 8 + 64 + 8 + 80 + 10));
  CHECK(role_bytes(tr, TensorRole::Parameter) == 936);
  CHECK(role_bytes(tr, TensorRole::OptimizerState) == 0);
  CHECK(c.persistent_bytes == 936);
  // Peak: right after L1's linear_backward_weight allocates L1.weight.grad: params 936 + input
  // 128 + L1.out 128 (h1) + L1.relu.grad 128 + all 6 grads 936 - ... worked out step by step:
  // fwd 160 (input+labels) +128 +128 +160 (logits) +4+160 (loss, lsm) -160 = 580;
  // bwd +160 -160-32 = 548; +40 +320 +128 -160 = 876; L2 +128 -256 = 748, +32 +256 +128 -128 =
  // 1036; L1 +128 -256 = 908, +32 +256 = 1196 (peak) -> total 936 + 1196.
  CHECK(c.peak_live == 936 + 1196);
  // 11 forward ops, 11 backward ops, 6 sgd steps.
  CHECK(tr.ops.size() == 28);
  CHECK(count_ops(tr, "sgd_step_") == 6);
  CHECK(count_ops(tr, "relu_") == 2);
  CHECK(count_ops(tr, "view") == 2);
  CHECK(count_ops(tr, "add_") == 0);  // residual_every 2 with 2 layers: no skip
  // Prologue 6 x (alloc + init access); 71 events per iteration.
  CHECK(tr.events.size() == 12 + 2 * 71);
  CHECK(c.allocs == 6 + 2 * 18);  // 12 per-iteration tensors + 6 grads
  CHECK(c.frees == 2 * 18);
  CHECK(c.computes == 2 * 28);
  CHECK(c.accesses == 6 + 2 * 3);
  CHECK(c.iterations == 2);
  CHECK(c.mark("forward") == 2);
  CHECK(c.mark("backward") == 2);
  CHECK(c.mark("optimizer") == 2);

  CHECK(tr.header.format == "coopsim-trace");
  CHECK(tr.header.version == 1);
  CHECK(tr.header.model == "synthetic-mlp-L2-B4");
  CHECK(tr.header.time_unit == "ns");
  CHECK(tr.header.iterations == 2);
  CHECK(tr.header.source["tool"] == "coopsim generate");
  CHECK(tr.header.source["options"]["layers"] == 2);
  CHECK(tr.header.source["options"]["optimizer"] == "sgd");
  for (std::size_t i = 0; i < tr.tensors.size(); ++i) CHECK(tr.tensors[i].file_id == i);
  for (std::size_t i = 0; i < tr.ops.size(); ++i) CHECK(tr.ops[i].file_id == i);
}

TEST_CASE("tiny mlp with workspaces: one per linear op, sized by its largest operand", "[generator]") {
  auto o = tiny_mlp();
  o.workspace = true;
  const Trace tr = generate_training_trace(o);
  const Check c = check_trace(tr);
  INFO(c.problem);
  REQUIRE(c.ok);
  // 3 forward linears + head (backward weight, input) + L2 (weight, input) + L1 (weight).
  CHECK(tr.tensors.size() == 26 + 8);
  const auto* ws = find_tensor(tr, "L1.linear_backward_weight.workspace");
  REQUIRE(ws != nullptr);
  CHECK(ws->role == TensorRole::Workspace);
  CHECK(ws->size.value == 256);  // max(L1.relu.grad 128, input 128, L1.weight.grad 256)
  const auto* head_ws = find_tensor(tr, "head.linear.workspace");
  REQUIRE(head_ws != nullptr);
  CHECK(head_ws->size.value == 320);  // head weight 10x8 fp32
  // Peak moves to L1's weight gradient op: 1196 + its 256-byte workspace.
  CHECK(c.peak_live == 936 + 1196 + 256);
  // Each workspace is allocated right before its op and freed right after it.
  for (std::size_t i = 0; i + 2 < tr.events.size(); ++i) {
    const auto& e = tr.events[i];
    if (e.kind != EventKind::Alloc || tr.tensor(e.tensor()).role != TensorRole::Workspace) continue;
    REQUIRE(tr.events[i + 1].kind == EventKind::Compute);
    const auto& op = tr.op(tr.events[i + 1].compute_op());
    CHECK(op.outputs.back() == e.tensor());
    bool freed_next = false;
    for (std::size_t j = i + 2; j < tr.events.size() && tr.events[j].kind == EventKind::Free; ++j) {
      freed_next = freed_next || tr.events[j].tensor() == e.tensor();
    }
    CHECK(freed_next);
  }
}

TEST_CASE("durations follow the documented roofline", "[generator]") {
  auto o = tiny_mlp();
  o.jitter = 0;
  o.peak_flops = 1e9;     // 1 FLOP/ns
  o.mem_bandwidth = 2e9;  // 2 bytes/ns
  o.launch_overhead = SimTime{5000};
  const Trace tr = generate_training_trace(o);
  // First op: L1 linear, 2*4*8*8 = 512 flops -> 512 ns; bytes 128 + 256 + 128 = 512 -> 256 ns.
  REQUIRE(tr.ops[0].name == "linear");
  CHECK(tr.ops[0].duration.count() == 512 + 5000);
  // bias_add_: 32 flops; bytes 128 (h) + 32 (bias) + 128 (h written back) -> 144 ns.
  REQUIRE(tr.ops[1].name == "bias_add_");
  CHECK(tr.ops[1].duration.count() == 144 + 5000);
  for (const auto& op : tr.ops) {
    if (op.name == "view")
      CHECK(op.duration.count() == 0);
    else
      CHECK(op.duration.count() >= 5000);
  }
  // Last op: sgd step on the head bias (10 elements): 20 flops -> 20 ns; bytes: param 40 +
  // grad 40 read, param 40 written -> 120 bytes -> 60 ns.
  const auto& last = tr.ops.back();
  REQUIRE(last.name == "sgd_step_");
  CHECK(last.duration.count() == 5000 + 60);
}

TEST_CASE("default cnn trace: roles, views, in-place and multi-output ops", "[generator]") {
  const GeneratorOptions o;
  const Trace tr = generate_training_trace(o);
  const Check c = check_trace(tr);
  INFO(c.problem);
  REQUIRE(c.ok);
  CHECK(tr.header.model == "synthetic-cnn-L8-B32");
  CHECK(c.iterations == 3);
  CHECK(c.mark("backward") == 3);

  std::set<TensorRole> roles;
  for (const auto& t : tr.tensors) roles.insert(t.role);
  for (auto r : {TensorRole::Parameter, TensorRole::Input, TensorRole::Activation, TensorRole::Gradient,
                 TensorRole::OptimizerState, TensorRole::Workspace, TensorRole::Other}) {
    CHECK(roles.count(r) == 1);
  }
  // Adam: two states per parameter.
  CHECK(role_bytes(tr, TensorRole::OptimizerState) == 2 * role_bytes(tr, TensorRole::Parameter));
  // Views: one per layer plus the head's flatten; never allocated.
  CHECK(std::count_if(tr.tensors.begin(), tr.tensors.end(), [](const TensorInfo& t) { return t.is_view(); }) == 9);
  // In place: relu_ per layer, residual add_ at layers 4, 6, 8 (+ their backward add_).
  CHECK(count_ops(tr, "relu_") == 8);
  CHECK(count_ops(tr, "add_") == 6);
  for (const auto& op : tr.ops) {
    if (op.name == "relu_" || op.name == "add_" || op.name == "adam_step_" || op.name == "batch_norm") {
      CHECK_FALSE(op.mutated.empty());
    }
    if (op.name == "adam_step_") CHECK(op.mutated.size() == 3);
    if (op.name == "batch_norm") CHECK(op.outputs.size() == 2);
    if (op.name == "batch_norm_backward") CHECK(op.outputs.size() == 3);
    if (op.name == "view" || op.name == "flatten") {
      REQUIRE(op.outputs.size() == 1);
      CHECK(tr.tensors[index_of(op.outputs[0])].view_of == op.inputs[0]);
      REQUIRE(op.views.size() == 1);
      CHECK(op.views[0] == std::make_pair(op.outputs[0], op.inputs[0]));
      CHECK(op.duration.count() == 0);
    }
  }
  // Parameters are allocated once, before iteration 0.
  std::size_t first_iter = 0;
  while (tr.events[first_iter].kind != EventKind::Iteration) ++first_iter;
  for (std::size_t i = 0; i < tr.events.size(); ++i) {
    const auto& e = tr.events[i];
    if (e.kind == EventKind::Alloc && tr.tensor(e.tensor()).role == TensorRole::Parameter) {
      CHECK(i < first_iter);
    }
  }
  // Each forward activation is freed after its last use within the backward pass, so live bytes
  // never exceed params + states + one iteration's worth of tensors.
  std::uint64_t all = 0;
  for (const auto& t : tr.tensors) all += t.size.value;
  INFO("default cnn: " << tr.tensors.size() << " tensors, " << tr.ops.size() << " ops, " << tr.events.size()
                       << " events, peak live " << c.peak_live << " bytes, persistent " << c.persistent_bytes);
  CHECK(c.peak_live < all);
  // Adam parameters + states (3 x 1,045,800 bytes) + BN running stats (8 x 512).
  CHECK(c.persistent_bytes == 3 * 1045800 + 8 * 512);
}

TEST_CASE("residual skip gradients are accumulated in place", "[generator]") {
  GeneratorOptions o;
  o.model = "mlp";
  o.layers = 6;
  o.residual_every = 1;  // layers 2..6 add their input
  o.workspace = false;
  const Trace tr = generate_training_trace(o);
  const Check c = check_trace(tr);
  INFO(c.problem);
  REQUIRE(c.ok);
  CHECK(count_ops(tr, "add_") == 10);
  // Backward add_ mutates an input gradient with a relu gradient.
  std::size_t backward_adds = 0;
  for (const auto& op : tr.ops) {
    if (op.name != "add_") continue;
    const auto& target = tr.tensors[index_of(op.mutated.at(0))];
    if (target.role == TensorRole::Gradient) {
      ++backward_adds;
      CHECK(tr.tensors[index_of(op.inputs.at(1))].name.find(".relu.grad") != std::string::npos);
    } else {
      CHECK(target.role == TensorRole::Activation);
    }
  }
  CHECK(backward_adds == 5);
}

TEST_CASE("micro-batches accumulate parameter gradients", "[generator]") {
  auto o = tiny_mlp();
  o.micro_batches = 3;
  const Trace tr = generate_training_trace(o);
  const Check c = check_trace(tr);
  INFO(c.problem);
  REQUIRE(c.ok);
  CHECK(c.mark("forward") == 6);
  CHECK(c.mark("backward") == 6);
  CHECK(c.mark("optimizer") == 2);
  CHECK(count_ops(tr, "accumulate_grad_") == 6);
  CHECK(find_tensor(tr, "head.weight.grad.partial") != nullptr);
  // Gradients stay live across the micro-batches: peak >= params + grads + one pass's peak.
  CHECK(c.peak_live >= 936 + 1196);
}

TEST_CASE("every option combination yields a valid trace", "[generator]") {
  for (const char* model : {"mlp", "cnn"}) {
    for (const char* opt : {"sgd", "momentum", "adam"}) {
      for (bool ws : {false, true}) {
        for (bool drop : {false, true}) {
          for (std::int64_t micro : {1, 2}) {
            for (std::int64_t k : {0, 1, 3}) {
              GeneratorOptions o;
              o.model = model;
              o.optimizer = opt;
              o.workspace = ws;
              o.dropout = drop;
              o.micro_batches = micro;
              o.residual_every = k;
              o.layers = 7;
              o.batch = 3;
              o.width = 5;
              o.spatial = 4;
              o.iterations = 2;
              const Trace tr = generate_training_trace(o);
              const Check c = check_trace(tr);
              INFO(model << " " << opt << " ws=" << ws << " dropout=" << drop << " micro=" << micro << " k=" << k
                         << ": " << c.problem);
              REQUIRE(c.ok);
              const int states = std::string(opt) == "sgd" ? 0 : std::string(opt) == "momentum" ? 1 : 2;
              CHECK(role_bytes(tr, TensorRole::OptimizerState) ==
                    static_cast<std::uint64_t>(states) * role_bytes(tr, TensorRole::Parameter));
              const bool has_random =
                  std::any_of(tr.ops.begin(), tr.ops.end(), [](const OpInfo& op) { return op.random; });
              CHECK(has_random == drop);
              CHECK(c.mark("backward") == static_cast<std::uint64_t>(2 * micro));
            }
          }
        }
      }
    }
  }
}

TEST_CASE("generation is deterministic; the seed only changes durations", "[generator]") {
  GeneratorOptions o;
  o.layers = 5;
  const Trace a = generate_training_trace(o);
  const Trace b = generate_training_trace(o);
  REQUIRE(same_structure(a, b));
  for (std::size_t i = 0; i < a.ops.size(); ++i) CHECK(a.ops[i].duration == b.ops[i].duration);
  CHECK(a.header.source == b.header.source);
  CHECK(a.header.model == b.header.model);

  o.seed = 2;
  const Trace c = generate_training_trace(o);
  REQUIRE(same_structure(a, c));
  std::size_t differ = 0;
  for (std::size_t i = 0; i < a.ops.size(); ++i) differ += a.ops[i].duration != c.ops[i].duration ? 1 : 0;
  CHECK(differ > a.ops.size() / 2);

  // Without jitter the seed is irrelevant.
  o.jitter = 0;
  const Trace d = generate_training_trace(o);
  o.seed = 7;
  const Trace e = generate_training_trace(o);
  for (std::size_t i = 0; i < d.ops.size(); ++i) CHECK(d.ops[i].duration == e.ops[i].duration);
}

TEST_CASE("param docs: defaults match GeneratorOptions{} and options round-trip", "[generator]") {
  const auto docs = generator_param_docs();
  CHECK(docs.size() == 18);
  CHECK(generator_options_from_json(nlohmann::json::object()) == GeneratorOptions{});
  // Every option in the header appears in the docs, and parsing it back gives the options.
  GeneratorOptions o;
  o.model = "mlp";
  o.layers = 3;
  o.optimizer = "momentum";
  o.workspace = false;
  o.seed = 99;
  o.launch_overhead = SimTime{2500};
  const auto j = generator_options_json(o);
  CHECK(j.size() == docs.size());
  for (const auto& d : docs) CHECK(j.contains(d.key));
  CHECK(generator_options_from_json(j) == o);
  const Trace tr = generate_training_trace(o);
  CHECK(generator_options_from_json(tr.header.source["options"]) == o);
  // Textual forms a CLI passes.
  const auto p = generator_options_from_json(
      {{"layers", "12"}, {"launch_overhead", "3us"}, {"workspace", "false"}, {"peak_flops", "1e12"}});
  CHECK(p.layers == 12);
  CHECK(p.launch_overhead == SimTime{3000});
  CHECK_FALSE(p.workspace);
  CHECK(p.peak_flops == 1e12);
}

TEST_CASE("invalid options throw ConfigError naming the option", "[generator]") {
  auto with = [](auto set) {
    GeneratorOptions o;
    set(o);
    return config_error_key(o);
  };
  CHECK(with([](GeneratorOptions& o) { o.model = "rnn"; }) == "generate.model");
  CHECK(with([](GeneratorOptions& o) { o.layers = 0; }) == "generate.layers");
  CHECK(with([](GeneratorOptions& o) { o.batch = 0; }) == "generate.batch");
  CHECK(with([](GeneratorOptions& o) { o.width = -3; }) == "generate.width");
  CHECK(with([](GeneratorOptions& o) { o.spatial = 0; }) == "generate.spatial");
  CHECK(with([](GeneratorOptions& o) { o.classes = 0; }) == "generate.classes");
  CHECK(with([](GeneratorOptions& o) { o.iterations = 0; }) == "generate.iterations");
  CHECK(with([](GeneratorOptions& o) { o.micro_batches = 0; }) == "generate.micro_batches");
  CHECK(with([](GeneratorOptions& o) { o.optimizer = "lamb"; }) == "generate.optimizer");
  CHECK(with([](GeneratorOptions& o) { o.residual_every = -1; }) == "generate.residual_every");
  CHECK(with([](GeneratorOptions& o) { o.dtype_bytes = 3; }) == "generate.dtype_bytes");
  CHECK(with([](GeneratorOptions& o) { o.seed = ~0ULL; }) == "generate.seed");
  CHECK(with([](GeneratorOptions& o) { o.peak_flops = 0; }) == "generate.peak_flops");
  CHECK(with([](GeneratorOptions& o) { o.mem_bandwidth = -1; }) == "generate.mem_bandwidth");
  CHECK(with([](GeneratorOptions& o) { o.launch_overhead = SimTime{-1}; }) == "generate.launch_overhead");
  CHECK(with([](GeneratorOptions& o) { o.jitter = 1.5; }) == "generate.jitter");
  CHECK(with([](GeneratorOptions& o) {
          o.batch = 1 << 24;
          o.width = 1 << 24;
        }) == "generate.batch");
  CHECK(with([](GeneratorOptions& o) {
          o.layers = 10000;
          o.iterations = 100000000;
        }) == "generate.iterations");
  CHECK(with([](GeneratorOptions& o) { o.layers = 1; }) == "(no error)");

  auto json_key = [](const nlohmann::json& j) {
    try {
      (void)generator_options_from_json(j);
    } catch (const ConfigError& e) {
      return e.key();
    }
    return std::string("(no error)");
  };
  CHECK(json_key({{"seed", -1}}) == "generate.seed");
  CHECK(json_key({{"layers", 0}}) == "generate.layers");
  CHECK(json_key({{"optimizer", "lamb"}}) == "generate.optimizer");
  CHECK(json_key({{"layer", 3}}) == "generate.layer");  // unknown key, from Params
  CHECK(json_key({{"layers", "many"}}) == "generate.layers");
}

TEST_CASE("a large configuration reaches a million events quickly", "[generator]") {
  GeneratorOptions o;
  o.layers = 200;
  o.iterations = 140;  // about 36.7 events per layer and iteration
  const auto t0 = std::chrono::steady_clock::now();
  const Trace tr = generate_training_trace(o);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO("cnn L200 x 140 iterations: " << tr.events.size() << " events, " << tr.tensors.size() << " tensors, "
                                     << tr.ops.size() << " ops in " << secs << " s");
  CHECK(tr.events.size() >= 1000000);
  CHECK(tr.header.iterations == 140);
  const Check c = check_trace(tr);
  INFO(c.problem);
  CHECK(c.ok);
  CHECK(secs < 5.0);  // generous: typically well under 0.1 s in debugoptimized builds
}

TEST_CASE("generated traces pass the loader and round-trip through write_trace", "[generator]") {
  const auto dir = test::scratch_dir("generator");
  std::vector<GeneratorOptions> configs(4);
  configs[1] = tiny_mlp();
  configs[2].model = "mlp";
  configs[2].dropout = true;
  configs[2].micro_batches = 2;
  configs[2].residual_every = 1;
  configs[3].optimizer = "momentum";
  configs[3].dropout = true;
  configs[3].micro_batches = 3;
  configs[3].layers = 5;
  int n = 0;
  for (const auto& o : configs) {
    const Trace tr = generate_training_trace(o);
    for (const char* ext : {".jsonl", ".jsonl.gz"}) {
      const std::string path = (dir / ("t" + std::to_string(n++) + ext)).string();
      write_trace(tr, path);
      const Trace back = load_trace(path);  // throws InputError on any liveness problem
      INFO(path);
      CHECK(back.header == tr.header);
      CHECK(back.tensors == tr.tensors);
      CHECK(back.ops == tr.ops);
      CHECK(back.events == tr.events);
      CHECK(back.labels == tr.labels);
      const TraceSummary s = summarize(back);
      const Check c = check_trace(tr);
      CHECK(s.peak_live.value == c.peak_live);
      CHECK(s.iterations == static_cast<std::uint64_t>(o.iterations));
      CHECK(s.allocs == c.allocs);
      CHECK(s.frees == c.frees);
      CHECK(s.computes == c.computes);
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace generator_test
