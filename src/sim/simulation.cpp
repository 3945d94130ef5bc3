// run_simulation: resolve the config through the registries, run the engine; a ReportBuilder makes
// the report (this file gives it the run's identity and the end-state check).
#include "coopsim/sim/simulation.hpp"

#include <optional>

#include "coopsim/engine/engine.hpp"
#include "coopsim/engine/report_builder.hpp"
#include "coopsim/base/error.hpp"
#include "coopsim/import/torch_snapshot.hpp"
#include "coopsim/base/limits.hpp"
#include "coopsim/model/link.hpp"
#include "coopsim/model/trace.hpp"
#include "coopsim/audit/audit.hpp"

namespace coopsim {

namespace {

// Policies that evict, swap or recompute decide from which tensors ops read. A trace whose ops
// read nothing (allocator-only snapshots, profiler traces without an execution trace) would let
// them evict for free and report a plausible but meaningless overhead: refuse instead.
void require_dataflow(const Trace& trace, const std::string& policy) {
  std::size_t reads = 0;
  for (const OpInfo& op : trace.ops) reads += op.inputs.size();
  for (const TraceEvent& e : trace.events) reads += e.kind == EventKind::Access ? 1 : 0;
  if (reads > 0) return;
  const std::string what =
      trace.ops.empty() ? "it has no ops" : "none of its " + std::to_string(trace.ops.size()) + " ops reads a tensor";
  throw ConfigError("policy", trace.path + ": policy " + policy + " needs the trace's dataflow, but " + what +
                                  " and no event accesses one (an allocator-only snapshot, or a profiler trace "
                                  "imported without --et): evictions would cost nothing. Use -p keep, or force "
                                  "it with --set engine.allow_no_dataflow=true");
}

// The config's "link" section, with the preset the trace names when the config names none: a trace
// recorded for a device profile carries that device's host link (source.durations.link, written
// by the recorder: a100 pcie4-x16, h100 pcie5-x16, h200 h200). The config's own fields still
// override it. `from_trace` says whether the trace's preset was taken.
nlohmann::json link_section(const nlohmann::json& doc, const Trace& trace, bool& from_trace) {
  nlohmann::json link = doc.value("link", nlohmann::json::object());
  from_trace = false;
  if (!link.is_object() || link.contains("preset") || !trace.header.source.is_object()) return link;
  const auto durations = trace.header.source.find("durations");
  if (durations == trace.header.source.end() || !durations->is_object()) return link;
  const auto named = durations->find("link");
  if (named == durations->end()) return link;
  std::string known;
  for (const LinkPreset& p : link_presets()) {
    if (named->is_string() && named->get<std::string>() == p.name) {
      link["preset"] = p.name;
      from_trace = true;
      return link;
    }
    known += (known.empty() ? "" : ", ") + p.name;
  }
  throw ConfigError("link.preset", trace.path + ": header source.durations.link names " + named->dump() +
                                       ", not a link preset (" + known + "); choose one with --set link.preset=NAME");
}

}  // namespace

Report run_simulation(const SimConfig& cfg, const Trace& trace, const Components& c, const RunOptions& options) {
  return run_simulation(check_config(cfg, c), trace, options);
}

Report run_simulation(const CheckedConfig& checked, const Trace& recorded_trace, const RunOptions& options) {
  const SimConfig& cfg = checked.config();
  const Components& c = checked.components();
  const nlohmann::json& d = cfg.doc;
  const Params top = top_level_params(d);
  const std::string initial_state = top.get_string("initial_state");
  std::optional<Trace> emptied;
  if (initial_state == "empty") emptied = simulated_from_empty(recorded_trace);
  const Trace& trace = emptied ? *emptied : recorded_trace;
  const std::string alloc_name = top.get_string("allocator");
  const std::string policy_name = top.get_string("policy");
  const Bytes budget = top.get_bytes("budget");
  const nlohmann::json params = d.value("params", nlohmann::json::object());
  auto params_for = [&](const std::string& name) {
    return params.contains(name) ? params.at(name) : nlohmann::json::object();
  };
  const auto& alloc_entry = c.allocators.get(alloc_name, "allocator", "allocator");
  const auto& policy_entry = c.policies.get(policy_name, "policy", "policy");
  const Params alloc_params(alloc_name, params_for(alloc_name), alloc_entry.params);
  const Params policy_params(policy_name, params_for(policy_name), policy_entry.params);
  bool link_from_trace = false;
  const Params link_params("link", link_section(d, trace, link_from_trace), link_param_docs());
  const Params engine_params("engine", d.value("engine", nlohmann::json::object()), engine_param_docs());

  EngineOptions opt;
  opt.budget = budget;
  opt.link = make_link(link_params);
  opt.paranoid = engine_params.get_bool("paranoid");
  opt.residency_checks = engine_params.get_bool("residency_checks") || opt.paranoid;
  opt.measure_search_latency = engine_params.get_bool("measure_search_latency");
  opt.log = options.log;
  opt.max_recompute_depth = config_limits(cfg).max_recompute_depth;
  opt.max_search_steps = config_limits(cfg).max_search_steps;

  auto allocator = alloc_entry.make(alloc_params, budget);
  auto policy = policy_entry.make(policy_params);
  if (policy->needs_dataflow() && !engine_params.get_bool("allow_no_dataflow")) {
    require_dataflow(trace, policy_name);
  }

  nlohmann::ordered_json resolved;
  resolved["allocator"] = alloc_name;
  resolved["policy"] = policy_name;
  resolved["budget"] = budget.value;
  // Only where it matters or was asked for, so reports of traces without a recorded state keep
  // their bytes.
  if (top.is_set("initial_state") || !recorded_trace.initial_segments.empty()) {
    resolved["initial_state"] = initial_state;
  }
  resolved["link"] = link_params.resolved();
  resolved["link"]["resolved_name"] = opt.link.name;
  if (link_from_trace) resolved["link"]["preset_from"] = "trace";
  resolved["engine"] = engine_params.resolved();
  resolved["params"][alloc_name] = alloc_params.resolved();
  resolved["params"][policy_name] = policy_params.resolved();
  ReportBuilder report;
  report.identify(trace, alloc_name, policy_name, budget, std::move(resolved));

  // Residency checks include the independent auditor over the run's event log. options.audit
  // runs the auditor alone (not the engine's per-step checks, which are quadratic on long
  // traces): the CLI sets it from COOPSIM_AUDIT=1, which the test suites set, so every test
  // that runs a simulation is validated. Reports do not change.
  const bool audit = opt.residency_checks || options.audit;
  RunLog own_log;
  if (audit && opt.log == nullptr) opt.log = &own_log;
  try {
    run_engine(trace, *allocator, *policy, opt, report);
  } catch (const InvariantError& e) {  // a rule of the engine broken: say under what
    throw InvariantError("policy " + policy_name + " on allocator " + alloc_name + ": " + e.what());
  }
  if (audit) {
    const AuditResult v = audit_runlog(trace, *opt.log);
    if (!v.ok()) {
      throw InvariantError(trace.path + ": plan check: " + std::to_string(v.violation_count) +
                           " violation(s) in the run's event log; first: " + v.violations.front());
    }
  }
  if (report.status() == RunStatus::Completed) {
    const auto recorded = torch_snapshot::final_segments(trace);
    const auto model = allocator->snapshot();
    if (recorded && model) {
      report.end_state(torch_snapshot::compare_end_state(*recorded, *model));
    }
  }
  return std::move(report).take();
}

}  // namespace coopsim
