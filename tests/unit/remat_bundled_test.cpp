// The residency checks on every bundled trace: every recompute policy on every allocator at budgets
// of 30 % to 100 % of the trace's no-eviction peak, with engine.residency_checks on (resident tensors
// in disjoint blocks, the allocator holding their bytes, never more reserved than the budget;
// an op reading an absent tensor is always an error). Runs end completed, out of memory or
// thrashing; a completed run executed every op of the trace.
#include <catch2/catch.hpp>

#include "coopsim/sim/builtin.hpp"
#include "coopsim/sim/simulation.hpp"
#include "coopsim/formats/trace_file.hpp"
#include "bundled_traces.hpp"
#include "audited_run.hpp"

using namespace coopsim;

TEST_CASE("recompute policies pass the residency checks on every bundled trace", "[remat][bundled]") {
  const auto traces = coopsim::test::bundled_traces();
  REQUIRE(traces.size() >= 10);
  const auto& c = builtin_components();
  const std::vector<int> percents = coopsim::test::bundled_percents({30, 40, 50, 60, 70, 80, 90, 100});
  const std::vector<std::string> policies = {"coop", "dte", "dtr"};
  // Under COOPSIM_SANITIZE=1 a fixed pseudo-random eighth (of the halved budgets).
  const coopsim::test::BundledShard shard(/*sanitizer_sample=*/8);
  std::uint64_t runs = 0, completed = 0;
  for (std::size_t t = 0; t < traces.size(); ++t) {
    const auto& path = traces[t];
    const Trace trace = load_trace(path.string());
    const TraceSummary summary = summarize(trace);
    for (std::size_t p = 0; p < policies.size(); ++p) {
      const std::string& policy = policies[p];
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
                     {"engine", {{"residency_checks", true}}}};
          INFO(path.string() << " " << policy << " on " << alloc.name << " at " << percent << "%");
          Report r;
          REQUIRE_NOTHROW(r = test::audited_run(cfg, trace));
          ++runs;
          CHECK(r.memory.peak_reserved.value <= budget);
          if (r.status == RunStatus::Completed) {
            ++completed;
            CHECK(r.counters.computes == summary.computes);
            CHECK(r.counters.events == summary.events);
          } else {
            CHECK((r.oom.has_value() || r.thrash.has_value()));
          }
        }
      }
    }
  }
  // Every combination ran (unless the suite is split into shards); most of them complete.
  if (shard.whole()) CHECK(runs == traces.size() * policies.size() * c.allocators.entries().size() * percents.size());
  CHECK(shard.most(completed, runs));
}

// The eviction searches walk only the candidates (and, for coop and dte on bestfit and cnmem,
// the free ranges) with cached eq-class costs; engine.residency_checks cross-checks every search
// against the plain one over every resident value or range and recomputes every cached cost it
// hands out (throwing on a difference). Every heuristic, on an address-blind allocator and the
// three that give free ranges by address. Under COOPSIM_SANITIZE=1 a fixed pseudo-random eighth.
TEST_CASE("fast eviction searches agree with the plain ones on every bundled trace", "[remat][bundled][search]") {
  const auto traces = coopsim::test::bundled_traces();
  REQUIRE(traces.size() >= 10);
  const std::vector<std::string> allocs = {"fungible", "bestfit", "cnmem", "pytorch"};
  const std::vector<std::string> heuristics = {"dtr",  "dtr-eq", "dtr-local", "lru", "largest",
                                               "msps", "random", "dte",       "coop"};
  const coopsim::test::BundledShard shard(/*sanitizer_sample=*/8);
  std::uint64_t runs = 0, evicting = 0;
  for (std::size_t t = 0; t < traces.size(); ++t) {
    const auto& path = traces[t];
    const Trace trace = load_trace(path.string());
    const TraceSummary summary = summarize(trace);
    for (std::size_t a = 0; a < allocs.size(); ++a) {
      const std::string& alloc = allocs[a];
      for (std::size_t h = 0; h < heuristics.size(); ++h) {
        if (!shard.runs({t, a, h})) continue;
        const std::string& heuristic = heuristics[h];
        const bool is_policy = heuristic == "dte" || heuristic == "coop";
        const auto budget = summary.peak_live.value / 100 * 55;
        SimConfig cfg;
        cfg.doc = {{"allocator", alloc},
                   {"policy", is_policy ? heuristic : "dtr"},
                   {"budget", std::to_string(budget)},
                   {"engine", {{"residency_checks", true}}}};
        if (!is_policy) cfg.doc["params"]["dtr"] = {{"heuristic", heuristic}, {"seed", 7}};
        INFO(path.string() << " " << heuristic << " on " << alloc);
        Report r;
        REQUIRE_NOTHROW(r = test::audited_run(cfg, trace));
        ++runs;
        if (r.counters.forced_evictions > 0) ++evicting;
      }
    }
  }
  if (shard.whole()) CHECK(runs == traces.size() * allocs.size() * heuristics.size());
  CHECK(shard.most(evicting, runs));
}

// autoswap's and vdnn's fallback (the resident storage used furthest in the future) keeps its
// candidates in a heap fed by the trace's events; engine.residency_checks runs the plain pass over
// every tensor beside it at every failed allocation and throws when they choose differently. The
// first version lost a storage whose swap-in allocation was the one that failed (bundled traces
// at 40-60 %); these budgets make the fallback run on every trace.
TEST_CASE("the swap policies' fallback agrees with the plain search on every bundled trace",
          "[swap][bundled][search]") {
  const auto all = coopsim::test::bundled_traces();
  REQUIRE(all.size() >= 10);
  // Under COOPSIM_SANITIZE=1 only the first trace: the normal pass covers every one, and the
  // sanitizer pass of this suite is the longest step of CI.
  const std::size_t stride = coopsim::test::sanitize_pass() ? all.size() : 1;
  const std::vector<std::string> allocs = {"fungible", "bestfit", "pytorch"};
  const std::vector<std::string> policies = {"autoswap", "vdnn"};
  const std::vector<int> percents = {40, 60};
  const coopsim::test::BundledShard shard;
  std::uint64_t runs = 0, swapping = 0;
  for (std::size_t i = 0; i < all.size(); i += stride) {
    const Trace trace = load_trace(all[i].string());
    const TraceSummary summary = summarize(trace);
    for (std::size_t a = 0; a < allocs.size(); ++a) {
      const std::string& alloc = allocs[a];
      for (std::size_t p = 0; p < policies.size(); ++p) {
        const std::string& policy = policies[p];
        for (std::size_t q = 0; q < percents.size(); ++q) {
          if (!shard.runs({i, a, p, q})) continue;
          const int percent = percents[q];
          const auto budget = summary.peak_live.value / 100 * static_cast<std::uint64_t>(percent);
          SimConfig cfg;
          cfg.doc = {{"allocator", alloc},
                     {"policy", policy},
                     {"budget", std::to_string(budget)},
                     {"engine", {{"residency_checks", true}}}};
          INFO(all[i].string() << " " << policy << " on " << alloc << " at " << percent << "%");
          Report r;
          REQUIRE_NOTHROW(r = test::audited_run(cfg, trace));
          ++runs;
          if (r.counters.search_scanned > 0) ++swapping;
        }
      }
    }
  }
  CHECK(swapping > runs / 4);  // the fallback ran (it counts its scan) in a good share of the runs
}
