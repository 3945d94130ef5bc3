// The residency checks on every bundled trace for keep and the policies that swap: autoswap, vdnn
// (all and conv), and the pooch and capuchin hybrids (the recompute policies are in
// remat_bundled_test.cpp), on every allocator at 30, 50, 70, 90 and 100 % of
// the trace's no-eviction peak, with engine.residency_checks on (the engine's own checks plus the
// independent auditor over the run's event log: every read finds its tensor resident with
// the right content version, swap-ins follow swap-outs, live blocks never overlap, the budget
// holds). Runs end completed, out of memory or thrashing; a completed run executed every op.
#include <catch2/catch.hpp>

#include "coopsim/sim/builtin.hpp"
#include "coopsim/sim/simulation.hpp"
#include "coopsim/formats/trace_file.hpp"
#include "bundled_traces.hpp"
#include "audited_run.hpp"

using namespace coopsim;

TEST_CASE("keep, swap and hybrid policies pass the residency checks on every bundled trace", "[swap][bundled]") {
  const auto traces = coopsim::test::bundled_traces();
  REQUIRE(traces.size() >= 10);
  const auto& c = builtin_components();
  const std::vector<int> percents = coopsim::test::bundled_percents({30, 50, 70, 90, 100});
  // Every registered policy but the recompute ones (remat_bundled_test.cpp), with its defaults,
  // plus vDNN's second variant: a policy added to the registry runs here from its first build.
  std::vector<std::pair<std::string, nlohmann::json>> policies;
  for (const auto& entry : c.policies.entries()) {
    if (entry.name == "coop" || entry.name == "dte" || entry.name == "dtr") continue;
    policies.emplace_back(entry.name, nlohmann::json::object());
  }
  policies.emplace_back("vdnn", nlohmann::json{{"variant", "conv"}});
  REQUIRE(policies.size() >= 6);
  // Under COOPSIM_SANITIZE=1 a fixed pseudo-random eighth (of the halved budgets).
  const coopsim::test::BundledShard shard(/*sanitizer_sample=*/8);
  std::uint64_t runs = 0, swap_runs = 0, completed = 0, swapped = 0, recomputed = 0;
  for (std::size_t t = 0; t < traces.size(); ++t) {
    const auto& path = traces[t];
    const Trace trace = load_trace(path.string());
    const TraceSummary summary = summarize(trace);
    for (std::size_t p = 0; p < policies.size(); ++p) {
      const auto& [policy, params] = policies[p];
      for (std::size_t a = 0; a < c.allocators.entries().size(); ++a) {
        const auto& alloc = c.allocators.entries()[a];
        for (std::size_t q = 0; q < percents.size(); ++q) {
          if (!shard.runs({t, p, a, q})) continue;
          const int percent = percents[q];
          const auto budget = summary.peak_live.value / 100 * static_cast<std::uint64_t>(percent);
          SimConfig cfg;
          cfg.doc = {{"allocator", alloc.name},
                     {"policy", policy},
                     {"budget", std::to_string(budget)},
                     {"engine", {{"residency_checks", true}}},
                     {"params", {{policy, params}}}};
          INFO(path.string() << " " << policy << " " << params.dump() << " on " << alloc.name << " at " << percent
                             << "%");
          Report r;
          REQUIRE_NOTHROW(r = test::audited_run(cfg, trace));
          ++runs;
          CHECK(r.memory.peak_reserved.value <= budget);
          if (policy != "keep") {
            ++swap_runs;
            if (r.time.swap_outs > 0) ++swapped;
            if (r.time.recomputes > 0) ++recomputed;
            if (r.status == RunStatus::Completed) ++completed;
          } else {
            CHECK(r.time.swap_outs == 0);
          }
          if (r.status == RunStatus::Completed) {
            CHECK(r.counters.computes == summary.computes);
            CHECK(r.counters.events == summary.events);
            CHECK(r.time.swap_ins <= r.time.swap_outs);
          } else {
            CHECK((r.oom.has_value() || r.thrash.has_value()));
          }
        }
      }
    }
  }
  if (shard.whole()) CHECK(runs == traces.size() * policies.size() * c.allocators.entries().size() * percents.size());
  CHECK(shard.most(completed, swap_runs));
  CHECK(shard.most(swapped, swap_runs));  // the policies do swap
  CHECK(recomputed > 0);           // and the hybrids recompute
}
