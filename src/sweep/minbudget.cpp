// Minimum-budget search (`coopsim minbudget`, and "minbudget" in sweeps; docs/sweep.md):
// bisection over multiples of a precision unit for the smallest budget whose run completes
// (and stays within a compute-overhead limit). It assumes that completion is monotone in the
// budget, which address-aware allocators do not guarantee; the bracket it observed is reported.
#include <fmt/format.h>

#include <ostream>

#include "coopsim/base/schema_version.hpp"
#include "coopsim/base/error.hpp"
#include "coopsim/sweep/sweep.hpp"
#include "coopsim/formats/trace_file.hpp"

namespace coopsim {
namespace sweep {
namespace {

constexpr std::uint64_t kMiB = 1ULL << 20;
constexpr std::uint64_t kLargestBudget = 1ULL << 50;  // 1 PiB: the upper bound stops growing here
constexpr int kMaxGrowth = 24;

}  // namespace

MinBudgetResult find_min_budget(const CheckedConfig& cfg, const Trace& trace, const MinBudgetOptions& o) {
  MinBudgetResult res;
  res.peak = summarize(trace).peak_live;
  res.unit = Bytes{kMiB * std::max<std::uint64_t>(1, res.peak.value / 1000 / kMiB)};
  const std::uint64_t unit = res.unit.value;
  Report last;
  auto passes = [&](std::uint64_t k) {
    CheckedConfig c = cfg;
    c.set_budget(Bytes{k * unit});
    RunOptions options;
    options.audit = o.audit;
    last = run_simulation(c, trace, options);
    ++res.runs;
    res.searched_up_to = std::max(res.searched_up_to, Bytes{k * unit});
    if (last.status != RunStatus::Completed) return false;
    return !o.max_overhead || last.time.compute_overhead <= *o.max_overhead;
  };
  auto fail_status = [&] {
    return last.status == RunStatus::Completed ? std::string("overhead") : std::string(to_string(last.status));
  };
  auto record_pass = [&](std::uint64_t k) {
    res.budget = Bytes{k * unit};
    res.compute_overhead = last.time.compute_overhead;
    res.recompute_overhead = last.time.recompute_overhead;
  };

  // Upper bound: the peak times the margin, doubled until a run passes.
  std::uint64_t lo = o.fails_at.value / unit;  // taken to fail (failing stays 0 until a probe fails)
  std::uint64_t hi = std::max<std::uint64_t>(
      lo + 1,
      static_cast<std::uint64_t>(static_cast<double>(res.peak.value) * o.margin / static_cast<double>(unit)) + 1);
  for (int growth = 0; !passes(hi); ++growth) {
    lo = hi;
    res.failing = Bytes{lo * unit};
    res.failing_status = fail_status();
    if (growth == kMaxGrowth || hi * unit > kLargestBudget / 2) return res;
    hi *= 2;
  }
  res.found = true;
  record_pass(hi);
  while (hi - lo > 1) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (passes(mid)) {
      hi = mid;
      record_pass(hi);
    } else {
      lo = mid;
      res.failing = Bytes{lo * unit};
      res.failing_status = fail_status();
    }
  }
  return res;
}

std::string minbudget_csv_header() {
  return "search,trace,allocator,policy,variant,max_overhead,trace_peak_live_bytes,status,min_budget_bytes,"
         "ratio_of_peak,compute_overhead,recompute_overhead,failing_budget_bytes,failing_status,precision_bytes,"
         "searched_up_to_bytes,runs";
}

std::string minbudget_csv_row(const SweepConfig& cfg, const GridSearch& s, const MinBudgetResult& r) {
  const double ratio =
      r.peak.value == 0 ? 0.0 : static_cast<double>(r.budget.value) / static_cast<double>(r.peak.value);
  return fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}", s.index, cfg.traces.at(s.trace), s.allocator,
                     s.policy, cfg.variants.at(s.variant).name,
                     cfg.minbudget.max_overhead ? fmt::format("{}", *cfg.minbudget.max_overhead) : std::string(),
                     r.peak.value, r.found ? "found" : "none", r.found ? std::to_string(r.budget.value) : std::string(),
                     r.found ? fmt::format("{:.6f}", ratio) : std::string(),
                     r.found ? fmt::format("{:.6f}", r.compute_overhead) : std::string(),
                     r.found ? fmt::format("{:.6f}", r.recompute_overhead) : std::string(), r.failing.value,
                     r.failing_status, r.unit.value, r.searched_up_to.value, r.runs);
}

}  // namespace sweep

