// autoswap and vdnn on tiny hand-worked traces: the plan each derives from the trace, and the
// swaps, stalls and completion the engine then produces (paranoid: allocator invariants after
// every event). An illegal action (a pinned or non-resident tensor) would throw.
#include <catch2/catch.hpp>

#include "alloc/fungible.hpp"
#include "coopsim/engine/engine.hpp"
#include "policy/autoswap.hpp"
#include "coopsim/policy/keep.hpp"
#include "policy/vdnn.hpp"
#include "trace_builder.hpp"
#include "unit_link.hpp"

using namespace coopsim;
using coopsim::test::TraceBuilder;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace swap_policies_test {

namespace {

constexpr std::uint64_t kMiB = 1U << 20;

// pcie3-x16 (AutoSwap's fit): 1 MiB out = 47200 + round(0.0756 * 1048576) = 126472 ns,
// in = 9700 + round(0.0823 * 1048576) = 95998 ns; 2 MiB out 205745 ns, in 182296 ns.
EngineOptions pcie3_options(std::uint64_t budget) {
  EngineOptions o;
  o.budget = Bytes{budget};
  for (const auto& p : link_presets()) {
    if (p.name == "pcie3-x16") {
      o.link.name = p.name;
      o.link.d2h = p.d2h;
      o.link.h2d = p.h2d;
    }
  }
  o.paranoid = true;
  return o;
}

using test::unit_link_options;  // 1 ns per byte, no latency

AutoSwapOptions one_event_buffers() {
  AutoSwapOptions o;
  o.read_buffer = 1;
  o.write_buffer = 1;
  return o;
}

// A (1 MiB) is written, idle across the peak (alloc C), read at the end:
//  0 alloc A  1 f1(->A) 10ns  2 alloc B  3 f2(->B) 1ms  4 alloc C  5 f3(B->C) 1ms
//  6 free B  7 free C  8 g(A) 10ns  9 free A
// Live MiB after each event: 1 1 2 2 3 3 2 1 1 0 -> peak 3 MiB at index 4. Budget 2 MiB + 4 KiB:
// the load target is met once the peak is under it.
constexpr std::uint64_t kSmallBudget = 2 * kMiB + 4096;

TraceBuilder idle_across_peak() {
  TraceBuilder b;
  const auto a = b.tensor(kMiB), bb = b.tensor(kMiB), c = b.tensor(kMiB);
  const auto f1 = b.op("f1", 10, {}, {a});
  const auto f2 = b.op("f2", 1000000, {}, {bb});
  const auto f3 = b.op("f3", 1000000, {bb}, {c});
  const auto g = b.op("g", 10, {a}, {});
  b.alloc(a).compute(f1).alloc(bb).compute(f2).alloc(c).compute(f3).free(bb).free(c).compute(g).free(a);
  return b;
}

}  // namespace

TEST_CASE("autoswap plans the gap across the peak and prefetches it back", "[swap][autoswap]") {
  const auto b = idle_across_peak();
  {
    FungibleAllocator alloc(Bytes{kSmallBudget});
    KeepPolicy keep;
    Report r;
    run_engine(b.trace(), alloc, keep, pcie3_options(kSmallBudget), r);
    CHECK(r.status == RunStatus::OutOfMemory);  // without swapping 3 MiB do not fit
  }
  FungibleAllocator alloc(Bytes{kSmallBudget});
  AutoSwapPolicy policy(one_event_buffers());
  Report r;
  run_engine(b.trace(), alloc, policy, pcie3_options(kSmallBudget), r);
  // Candidates: A (uses 1 and 8 straddle index 4, ready 2) and B (uses 3 and 5, ready 4). Both
  // rank (majority) A first: idle 2,000,000 ns vs 0. Lowering the load by A over [2, 8) gives
  // 1 1 1 1 2 2 1 0 1 0: peak 2 MiB < target, so only A is taken. Swap-in planned back from
  // g's start (2,000,010 - 95,998 = 1,904,012): the latest event ending by then is 4 (f2 ends
  // at 1,000,010), which is also the floor (the peak).
  const auto plan = policy.plan();
  REQUIRE(plan.size() == 1);
  CHECK(plan[0].tensor == TensorId{0});
  CHECK(plan[0].out_at == 2);
  CHECK(plan[0].in_at == 4);
  CHECK(plan[0].use_at == 8);
  // Run: A leaves after event 2 (t = 10 .. 126,482, done before C's alloc at 1,000,010). The
  // swap-in is due after event 4 but 1 MiB more does not fit until B is freed (event 6, t =
  // 2,000,010): 2,000,010 .. 2,096,008; g waits 95,998 and ends at 2,096,018.
  REQUIRE(r.status == RunStatus::Completed);
  CHECK(r.counters.alloc_failures == 0);
  CHECK(r.time.swap_outs == 1);
  CHECK(r.time.swap_ins == 1);
  CHECK(r.time.swap_out_bytes.value == kMiB);
  CHECK(r.time.stall.count() == 95998);
  CHECK(r.time.simulated.count() == 2096018);
  CHECK(r.time.trace_compute.count() == 2000020);
}

TEST_CASE("autoswap falls back to the furthest next use when the plan is short", "[swap][autoswap]") {
  const auto b = idle_across_peak();
  AutoSwapOptions o = one_event_buffers();
  o.smallest_block = Bytes{2 * kMiB};  // no candidate: empty plan
  FungibleAllocator alloc(Bytes{kSmallBudget});
  AutoSwapPolicy policy(o);
  Report r;
  run_engine(b.trace(), alloc, policy, pcie3_options(kSmallBudget), r);
  CHECK(policy.plan().empty());
  // Alloc C fails at t = 1,000,010; resident: A (next use 8), B (next use 5) -> A goes out,
  // the allocation waits for it: stall 126,472, t = 1,126,482; f3 ends 2,126,482; g swaps A in
  // on demand: stall 95,998 more, t = 2,222,480, ends 2,222,490.
  REQUIRE(r.status == RunStatus::Completed);
  CHECK(r.counters.alloc_failures == 1);
  CHECK(r.time.swap_outs == 1);
  CHECK(r.time.swap_ins == 1);
  CHECK(r.time.stall.count() == 126472 + 95998);
  CHECK(r.time.simulated.count() == 2222490);

  AutoSwapOptions off = o;
  off.fallback = false;
  FungibleAllocator alloc2(Bytes{kSmallBudget});
  AutoSwapPolicy no_fallback(off);
  Report r2;
  run_engine(b.trace(), alloc2, no_fallback, pcie3_options(kSmallBudget), r2);
  CHECK(r2.status == RunStatus::OutOfMemory);
}

TEST_CASE("autoswap priority scores choose different blocks", "[swap][autoswap]") {
  // 0 alloc A(1) 1 fA(->A) 10ns 2 alloc D(2) 3 fD(->D) 10ns 4 alloc B(1) 5 fB(->B) 1ms
  // 6 free B 7 gD(D) 10ns 8 gA(A) 10ns 9 free D 10 free A. Live MiB: 1 1 3 3 4 4 3 3 3 1 0,
  // peak at 4; limit 3.5 MiB: either A (over [2, 8)) or D (over [4, 7)) alone brings the
  // peak to 3 MiB.
  TraceBuilder b;
  const auto a = b.tensor(kMiB), d = b.tensor(2 * kMiB), bb = b.tensor(kMiB);
  const auto fa = b.op("fA", 10, {}, {a});
  const auto fd = b.op("fD", 10, {}, {d});
  const auto fb = b.op("fB", 1000000, {}, {bb});
  const auto gd = b.op("gD", 10, {d}, {});
  const auto ga = b.op("gA", 10, {a}, {});
  b.alloc(a).compute(fa).alloc(d).compute(fd).alloc(bb).compute(fb).free(bb).compute(gd).compute(ga);
  b.free(d).free(a);
  const std::uint64_t budget = 3 * kMiB + kMiB / 2;
  const auto planned = [&](SwapScore score) {
    AutoSwapOptions o = one_event_buffers();
    o.score = score;
    FungibleAllocator alloc(Bytes{budget});
    AutoSwapPolicy policy(o);
    Report r;
    run_engine(b.trace(), alloc, policy, pcie3_options(budget), r);
    CHECK(r.status == RunStatus::Completed);
    const auto plan = policy.plan();
    REQUIRE(plan.size() == 1);
    return index_of(plan[0].tensor);
  };
  // Starts: gD 1,000,020, gA 1,000,030; ends: fA 10, fD 20.
  // DOA_origin: A idle 1,000,030 - 10 = 1,000,020 ns > D idle 1,000,020 - 20 = 1,000,000.
  CHECK(planned(SwapScore::DoaOrigin) == a);
  // DOA: A 1,000,020 - 126,472 - 95,998 = 777,550; D 1,000,000 - 205,745 - 182,296 = 611,959.
  CHECK(planned(SwapScore::Doa) == a);
  // AOA: A 777,550 x 1 MiB < D 611,959 x 2 MiB.
  CHECK(planned(SwapScore::Aoa) == d);
  // WDOA (load - limit over [ready, next use)): A over [2,8): 3 3 4 4 3 3 - 3.5 = -1 MiB;
  // D over [4,7): 4 4 3 - 3.5 = +0.5 MiB.
  CHECK(planned(SwapScore::Wdoa) == d);
  // Majority: rank sums A = 0 + 1 + 1 = 2, D = 1 + 0 + 0 = 1 -> D.
  CHECK(planned(SwapScore::MajorityVote) == d);
}

namespace {

// Forward: 0 alloc X(in) 1 alloc Y 2 conv(X->Y) 3 alloc Z 4 relu(Y->Z); 5 mark backward;
// 6 alloc G 7 relu_bwd(Z,Y->G) 8 conv_bwd(X,G); 9-12 free. 1000 B each, ops 2000 ns.
TraceBuilder forward_backward() {
  TraceBuilder b;
  const auto x = b.tensor(1000, TensorRole::Input), y = b.tensor(1000), z = b.tensor(1000);
  const auto g = b.tensor(1000, TensorRole::Gradient);
  const auto conv = b.op("aten::convolution", 2000, {x}, {y});
  const auto relu = b.op("aten::relu", 2000, {y}, {z});
  const auto relu_bwd = b.op("aten::threshold_backward", 2000, {z, y}, {g});
  const auto conv_bwd = b.op("aten::convolution_backward", 2000, {x, g}, {});
  b.alloc(x).alloc(y).compute(conv).alloc(z).compute(relu);
  Trace& t = b.mutable_trace();
  t.labels.push_back("backward");
  t.events.push_back(TraceEvent::mark(0));
  b.alloc(g).compute(relu_bwd).compute(conv_bwd).free(x).free(y).free(z).free(g);
  return b;
}

}  // namespace

TEST_CASE("vdnn-all offloads every forward layer input used in backward", "[swap][vdnn]") {
  const auto b = forward_backward();
  FungibleAllocator alloc(Bytes{10000});
  VdnnPolicy policy(VdnnOptions{false, false});
  Report r;
  run_engine(b.trace(), alloc, policy, unit_link_options(10000), r);
  // X: last forward use 2, first backward use 8, the backward layer before it is 7 -> prefetch
  // after event 6. Y: last forward use 4, first backward use 7, no backward layer before it ->
  // prefetch right after the mark (5). Z is no layer's forward input.
  const auto plan = policy.plan();
  REQUIRE(plan.size() == 2);
  CHECK(plan[0].tensor == TensorId{0});
  CHECK(plan[0].out_at == 2);
  CHECK(plan[0].in_at == 6);
  CHECK(plan[0].use_at == 8);
  CHECK(plan[1].tensor == TensorId{1});
  CHECK(plan[1].out_at == 4);
  CHECK(plan[1].in_at == 5);
  CHECK(plan[1].use_at == 7);
  // X is in use at 2, leaves after 3: 2000..3000. Y in use at 4, leaves after 5: 4000..5000.
  // After 6: X in 4000..5000. Event 7 needs Y (still going out): wait to 5000 (stall 1000),
  // swap in 5000..6000 (stall 1000), relu_bwd 6000..8000, conv_bwd 8000..10000.
  REQUIRE(r.status == RunStatus::Completed);
  CHECK(r.time.swap_outs == 2);
  CHECK(r.time.swap_ins == 2);
  CHECK(r.time.stall.count() == 2000);
  CHECK(r.time.simulated.count() == 10000);
  CHECK(r.time.trace_compute.count() == 8000);
}

TEST_CASE("vdnn-conv offloads only convolution inputs", "[swap][vdnn]") {
  CHECK(VdnnPolicy::is_conv("aten::convolution"));
  CHECK(VdnnPolicy::is_conv("aten::cudnn_convolution"));
  CHECK(VdnnPolicy::is_conv("Conv2d"));
  CHECK_FALSE(VdnnPolicy::is_conv("aten::convolution_backward"));
  CHECK_FALSE(VdnnPolicy::is_conv("aten::relu"));
  const auto b = forward_backward();
  FungibleAllocator alloc(Bytes{10000});
  VdnnPolicy policy(VdnnOptions{true, false});
  Report r;
  run_engine(b.trace(), alloc, policy, unit_link_options(10000), r);
  REQUIRE(policy.plan().size() == 1);
  CHECK(policy.plan()[0].tensor == TensorId{0});
  // X out 2000..3000, in after event 6 (t = 4000) 4000..5000, done before conv_bwd at 6000.
  REQUIRE(r.status == RunStatus::Completed);
  CHECK(r.time.swap_outs == 1);
  CHECK(r.time.swap_ins == 1);
  CHECK(r.time.stall.count() == 0);
  CHECK(r.time.simulated.count() == 8000);
}

TEST_CASE("vdnn without a backward mark plans nothing", "[swap][vdnn]") {
  const auto b = idle_across_peak();
  FungibleAllocator alloc(Bytes{4 * kMiB});
  VdnnPolicy policy(VdnnOptions{});
  Report r;
  run_engine(b.trace(), alloc, policy, pcie3_options(4 * kMiB), r);
  CHECK(policy.plan().empty());
  CHECK(r.status == RunStatus::Completed);
  CHECK(r.time.swap_outs == 0);
}

}  // namespace swap_policies_test
