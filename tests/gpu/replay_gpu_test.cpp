// GPU suite (built only with CUDA): replays hand-built plans on the device. Exits 77 (skipped)
// when cudaGetDeviceCount reports no device, so `meson test` stays green on machines without
// one. Checks correctness only (integrity, ordering, positive timings), never timing values.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <iostream>
#include <string>

#include "coopsim/replay/replay_plan.hpp"
#include "coopsim/replay/replay.hpp"
#include "plan_scenarios.hpp"

using namespace coopsim;
using namespace coopsim::gpu;

namespace {

ReplaySettings settings(bool graph, bool poison) {
  ReplaySettings s;
  s.iterations = 2;
  s.warmup = 1;
  s.graph = graph;
  s.poison = poison;
  return s;
}

}  // namespace

TEST_CASE("gpu replay: sound plans pass the integrity check in graph and host-issued modes") {
  for (const bool graph : {true, false}) {
    INFO("graph " << graph);
    const Plan swap = test::plan_of(test::swap_scenario());
    const ReplayMeasurement m = cuda::replay(swap, settings(graph, /*poison=*/true));
    CHECK(m.first_failing_step == kNoStep);
    REQUIRE(m.iteration_ns.size() == 2);
    CHECK(m.iteration_ns[0] > 0);
    CHECK(m.all_streams_ns[0] >= m.iteration_ns[0]);
    CHECK(m.step_ns[3] > 0);  // op f
    CHECK(m.step_ns[7] > 0);  // swap-out
    CHECK(m.calibration.cycles_per_ns > 0);
    CHECK(m.fills == 2);
    CHECK(m.poisons == 3);  // y, z and w's swap-in target
    const ReplayMeasurement r = cuda::replay(test::plan_of(test::remat_scenario()), settings(graph, true));
    CHECK(r.first_failing_step == kNoStep);
  }
}

TEST_CASE("gpu replay: a read after a swap-out without its swap-in fails the integrity check at that step") {
  // The checker rejects this plan; replay-gpu --skip-check runs it anyway and the device finds
  // the poisoned block that h reads (step 11: w's block was allocated but never filled).
  const Plan bad = test::plan_of(test::swap_scenario({test::kSwapIn}));
  CHECK_THROWS(check_plan(bad, "bad"));
  const ReplayMeasurement m = cuda::replay(bad, settings(true, /*poison=*/true));
  CHECK(m.first_failing_step == StepId{11});
  CHECK(describe_step(bad, m.first_failing_step) == "steps[11] (op 2 'h')");
  // A recompute left out: the access finds the poisoned block.
  const Plan no_recompute = test::plan_of(test::remat_scenario(/*drop_recompute=*/true));
  CHECK(cuda::replay(no_recompute, settings(false, true)).first_failing_step == StepId{6});
}

TEST_CASE("gpu replay: thinned checks of in-place ops pass on sound plans and catch a wrong version") {
  // Each op reads 64 MiB in 3 us: its check is thinned, spread over all threads, while the same
  // kernel writes the next version (the race the layout's ownership used to rule out).
  const Plan sound = test::plan_of(test::in_place_scenario(40));
  check_plan(sound, "in_place");
  for (const bool graph : {true, false}) {
    INFO("graph " << graph);
    const ReplayMeasurement m = cuda::replay(sound, settings(graph, false));
    CHECK(m.first_failing_step == kNoStep);
    CHECK(m.thinned_steps >= 40);
  }
  // Op 17 reads a version that is not there: a thinned check still reads word 0 and fails there.
  const Plan bad = test::plan_of(test::in_place_scenario(40, 17));
  const ReplayMeasurement m = cuda::replay(bad, settings(true, false));
  REQUIRE(m.first_failing_step != kNoStep);
  CHECK(describe_step(bad, m.first_failing_step).find("'acc'") != std::string::npos);
}

TEST_CASE("gpu link sweep: copy time grows with size in both directions") {
  const auto samples = cuda::measure_link(2);
  const LinkFit d2h = fit_link(samples, true), h2d = fit_link(samples, false);
  CHECK(d2h.ns_per_byte > 0);
  CHECK(h2d.ns_per_byte > 0);
}

int main(int argc, char** argv) {
  std::string why;
  if (cuda::device_count(why) == 0) {
    std::cout << "no CUDA device (" << why << "): skipping the GPU suite\n";
    return 77;
  }
  const DeviceInfo d = cuda::open_device(0);
  std::cout << "device: " << d.name << ", driver " << d.driver_version << ", runtime " << d.runtime_version << "\n";
  return Catch::Session().run(argc, argv);
}