int command_minbudget(const MinBudgetArgs& args, std::ostream& out) {
  SimConfig cfg;
  if (!args.config.empty()) cfg = load_config(args.config);
  for (const auto& s : args.sets) apply_override(cfg, s);
  if (!args.policy.empty()) cfg.doc["policy"] = args.policy;
  if (!args.allocator.empty()) cfg.doc["allocator"] = args.allocator;
  cfg.doc["budget"] = "1GiB";  // any valid size for check_config; the search sets the budget of each run
  const CheckedConfig checked = check_config(cfg);
  sweep::MinBudgetOptions opt;
  opt.audit = args.audit_every_run;
  if (args.max_overhead) {
    if (!(*args.max_overhead >= 1.0)) {
      throw ConfigError("--max-overhead",
                        fmt::format("expected a compute overhead of at least 1, got {}", *args.max_overhead));
    }
    opt.max_overhead = args.max_overhead;
  }
  const Trace trace = load_trace(args.trace, config_limits(cfg));  // limits.max_memory and the caps, as run's
  const sweep::MinBudgetResult r = sweep::find_min_budget(checked, trace, opt);
  const double ratio =
      r.peak.value == 0 ? 0.0 : static_cast<double>(r.budget.value) / static_cast<double>(r.peak.value);
  const Params top = top_level_params(cfg.doc);
  const std::string allocator = top.get_string("allocator");
  const std::string policy = top.get_string("policy");
  if (args.json) {
    nlohmann::ordered_json j;
    j["schema_version"] = schema_version::kMinBudget;
    j["trace"] = args.trace;
    j["allocator"] = allocator;
    j["policy"] = policy;
    j["max_overhead"] = opt.max_overhead ? nlohmann::ordered_json(*opt.max_overhead) : nlohmann::ordered_json(nullptr);
    j["peak_live_bytes"] = r.peak.value;
    j["found"] = r.found;
    j["min_budget_bytes"] = r.found ? nlohmann::ordered_json(r.budget.value) : nlohmann::ordered_json(nullptr);
    j["ratio_of_peak"] = r.found ? nlohmann::ordered_json(ratio) : nlohmann::ordered_json(nullptr);
    j["compute_overhead"] = r.found ? nlohmann::ordered_json(r.compute_overhead) : nlohmann::ordered_json(nullptr);
    j["recompute_overhead"] = r.found ? nlohmann::ordered_json(r.recompute_overhead) : nlohmann::ordered_json(nullptr);
    j["failing_budget_bytes"] = r.failing.value;
    j["failing_status"] = r.failing_status;
    j["precision_bytes"] = r.unit.value;
    j["searched_up_to_bytes"] = r.searched_up_to.value;
    j["runs"] = r.runs;
    out << j.dump(2) << "\n";
    return r.found ? 0 : 3;
  }
  out << fmt::format("{}: allocator {}, policy {}; peak live bytes {} ({} bytes)\n", args.trace, allocator, policy,
                     format_bytes(r.peak), r.peak.value);
  if (!r.found) {
    out << fmt::format("no budget up to {} completes{} (last: {}); {} runs\n", format_bytes(r.searched_up_to),
                       opt.max_overhead ? fmt::format(" within compute overhead {}", *opt.max_overhead) : "",
                       r.failing_status, r.runs);
    return 3;
  }
  out << fmt::format("minimum budget{}: {} ({} bytes), {:.3f} of the peak; compute overhead {:.3f}\n",
                     opt.max_overhead ? fmt::format(" within compute overhead {}", *opt.max_overhead) : "",
                     format_bytes(r.budget), r.budget.value, ratio, r.compute_overhead);
  if (r.failing.value == 0) {
    out << fmt::format("bracket: {} (one precision step) passes; precision {}; {} runs\n", format_bytes(r.budget),
                       format_bytes(r.unit), r.runs);
  } else {
    out << fmt::format("bracket: {} ({} bytes) fails ({}), {} passes; precision {}; {} runs\n", format_bytes(r.failing),
                       r.failing.value, r.failing_status, format_bytes(r.budget), format_bytes(r.unit), r.runs);
  }
  return 0;
}

}  // namespace coopsim
