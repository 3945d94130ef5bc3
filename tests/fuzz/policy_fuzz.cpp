// libFuzzer harness: every policy x every allocator on small traces that the loader accepts but
// no generator writes. The input bytes drive a builder (below) that writes a trace in the file
// grammar of docs/trace-format.md: tensors of every role, ops with several inputs and outputs,
// an output that is also an input (self-reference), duplicate outputs, in-place mutation, views,
// an op computed again while its outputs are allocated, marks (backward, optimizer), accesses
// and frees, repeated over one to three iterations. The text goes through load_trace, so only
// traces the loader accepts are run.
//
// The first byte picks a configuration variant (kVariants: defaults, swap policies acting on
// small tensors, DTR's simrd profile, the dealloc/inplace modes, fallbacks on and off), the
// rest builds the trace. Each policy x allocator then runs at budgets around the trace's peak
// with the allocator invariants, the engine's residency checks and the independent auditor on.
// Oracle (issue 29): a run never throws but for a limit it names (limits.*); never breaks an
// invariant or the auditor; completed runs executed every compute and stayed within the
// budget; a stopped run names its OOM, thrash or limit point; the compute and recompute
// overheads are >= 1; peak reserved >= peak allocated.
#include <array>
#include <cstdlib>
#include <filesystem>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "coopsim/sim/simulation.hpp"
#include "fuzz_common.hpp"

namespace {

using namespace coopsim;

// One configuration per variant, applied to every run of an input.
const std::array<std::vector<std::string>, 10> kVariants{{
    {},
    {"autoswap.smallest_block=1", "pooch.smallest_block=1", "capuchin.smallest_block=1", "vdnn.fallback=true"},
    {"dtr.compat=simrd"},
    {"dtr.compat=simrd", "dtr.heuristic=dtr"},
    {"coop.inplace=copy-on-write", "dtr.inplace=recomputable", "dte.inplace=recomputable",
     "pooch.smallest_block=1", "pooch.inplace=recomputable"},
    {"coop.dealloc=banish", "dtr.dealloc=banish", "dte.dealloc=no-dealloc", "capuchin.smallest_block=1",
     "capuchin.dealloc=banish"},
    {"coop.layout_aware_eviction=false", "coop.partition=cost-density", "dtr.heuristic=lru",
     "autoswap.fallback=false", "pooch.fallback=false", "capuchin.fallback=false"},
    {"coop.ablation=no recomputable in-place", "dtr.heuristic=msps", "dte.dealloc=banish",
     "autoswap.smallest_block=1", "autoswap.score=doa"},
    {"coop.dealloc=no-dealloc", "dtr.dealloc=no-dealloc", "dtr.heuristic=dtr-local", "pytorch.expandable_segments=true",
     "pooch.smallest_block=1", "pooch.dealloc=no-dealloc"},
    {"dtr.compat=simrd", "dtr.heuristic=msps", "coop.op_guided_allocation=false", "smartpool.match=index",
     "cnmem.initial_reservation=4096"},
}};

constexpr std::array<double, 4> kBudgetPercents{55.0, 80.0, 100.0, 130.0};
constexpr std::size_t kMaxSteps = 48;

// Reads the input a byte at a time; an exhausted input reads as zeros.
class Bytes_ {
 public:
  Bytes_(const std::uint8_t* d, std::size_t n) : d_(d), n_(n) {}
  unsigned next(unsigned mod) { return i_ < n_ ? d_[i_++] % mod : 0; }
  [[nodiscard]] bool done() const { return i_ >= n_; }

 private:
  const std::uint8_t* d_;
  std::size_t n_, i_ = 0;
};

constexpr std::array<const char*, 6> kRoles{"activation", "parameter", "input", "gradient", "optimizer_state", "other"};
constexpr std::array<const char*, 4> kLabels{"forward", "backward", "optimizer", "snapshot"};

struct Builder {
  struct TensorDef {
    std::uint64_t bytes = 0;
    std::string role;
    bool persistent = false;
    bool ever_allocated = false;
    int view_of = -1;  // the root, once a view
    bool is_root_of_view = false;
  };
  std::vector<TensorDef> tensors;
  std::vector<nlohmann::json> ops;
  std::vector<nlohmann::json> body;  // one iteration's events
  std::vector<bool> live;

  int root(int t) const { return tensors[t].view_of >= 0 ? tensors[t].view_of : t; }
  bool usable(int t) const { return live[root(t)]; }

  void alloc(int t) {
    body.push_back({{"kind", "alloc"}, {"tensor", t}});
    live[t] = true;
    tensors[t].ever_allocated = true;
  }

