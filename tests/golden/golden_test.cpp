// Golden reports: a small hand-written trace replayed under every allocator, compared field by
// field with figures worked out by hand from each model's rules (derivations inline).
#include <catch2/catch.hpp>

#include "coopsim/sim/simulation.hpp"
#include "coopsim/formats/trace_file.hpp"
#include "coopsim/output/report_writers.hpp"
#include "audited_run.hpp"

using namespace coopsim;

namespace {

// tests/data/golden/small_step.jsonl: per iteration (2 iterations), with w (1000 B, parameter,
// allocated once) live throughout:
//   alloc a (3 MiB) -> matmul 100us -> alloc b (1 MiB) -> relu 50us -> alloc g (1 MiB)
//   -> relu_backward 25us -> free a, b -> sgd_step 5us -> free g
// Peak requested = 1000 + 3 MiB + 1 MiB + 1 MiB = 5,243,880 B; time = 2 x 180 us.
constexpr const char* kTrace = "tests/data/golden/small_step.jsonl";
constexpr std::uint64_t kPeakRequested = 5'243'880;
// Rounded to 512 B: w -> 1024, the others are multiples of 512 already.
constexpr std::uint64_t kPeakRounded = 5'243'904;

Report run(const std::string& allocator) {
  static const Trace trace = load_trace(kTrace);
  SimConfig cfg;
  cfg.doc = {{"allocator", allocator}, {"budget", "64MiB"}, {"engine", {{"paranoid", true}}}};
  return test::audited_run(cfg, trace);
}

void common_checks(const Report& r) {
  CHECK(r.status == RunStatus::Completed);
  CHECK(r.iterations == 2);
  CHECK(r.model == "golden-small-step");
  CHECK(r.memory.peak_requested.value == kPeakRequested);
  CHECK(r.time.simulated.count() == 360'000);
  CHECK(r.time.trace_compute.count() == 360'000);
  CHECK(r.time.compute_overhead == 1.0);
  CHECK(r.time.stall.count() == 0);
  CHECK(r.counters.allocs == 7);  // w once, a b g twice
  CHECK(r.counters.frees == 6);
  CHECK(r.counters.computes == 8);
  CHECK(r.counters.events == 25);
  CHECK(r.memory.coop_fragmentation_samples == 0);
}

}  // namespace

TEST_CASE("golden: fungible counts exact bytes", "[golden]") {
  const Report r = run("fungible");
  common_checks(r);
  CHECK(r.memory.peak_allocated.value == kPeakRequested);
  CHECK(r.memory.peak_reserved.value == kPeakRequested);
  CHECK(r.memory.reserved_fragmentation == 0.0);
  CHECK(r.memory.final_allocated.value == 1000);
}

TEST_CASE("golden: bestfit packs one 64 MiB arena", "[golden]") {
  const Report r = run("bestfit");
  common_checks(r);
  // w@0 (1024), a@1024, b@3146752, g@4195328: footprint = 5,243,904; the frees coalesce into
  // one hole above w, so iteration 1 lands at the same offsets.
  CHECK(r.memory.peak_allocated.value == kPeakRounded);
  CHECK(r.memory.peak_footprint.value == kPeakRounded);
  CHECK(r.memory.peak_reserved.value == 64ULL << 20);
  CHECK(r.memory.reserved_fragmentation == Approx(1.0 - 5'243'904.0 / 67'108'864.0));
  CHECK(r.memory.peak_internal_waste.value == 24);
  CHECK(r.counters.device_mallocs == 1);
}

TEST_CASE("golden: cnmem grows by exact requests and reuses them", "[golden]") {
  const Report r = run("cnmem");
  common_checks(r);
  // Iteration 0 grows four reservations of exactly 1024, 3 MiB, 1 MiB, 1 MiB. Iteration 1 finds
  // best fits in them (a -> the 3 MiB block; b, g -> the two 1 MiB blocks, lower address first).
  CHECK(r.memory.peak_allocated.value == kPeakRounded);
  CHECK(r.memory.peak_reserved.value == kPeakRounded);
  CHECK(r.memory.final_reserved.value == kPeakRounded);
  CHECK(r.memory.reserved_fragmentation == 0.0);
  CHECK(r.counters.device_mallocs == 4);
}

TEST_CASE("golden: pytorch uses small and large pools", "[golden]") {
  const Report r = run("pytorch");
  common_checks(r);
  // w (1024) takes a 2 MiB small segment; a (3 MiB, large pool, < 10 MiB) a 20 MiB segment;
  // b (1 MiB, small pool) fits the 2,096,128 B remainder of the first small segment; g does not
  // fit the 1,047,552 B left, so a second 2 MiB small segment: reserved 24 MiB. Iteration 1
  // reuses the cached blocks: no new segment.
  CHECK(r.memory.peak_allocated.value == kPeakRounded);
  CHECK(r.memory.peak_reserved.value == 24ULL << 20);
  CHECK(r.memory.allocated_at_reserved_peak.value == kPeakRounded);
  CHECK(r.memory.reserved_fragmentation == Approx(1.0 - 5'243'904.0 / 25'165'824.0));
  CHECK(r.counters.device_mallocs == 3);
  CHECK(r.memory.final_reserved.value == 24ULL << 20);
}

TEST_CASE("golden: a budget below the peak stops keep at the exact point", "[golden]") {
  static const Trace trace = load_trace(kTrace);
  SimConfig cfg;
  // pytorch needs 2 + 20 + 2 MiB of segments; with 23 MiB the second small segment (for g,
  // event index 7 — after alloc w, iteration, alloc a, matmul, alloc b, relu, mark — the alloc of
  // tensor 4 for relu_backward) cannot be reserved.
  cfg.doc = {{"allocator", "pytorch"}, {"budget", "23MiB"}};
  const Report r = test::audited_run(cfg, trace);
  REQUIRE(r.status == RunStatus::OutOfMemory);
  REQUIRE(r.oom);
  CHECK(r.oom->event == EventId{7});
  CHECK(r.oom->iteration == 0);
  CHECK(r.oom->tensor_file_id == 4);
  CHECK(r.oom->tensor_name == "grad_a");
  CHECK(r.oom->op_name == "relu_backward");
  CHECK(r.oom->requested.value == 1'048'576);
  CHECK(r.oom->reserved.value == 22ULL << 20);
  CHECK(r.oom->allocated.value == 1024 + 3'145'728 + 1'048'576);
  CHECK(r.oom->largest_free.value == 17'825'792);  // the 20 MiB segment's remainder
}

TEST_CASE("golden: reports are byte-identical across runs", "[golden]") {
  const std::string a = to_json(run("pytorch")).dump(2);
  const std::string b = to_json(run("pytorch")).dump(2);
  CHECK(a == b);
  CHECK(csv_row(run("cnmem")) == csv_row(run("cnmem")));
}
