// The contract every registered policy must honour, iterated over the policy registry (as the
// allocator contract iterates the allocator registry), so a new policy is checked from its first
// build: on the two smallest bundled traces, under every allocator, at 50 % and 100 % of the
// trace's no-eviction peak, and on two generated training steps at 30 %, 50 % and 100 % (the
// shapes that once crashed the hybrid policies), with the allocator invariants checked after
// every event (engine.paranoid) and the run's event log checked by the independent auditor
// (engine.residency_checks):
//  * a run never throws, never reserves more than its budget, and ends completed (every compute
//    executed) or with an OOM or thrash point;
//  * the same inputs give the same report (JSON) twice;
//  * with the budget at the trace's peak on the address-blind allocator every policy completes
//    (nothing forces it to act; on the bundled traces and the generated cnn).
// The bundled suites take their policy lists from the registry too: remat_bundled_test.cpp the
// recompute policies, swap_bundled_test.cpp every other one, so a new policy also runs on every
// bundled trace at five budgets there.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "bundled_traces.hpp"
#include "coopsim/formats/trace_file.hpp"
#include "coopsim/generate/generator.hpp"
#include "coopsim/output/report_writers.hpp"
#include "coopsim/sim/simulation.hpp"
#include "audited_run.hpp"

using namespace coopsim;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace policy_contract_test {

namespace {

std::vector<std::filesystem::path> smallest_bundled(std::size_t n) {
  auto traces = coopsim::test::bundled_traces();
  std::stable_sort(traces.begin(), traces.end(), [](const auto& a, const auto& b) {
    return std::filesystem::file_size(a) < std::filesystem::file_size(b);
  });
  traces.resize(std::min(n, traces.size()));
  return traces;
}

SimConfig config(const std::string& allocator, const std::string& policy, std::uint64_t budget) {
  SimConfig cfg;
  cfg.doc = {{"allocator", allocator},
             {"policy", policy},
             {"budget", std::to_string(budget)},
             {"engine", {{"paranoid", true}, {"residency_checks", true}}}};
  return cfg;
}

// Runs every registered policy under every allocator at each percentage of the trace's
// no-eviction peak and checks the contract; returns the number of runs. `complete_at_peak`:
// whether every policy must complete at 100 % on the address-blind allocator.
std::uint64_t check_contract(const Trace& trace, const std::string& name, const std::vector<std::uint64_t>& percents,
                             bool complete_at_peak) {
  const auto& c = builtin_components();
  const TraceSummary summary = summarize(trace);
  std::uint64_t runs = 0;
  for (const auto& policy : c.policies.entries()) {
    for (const auto& alloc : c.allocators.entries()) {
      for (const std::uint64_t percent : percents) {
        const std::uint64_t budget = percent == 100 ? summary.peak_live.value : summary.peak_live.value / 100 * percent;
        INFO(name << " " << policy.name << " on " << alloc.name << " at " << percent << "%");
        Report first, second;
        REQUIRE_NOTHROW(first = test::audited_run(config(alloc.name, policy.name, budget), trace));
        REQUIRE_NOTHROW(second = test::audited_run(config(alloc.name, policy.name, budget), trace));
        ++runs;
        CHECK(to_json(first).dump() == to_json(second).dump());
        CHECK(first.memory.peak_reserved.value <= budget);
        if (first.status == RunStatus::Completed) {
          CHECK(first.counters.computes == summary.computes);
          CHECK(first.counters.events == summary.events);
          CHECK(!first.oom.has_value());
        } else {
          CHECK((first.oom.has_value() || first.thrash.has_value()));
        }
        if (complete_at_peak && percent == 100 && alloc.name == "fungible") CHECK(first.status == RunStatus::Completed);
      }
    }
  }
  return runs;
}

}  // namespace

TEST_CASE("every registered policy honours the engine contract on bundled traces", "[contract][policy]") {
  const auto& c = builtin_components();
  const auto traces = smallest_bundled(2);
  REQUIRE(traces.size() == 2);
  REQUIRE(c.policies.entries().size() >= 8);
  std::uint64_t runs = 0;
  for (const auto& path : traces) runs += check_contract(load_trace(path.string()), path.string(), {50, 100}, true);
  CHECK(runs == traces.size() * c.policies.entries().size() * c.allocators.entries().size() * 2);
}

TEST_CASE("every registered policy honours the engine contract on generated training steps", "[contract][policy]") {
  // The shapes on which pooch and capuchin once crashed (tests/unit/hybrid_regressions_test.cpp):
  // an mlp (accumulated gradients moved by copy-on-write) and a cnn with dropout and two
  // micro-batches (random outputs, gradients accumulated in place), at budgets that force the
  // policies to act. Not every policy completes at the mlp's peak: under copy-on-write (dtr,
  // dte) a parameter updated at the peak needs a second block the peak does not count.
  const auto& c = builtin_components();
  std::uint64_t runs = 0;
  for (const bool cnn : {false, true}) {
    GeneratorOptions o;
    o.model = cnn ? "cnn" : "mlp";
    o.layers = 6;
    o.iterations = 2;
    o.dropout = cnn;
    o.micro_batches = cnn ? 2 : 1;
    runs += check_contract(generate_training_trace(o), generator_model_name(o), {30, 50, 100}, cnn);
  }
  CHECK(runs == 2 * c.policies.entries().size() * c.allocators.entries().size() * 3);
}

}  // namespace policy_contract_test