  // A tensor to write: any non-persistent tensor; an unallocated storage owner is allocated first.
  int pick_output(Bytes_& in) {
    const int t = static_cast<int>(in.next(static_cast<unsigned>(tensors.size())));
    if (tensors[t].persistent) return -1;
    if (!usable(t)) {
      if (tensors[t].view_of >= 0) return -1;
      alloc(t);
    }
    return t;
  }

  int pick_live(Bytes_& in) {
    const int t = static_cast<int>(in.next(static_cast<unsigned>(tensors.size())));
    return usable(t) ? t : -1;
  }

  void new_op(Bytes_& in) {
    nlohmann::json inputs = nlohmann::json::array(), outputs = nlohmann::json::array();
    nlohmann::json views = nlohmann::json::array(), mutates = nlohmann::json::array();
    const unsigned n_in = in.next(4), n_out = 1 + in.next(2);
    for (unsigned k = 0; k < n_in; ++k) {
      if (const int t = pick_live(in); t >= 0) inputs.push_back(t);
    }
    for (unsigned k = 0; k < n_out; ++k) {
      if (const int t = pick_output(in); t >= 0) outputs.push_back(t);
    }
    const unsigned shape = in.next(8);
    if (shape == 1 && !inputs.empty()) outputs.push_back(inputs[0]);            // self-reference
    if (shape == 2 && !outputs.empty()) outputs.push_back(outputs[0]);          // duplicate output
    if (shape == 3 && !inputs.empty()) mutates.push_back(inputs.back());        // in-place
    if (shape == 4 && !inputs.empty()) {                                        // a view of an input
      const int i = inputs[0].get<int>();
      const int o = static_cast<int>(in.next(static_cast<unsigned>(tensors.size())));
      TensorDef& v = tensors[o];
      if (o != root(i) && !v.ever_allocated && !v.persistent && !v.is_root_of_view && v.view_of < 0) {
        v.view_of = root(i);
        tensors[root(i)].is_root_of_view = true;
        outputs.push_back(o);
        views.push_back({o, i});
      }
    }
    if (outputs.empty() && inputs.empty()) return;
    nlohmann::json op{{"kind", "op"},         {"id", ops.size()},   {"name", "op" + std::to_string(ops.size())},
                      {"duration", in.next(4) == 0 ? 0u : 1 + in.next(250) * 40},
                      {"inputs", inputs},     {"outputs", outputs}};
    if (!views.empty()) op["views"] = views;
    if (!mutates.empty()) op["mutates"] = mutates;
    if (shape == 5) op["random"] = true;
    body.push_back({{"kind", "compute"}, {"op", ops.size()}});
    ops.push_back(std::move(op));
  }

  // An earlier op computed again, when everything it touches is allocated.
  void again(Bytes_& in) {
    if (ops.empty()) return;
    const auto& op = ops[in.next(static_cast<unsigned>(ops.size()))];
    for (const auto* key : {"inputs", "outputs"}) {
      for (const auto& t : op[key]) {
        if (!usable(t.get<int>())) return;
      }
    }
    body.push_back({{"kind", "compute"}, {"op", op["id"]}});
  }

  void step(Bytes_& in) {
    switch (in.next(10)) {
      case 0: case 1: case 2: case 3: new_op(in); break;
      case 4: again(in); break;
      case 5: case 6: {
        const int t = pick_live(in);
        if (t >= 0 && tensors[t].view_of < 0 && !tensors[t].persistent) {
          body.push_back({{"kind", "free"}, {"tensor", t}});
          live[t] = false;
        }
        break;
      }
      case 7: body.push_back({{"kind", "mark"}, {"label", kLabels[in.next(kLabels.size())]}}); break;
      case 8: {
        const int t = pick_live(in);
        if (t >= 0 && !ops.empty()) {
          body.push_back({{"kind", "access"}, {"tensor", t}, {"mode", in.next(2) ? "write" : "read"},
                          {"op", in.next(static_cast<unsigned>(ops.size()))}});
        }
        break;
      }
      default: {
        const int t = static_cast<int>(in.next(static_cast<unsigned>(tensors.size())));
        if (!live[t] && tensors[t].view_of < 0 && !tensors[t].persistent) alloc(t);
      }
    }
  }

