// `coopsim bench TRACE`: parse rate and simulation rate (the `replay` rows) per allocator x policy
// (keep by default), on one core.
// Wall-clock figures: for scripts/bench.sh, never for tests.
#include <fmt/format.h>

#include <chrono>
#include <optional>
#include <ostream>

#include "coopsim/cli/commands.hpp"
#include "coopsim/base/error.hpp"
#include "coopsim/sim/simulation.hpp"
#include "coopsim/formats/trace_file.hpp"

namespace coopsim {

int command_bench(const BenchArgs& args, std::ostream& out) {
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };

  // The budget's spelling is checked before the trace is read.
  BudgetText budget_text;
  if (!args.budget.empty()) {
    budget_text = parse_budget(args.budget, BudgetHint::Percent);
    if (!budget_text.problem.empty()) throw ConfigError("--budget", budget_text.problem);
  }

  double best_parse = 1e300;
  Trace trace;
  for (int i = 0; i < args.repeat; ++i) {
    const auto t0 = Clock::now();
    trace = load_trace(args.trace);
    best_parse = std::min(best_parse, seconds(Clock::now() - t0));
  }
  const TraceSummary s = summarize(trace);
  // Lines = header + definitions + events.
  const double lines = 1.0 + static_cast<double>(s.tensors + s.ops + s.events);
  out << fmt::format("trace,{},events,{},lines,{}\n", args.trace, s.events, static_cast<std::uint64_t>(lines));
  out << fmt::format("parse,lines_per_s,{:.0f},seconds,{:.4f}\n", lines / best_parse, best_parse);

  std::vector<std::string> allocators = args.allocators;
  if (allocators.empty()) {
    for (const auto& e : builtin_components().allocators.entries()) allocators.push_back(e.name);
  }
  std::vector<std::string> policies = args.policies;
  if (policies.empty()) policies.push_back(top_level_params(nlohmann::json::object()).get_string("policy"));
  // "N%" budgets are of the trace's no-eviction peak of live bytes, as in `coopsim run`.
  std::optional<std::uint64_t> budget;
  if (!args.budget.empty()) {
    budget = budget_text.percent ? percent_of_peak(*budget_text.percent, s.peak_live, "--budget").value
                                 : budget_text.bytes->value;
  }
  for (const auto& p : policies) {
    for (const auto& a : allocators) {
      SimConfig doc;
      doc.doc["allocator"] = a;
      doc.doc["policy"] = p;
      if (budget) doc.doc["budget"] = *budget;
      const CheckedConfig cfg = check_config(doc);
      RunOptions options;
      options.audit = args.audit_every_run;
      double best = 1e300;
      Report r;
      for (int i = 0; i < args.repeat; ++i) {
        const auto t0 = Clock::now();
        r = run_simulation(cfg, trace, options);
        best = std::min(best, seconds(Clock::now() - t0));
      }
      out << fmt::format("replay,{},{},events_per_s,{:.0f},seconds,{:.4f},status,{}\n", a, p,
                         static_cast<double>(r.counters.events) / best, best, to_string(r.status));
    }
  }
  return 0;
}

}  // namespace coopsim
