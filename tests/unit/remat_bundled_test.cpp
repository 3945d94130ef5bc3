// The plan checks on every bundled trace: every recompute policy on every allocator at budgets
// of 30 % to 100 % of the trace's no-eviction peak, with engine.plan_checks on (resident tensors
// in disjoint blocks, the allocator holding their bytes, never more reserved than the budget;
// an op reading an absent tensor is always an error). Runs end completed, out of memory or
// thrashing; a completed run executed every op of the trace.
#include <catch2/catch.hpp>

#include "coopsim/sim/builtin.hpp"
#include "coopsim/sim/simulation.hpp"
#include "coopsim/formats/trace_file.hpp"
#include "bundled_traces.hpp"
#include "validated_run.hpp"

using namespace coopsim;

TEST_CASE("recompute policies pass the plan checks on every bundled trace", "[remat][bundled]") {
  const auto traces = coopsim::test::bundled_traces();
  REQUIRE(traces.size() >= 10);
  const auto& c = builtin_components();
  const std::vector<int> percents = coopsim::test::bundled_percents({30, 40, 50, 60, 70, 80, 90, 100});
  std::uint64_t runs = 0, completed = 0;
  for (const auto& path : traces) {
    const Trace trace = load_trace(path.string());
    const TraceSummary summary = summarize(trace);
    for (const std::string policy : {"coop", "dte", "dtr"}) {
      for (const auto& alloc : c.allocators.entries()) {
        for (const int percent : percents) {
          const auto budget = summary.peak_live.value / 100 * static_cast<std::uint64_t>(percent);
          SimConfig cfg;
          cfg.doc = {{"allocator", alloc.name},
                     {"policy", policy},
                     {"budget", std::to_string(budget)},
                     {"engine", {{"plan_checks", true}}}};
          INFO(path.string() << " " << policy << " on " << alloc.name << " at " << percent << "%");
          Report r;
          REQUIRE_NOTHROW(r = test::validated_run(cfg, trace));
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
  // Every combination ran; at 100 % of the peak most of them complete.
  CHECK(runs == traces.size() * 3 * c.allocators.entries().size() * percents.size());
  CHECK(completed > runs / 2);
}

// The eviction searches walk only the candidates (and, for coop and dte on bestfit and cnmem,
// the free ranges) with cached eq-class costs; engine.plan_checks cross-checks every search
// against the plain one over every resident value or range and recomputes every cached cost it
// hands out (throwing on a difference). Every heuristic, on an address-blind allocator and the
// three that give free ranges by address. Under COOPSIM_SANITIZE=1 every fourth trace.
TEST_CASE("fast eviction searches agree with the plain ones on every bundled trace", "[remat][bundled][search]") {
  const auto all = coopsim::test::bundled_traces();
  REQUIRE(all.size() >= 10);
  const std::size_t stride = coopsim::test::bundled_percents({1, 2}).size() == 2 ? 1 : 4;
  std::vector<std::filesystem::path> traces;
  for (std::size_t i = 0; i < all.size(); i += stride) traces.push_back(all[i]);
  std::uint64_t runs = 0, evicting = 0;
  for (const auto& path : traces) {
    const Trace trace = load_trace(path.string());
    const TraceSummary summary = summarize(trace);
    for (const std::string alloc : {"fungible", "bestfit", "cnmem", "pytorch"}) {
      for (const std::string heuristic :
           {"dtr", "dtr-eq", "dtr-local", "lru", "largest", "msps", "random", "dte", "coop"}) {
        const bool is_policy = heuristic == "dte" || heuristic == "coop";
        const auto budget = summary.peak_live.value / 100 * 55;
        SimConfig cfg;
        cfg.doc = {{"allocator", alloc},
                   {"policy", is_policy ? heuristic : "dtr"},
                   {"budget", std::to_string(budget)},
                   {"engine", {{"plan_checks", true}}}};
        if (!is_policy) cfg.doc["params"]["dtr"] = {{"heuristic", heuristic}, {"seed", 7}};
        INFO(path.string() << " " << heuristic << " on " << alloc);
        Report r;
        REQUIRE_NOTHROW(r = test::validated_run(cfg, trace));
        ++runs;
        if (r.counters.forced_evictions > 0) ++evicting;
      }
    }
  }
  CHECK(runs == traces.size() * 4 * 9);
  CHECK(evicting > runs / 2);
}

// autoswap's and vdnn's fallback (the resident storage used furthest in the future) keeps its
// candidates in a heap fed by the trace's events; engine.plan_checks runs the plain pass over
// every tensor beside it at every failed allocation and throws when they choose differently. The
// first version lost a storage whose swap-in allocation was the one that failed (bundled traces
// at 40-60 %); these budgets make the fallback run on every trace.
TEST_CASE("the swap policies' fallback agrees with the plain search on every bundled trace", "[swap][bundled][search]") {
  const auto all = coopsim::test::bundled_traces();
  REQUIRE(all.size() >= 10);
  // Under COOPSIM_SANITIZE=1 only the first trace: the normal pass covers every one, and the
  // sanitizer pass of this suite is the longest step of CI.
  const bool sanitize = coopsim::test::bundled_percents({1, 2}).size() != 2;
  const std::size_t stride = sanitize ? all.size() : 1;
  std::uint64_t runs = 0, swapping = 0;
  for (std::size_t i = 0; i < all.size(); i += stride) {
    const Trace trace = load_trace(all[i].string());
    const TraceSummary summary = summarize(trace);
    for (const std::string alloc : {"fungible", "bestfit", "pytorch"}) {
      for (const std::string policy : {"autoswap", "vdnn"}) {
        for (const int percent : {40, 60}) {
          const auto budget = summary.peak_live.value / 100 * static_cast<std::uint64_t>(percent);
          SimConfig cfg;
          cfg.doc = {{"allocator", alloc},
                     {"policy", policy},
                     {"budget", std::to_string(budget)},
                     {"engine", {{"plan_checks", true}}}};
          INFO(all[i].string() << " " << policy << " on " << alloc << " at " << percent << "%");
          Report r;
          REQUIRE_NOTHROW(r = test::validated_run(cfg, trace));
          ++runs;
          if (r.counters.search_scanned > 0) ++swapping;
        }
      }
    }
  }
  CHECK(swapping > runs / 4);  // the fallback ran (it counts its scan) in a good share of the runs
}