  std::string build(Bytes_& in) {
    const unsigned n = 2 + in.next(10);
    for (unsigned t = 0; t < n; ++t) {
      TensorDef d;
      d.role = kRoles[in.next(kRoles.size())];
      d.persistent = d.role == std::string("parameter") || d.role == std::string("input");
      d.bytes = in.next(3) == 0 ? 1 + in.next(200) * 37 : (1 + in.next(32)) * 512;
      tensors.push_back(d);
    }
    const unsigned iterations = 1 + in.next(3);
    live.assign(n, false);
    std::vector<nlohmann::json> prologue;
    for (unsigned t = 0; t < n; ++t) {
      if (tensors[t].persistent) {
        prologue.push_back({{"kind", "alloc"}, {"tensor", t}});
        live[t] = true;
        tensors[t].ever_allocated = true;
      }
    }
    for (std::size_t s = 0; s < kMaxSteps && !in.done(); ++s) step(in);
    // End of an iteration: free what the body left allocated, so the next starts alike.
    for (unsigned t = 0; t < n; ++t) {
      if (live[t] && !tensors[t].persistent) body.push_back({{"kind", "free"}, {"tensor", t}});
    }
    std::string text = nlohmann::json{{"format", "coopsim-trace"}, {"version", 1}, {"iterations", iterations}}.dump() + "\n";
    for (unsigned t = 0; t < n; ++t) {
      text += nlohmann::json{{"kind", "tensor"}, {"id", t}, {"bytes", tensors[t].bytes}, {"role", tensors[t].role}}.dump() + "\n";
    }
    for (const auto& op : ops) text += op.dump() + "\n";
    for (const auto& e : prologue) text += e.dump() + "\n";
    for (unsigned i = 0; i < iterations; ++i) {
      text += nlohmann::json{{"kind", "iteration"}, {"index", i}}.dump() + "\n";
      for (const auto& e : body) text += e.dump() + "\n";
    }
    return text;
  }
};

void run_one(const SimConfig& base, const Trace& trace, const TraceSummary& summary, const std::string& allocator,
             const std::string& policy, double percent) {
  SimConfig cfg = base;
  cfg.doc["allocator"] = allocator;
  cfg.doc["policy"] = policy;
  Bytes budget;
  try {
    budget = percent_of_peak(percent, summary.peak_live, "budgets");
  } catch (const ConfigError& e) {
    fuzz::check_message(e);  // below one byte
    return;
  }
  cfg.doc["budget"] = std::to_string(budget.value);
  cfg.doc["engine"]["paranoid"] = true;
  cfg.doc["engine"]["residency_checks"] = true;
  cfg.doc["engine"]["allow_no_dataflow"] = true;
  const std::string what = policy + " on " + allocator + " at " + std::to_string(percent) + "%";
  Report r;
  try {
    r = run_simulation(cfg, trace);
  } catch (const InvariantError& e) {
    fuzz::die("broken invariant, " + what, e.what());
  } catch (const ConfigError& e) {
    fuzz::check_message(e);  // a variant that does not apply to this trace
    return;
  } catch (const Error& e) {
    fuzz::check_message(e);  // a limit the run reached, or a trace the policy refuses
    const std::string_view m = e.what();
    fuzz::require(m.find("limits.") != std::string_view::npos || m.find("refuse") != std::string_view::npos,
                  "run failed, " + what, m);
    return;
  } catch (const std::exception& e) {
    fuzz::die("internal error, " + what, e.what());
  }
  fuzz::require(r.memory.peak_reserved >= r.memory.peak_allocated, "peak reserved below peak allocated", what);
  fuzz::require(r.time.compute_overhead >= 1.0 - 1e-12, "compute overhead below 1", what);
  fuzz::require(r.time.recompute_overhead >= 1.0 - 1e-12, "recompute overhead below 1", what);
  if (r.status == RunStatus::Completed) {
    fuzz::require(r.memory.peak_reserved <= budget, "completed above the budget", what);
    fuzz::require(r.counters.computes == summary.computes, "completed without every compute", what);
  } else {
    fuzz::require(r.oom.has_value() || r.thrash.has_value() || r.infeasible.has_value() || r.limit.has_value(),
                  "stopped without an OOM or thrash point", what);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  Bytes_ in(data, size);
  const auto& variant = kVariants[in.next(kVariants.size())];
  Builder builder;
  const std::string text = builder.build(in);
  const std::string path = fuzz::temp_path("policy.jsonl");
  fuzz::write_temp("policy.jsonl", reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
  if (const char* dump = std::getenv("COOPSIM_FUZZ_DUMP")) {  // to re-run a finding with the CLI
    fuzz::write_temp("policy.jsonl", reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
    std::filesystem::copy_file(path, dump, std::filesystem::copy_options::overwrite_existing);
    for (const auto& o : variant) std::fprintf(stderr, "variant: --set %s\n", o.c_str());
  }
  Trace trace;
  try {
    trace = load_trace(path, fuzz::fuzz_limits());
  } catch (const Error& e) {
    fuzz::die("the builder wrote a trace the loader refuses", e.what());
  }
  const TraceSummary summary = summarize(trace);
  if (summary.peak_live.value == 0) return 0;
  SimConfig base;
  for (const auto& o : variant) apply_override(base, o);
  const Components& c = builtin_components();
  for (const auto& p : c.policies.entries()) {
    for (const auto& a : c.allocators.entries()) {
      for (const double pct : kBudgetPercents) run_one(base, trace, summary, a.name, p.name, pct);
    }
  }
  return 0;
}
