// Engine behaviour on tiny hand-worked traces: time, stalls, swaps, OOM points, fragmentation.
#include <catch2/catch.hpp>

#include "alloc/bestfit.hpp"
#include "alloc/fungible.hpp"
#include "coopsim/engine/engine.hpp"
#include "coopsim/policy/keep.hpp"
#include "trace_builder.hpp"
#include "unit_link.hpp"

using namespace coopsim;
using coopsim::test::TraceBuilder;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace engine_test {

namespace {

// Swaps out the lowest-index resident tensor that is not in use, one per failure.
class SwapLowestPolicy final : public Policy {
 public:
  std::vector<Action> on_alloc_failure(const AllocRequest&, const MemoryView& v) override {
    for (std::uint32_t t = 0; t < v.trace().tensors.size(); ++t) {
      if (v.residency(TensorId{t}) == Residency::Resident && !v.pinned(TensorId{t})) {
        return {{Action::Kind::SwapOut, TensorId{t}}};
      }
    }
    return {};
  }
};

EngineOptions options(std::uint64_t budget) { return test::unit_link_options(budget); }  // 1 ns per byte

// A(400) -> op1 -> B(400) via op2 -> C(400) via op3; frees as soon as dead.
TraceBuilder chain() {
  TraceBuilder b;
  const auto a = b.tensor(400), bb = b.tensor(400), c = b.tensor(400);
  const auto op1 = b.op("op1", 10, {}, {a});
  const auto op2 = b.op("op2", 20, {a}, {bb});
  const auto op3 = b.op("op3", 30, {bb}, {c});
  b.alloc(a).compute(op1).alloc(bb).compute(op2).free(a).alloc(c).compute(op3).free(bb).free(c);
  return b;
}

}  // namespace

TEST_CASE("keep replays a chain: time is the sum of op durations", "[engine]") {
  const auto b = chain();
  FungibleAllocator alloc(Bytes{1000});
  KeepPolicy keep;
  Report r;
  run_engine(b.trace(), alloc, keep, options(1000), r);
  CHECK(r.status == RunStatus::Completed);
  CHECK(r.memory.peak_allocated.value == 800);
  CHECK(r.memory.peak_requested.value == 800);
  CHECK(r.memory.final_allocated.value == 0);
  CHECK(r.time.simulated.count() == 60);
  CHECK(r.time.trace_compute.count() == 60);
  CHECK(r.time.compute_overhead == 1.0);
  CHECK(r.time.stall.count() == 0);
  CHECK(r.counters.allocs == 3);
  CHECK(r.counters.frees == 3);
  CHECK(r.counters.computes == 3);
  CHECK(r.counters.events == 9);
}

TEST_CASE("keep reports the exact OOM point", "[engine]") {
  const auto b = chain();
  FungibleAllocator alloc(Bytes{700});
  KeepPolicy keep;
  Report r;
  run_engine(b.trace(), alloc, keep, options(700), r);
  REQUIRE(r.status == RunStatus::OutOfMemory);
  REQUIRE(r.oom);
  CHECK(r.oom->event == EventId{2});
  CHECK(r.oom->tensor_file_id == 1);
  CHECK(r.oom->has_op);
  CHECK(r.oom->op_name == "op2");
  CHECK(r.oom->requested.value == 400);
  CHECK(r.oom->allocated.value == 400);
  CHECK(r.oom->largest_free.value == 300);
  CHECK(r.time.simulated.count() == 10);
}

TEST_CASE("an address-aware arena runs out where the fungible counter does not", "[engine]") {
  TraceBuilder b;
  const auto x = b.tensor(1024), y = b.tensor(1024), z = b.tensor(1024), big = b.tensor(2048);
  b.alloc(x).alloc(y).alloc(z).free(x).free(z).alloc(big).free(big).free(y);
  KeepPolicy keep;
  {
    BestFitAllocator arena(Bytes{3072});
    Report r;
    run_engine(b.trace(), arena, keep, options(3072), r);
    REQUIRE(r.status == RunStatus::OutOfMemory);
    CHECK(r.oom->event == EventId{5});
    CHECK(r.oom->allocated.value == 1024);
    CHECK(r.oom->largest_free.value == 1024);
  }
  {
    FungibleAllocator counter(Bytes{3072});
    Report r;
    run_engine(b.trace(), counter, keep, options(3072), r);
    CHECK(r.status == RunStatus::Completed);
    CHECK(r.memory.peak_allocated.value == 3072);
  }
}

TEST_CASE("fragmentation at the reserved peak for a fixed arena", "[engine]") {
  TraceBuilder b;
  const auto x = b.tensor(1000), y = b.tensor(1000);
  b.alloc(x).alloc(y).free(x).free(y);
  BestFitAllocator arena(Bytes{4096});
  KeepPolicy keep;
  Report r;
  run_engine(b.trace(), arena, keep, options(4096), r);
  // Arena reserved = 4096 from the start; allocated peaks at 2 x 1024 (512 B rounding).
  CHECK(r.memory.peak_reserved.value == 4096);
  CHECK(r.memory.allocated_at_reserved_peak.value == 2048);
  CHECK(r.memory.reserved_fragmentation == Approx(0.5));
  CHECK(r.memory.peak_footprint.value == 2048);
  CHECK(r.memory.peak_internal_waste.value == 48);
}

TEST_CASE("swaps wait on the copy streams and count as stalls", "[engine]") {
  TraceBuilder b;
  const auto a = b.tensor(400), bb = b.tensor(400), c = b.tensor(400);
  const auto op1 = b.op("op1", 100, {}, {a});
  const auto op2 = b.op("op2", 100, {a}, {bb});
  const auto op3 = b.op("op3", 100, {bb}, {c});
  b.alloc(a).compute(op1).alloc(bb).compute(op2).alloc(c).compute(op3).access(a);
  FungibleAllocator alloc(Bytes{800});
  SwapLowestPolicy policy;
  Report r;
  run_engine(b.trace(), alloc, policy, options(800), r);
  REQUIRE(r.status == RunStatus::Completed);
  // alloc C at t=200 fails -> swap A out (400 ns) -> stall to 600; op3 -> 700;
  // access A: swap-in needs room -> swap B out 700..1100 -> then A in 1100..1500.
  CHECK(r.time.swap_outs == 2);
  CHECK(r.time.swap_ins == 1);
  CHECK(r.time.swap_out_bytes.value == 800);
  CHECK(r.time.stall.count() == 1200);
  CHECK(r.time.simulated.count() == 1500);
  CHECK(r.time.trace_compute.count() == 300);
  CHECK(r.time.compute_overhead == Approx(5.0));
  CHECK(r.counters.alloc_failures == 2);
  CHECK(r.memory.coop_fragmentation_samples == 2);
}

TEST_CASE("timestamps set a floor for the compute stream", "[engine]") {
  TraceBuilder b;
  const auto a = b.tensor(100), bb = b.tensor(100);
  const auto op1 = b.op("op1", 10, {}, {a});
  const auto op2 = b.op("op2", 20, {a}, {bb});
  b.alloc(a, 1000).compute(op1, 1000).alloc(bb, 1100).compute(op2, 1100).free(a, 1200).free(bb, 1200);
  FungibleAllocator alloc(Bytes{1000});
  KeepPolicy keep;
  Report r;
  run_engine(b.trace(), alloc, keep, options(1000), r);
  CHECK(r.time.simulated.count() == 200);
  CHECK(r.time.trace_compute.count() == 200);
  CHECK(r.time.compute_overhead == 1.0);
}

TEST_CASE("views resolve to their base storage", "[engine]") {
  TraceBuilder b;
  const auto a = b.tensor(256);
  const auto v = b.view(a);
  const auto out = b.tensor(256);
  const auto op = b.op("use_view", 5, {v}, {out});
  b.alloc(a).alloc(out).compute(op).access(v).free(a).free(out);
  FungibleAllocator alloc(Bytes{1000});
  KeepPolicy keep;
  Report r;
  run_engine(b.trace(), alloc, keep, options(1000), r);
  CHECK(r.status == RunStatus::Completed);
  CHECK(r.memory.peak_allocated.value == 512);
  CHECK(r.counters.accesses == 1);
}

TEST_CASE("recorded addresses are compared with the model's placements", "[engine]") {
  TraceBuilder b;
  const auto x = b.tensor(1000), y = b.tensor(1000);
  b.alloc(x).alloc(y).free(x).free(y);
  auto& ev = b.mutable_trace().events;
  // bestfit places x at offset 0 and y at 1024. Address 0 means "not recorded", so x carries a
  // wrong address (7) and y the right one.
  ev[0].addr = 7;
  ev[1].addr = 1024;
  BestFitAllocator arena(Bytes{4096});
  KeepPolicy keep;
  Report r;
  run_engine(b.trace(), arena, keep, options(4096), r);
  CHECK(r.addresses.checked == 2);
  CHECK(r.addresses.mismatches == 1);
  CHECK(r.addresses.first_mismatch_event == EventId{0});
  CHECK(r.addresses.first_expected == 7);
  CHECK(r.addresses.first_got == 0);
}

namespace {

// Asks to swap out tensor 0 after every event, whether or not it is resident: a policy that
// breaks the engine's rules (issue 29).
class SwapAlwaysPolicy final : public Policy {
 public:
  std::vector<Action> after_event(const MemoryView&) override { return {{Action::Kind::SwapOut, TensorId{0}}}; }
  std::vector<Action> on_alloc_failure(const AllocRequest&, const MemoryView&) override { return {}; }
};

}  // namespace

// A broken engine rule is a one-line InvariantError naming the trace and the event (run_simulation
// adds the policy and allocator), never an internal error (exit 70): issue 29.
TEST_CASE("a policy that breaks an engine rule gets a one-line error naming the event", "[engine]") {
  TraceBuilder b;
  const auto x = b.tensor(100);
  b.op("f", 10, {}, {x});
  b.alloc(x).compute(0).free(x);
  FungibleAllocator alloc(Bytes{1000});
  SwapAlwaysPolicy policy;
  Report r;
  CHECK_THROWS_AS(run_engine(b.trace(), alloc, policy, options(1000), r), InvariantError);
  try {
    run_engine(b.trace(), alloc, policy, options(1000), r);
  } catch (const InvariantError& e) {
    const std::string m = e.what();
    CHECK(m.rfind("<builder>: event ", 0) == 0);
    CHECK(m.find("policy asked to swap out tensor 0") != std::string::npos);
    CHECK(m.find('\n') == std::string::npos);
  }
}

}  // namespace engine_test
