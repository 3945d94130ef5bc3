// Swap and recompute in one run: the engine's hybrid mechanics (swaps under the recompute
// engine: on-demand swap-ins with exact stalls, values released while on the host, a
// recompute whose input is on the host) through a scripted policy, and the pooch / capuchin
// plans and replays on a hand-worked trace. Timings use a unit link (1 ns per byte, no latency).
#include <catch2/catch.hpp>

#include <map>

#include "alloc/bestfit.hpp"
#include "alloc/fungible.hpp"
#include "coopsim/engine/engine.hpp"
#include "policy/hybrid.hpp"
#include "coopsim/policy/keep.hpp"
#include "trace_builder.hpp"
#include "unit_link.hpp"

using namespace coopsim;
using coopsim::test::TraceBuilder;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace hybrid_test {

namespace {

constexpr std::uint64_t kMiB = 1U << 20;

EngineOptions unit_link(std::uint64_t budget) {
  EngineOptions o = test::unit_link_options(budget);
  o.residency_checks = true;
  return o;
}

// A recompute-engine policy that swaps or evicts named storages after given events.
struct Step {
  enum class What : std::uint8_t { SwapOut, SwapIn, Evict } what;
  std::uint32_t storage;
};
class ScriptedPolicy final : public Policy {
 public:
  explicit ScriptedPolicy(std::multimap<std::size_t, Step> script) : script_(std::move(script)) {}
  std::vector<Action> on_alloc_failure(const AllocRequest&, const MemoryView&) override { return {}; }
  std::vector<Action> after_event(const MemoryView& view) override {
    std::vector<Action> out;
    auto [b, e] = script_.equal_range(index_of(view.event_index()));
    for (auto it = b; it != e; ++it) {
      const Step& s = it->second;
      if (s.what == Step::What::Evict) {
        out.push_back(Action::evict(view.current_value(TensorId{s.storage})));
      } else {
        out.push_back(
            {s.what == Step::What::SwapOut ? Action::Kind::SwapOut : Action::Kind::SwapIn, TensorId{s.storage}});
      }
    }
    return out;
  }
  std::optional<RematOptions> remat_options() const override { return RematOptions{}; }

 private:
  std::multimap<std::size_t, Step> script_;
};

std::size_t count(const RunLog& log, LogKind k) {
  return static_cast<std::size_t>(
      std::count_if(log.records.begin(), log.records.end(), [&](const LogRecord& r) { return r.kind == k; }));
}

}  // namespace

TEST_CASE("hybrid engine: an op reading a value still being swapped out waits for both copies", "[hybrid][engine]") {
  // 0 alloc x  1 f(->x) 10ns [swap x out: 10..1010]  2 alloc y  3 g(->y) 100ns (now 110)
  // 4 h(x) 10ns: waits for the copy out (stall 900), then the copy in 1010..2010 (stall 1000).
  TraceBuilder b;
  const auto x = b.tensor(1000), y = b.tensor(1000);
  const auto f = b.op("f", 10, {}, {x}), g = b.op("g", 100, {}, {y}), h = b.op("h", 10, {x}, {});
  b.alloc(x).compute(f).alloc(y).compute(g).compute(h).free(x).free(y);
  FungibleAllocator alloc(Bytes{4000});
  ScriptedPolicy policy({{1, {Step::What::SwapOut, x}}});
  RunLog log;
  EngineOptions o = unit_link(4000);
  o.log = &log;
  Report r;
  run_engine(b.trace(), alloc, policy, o, r);
  CHECK(r.status == RunStatus::Completed);
  CHECK(r.time.swap_outs == 1);
  CHECK(r.time.swap_ins == 1);
  CHECK(r.time.stall == SimTime{1900});
  CHECK(r.time.simulated == SimTime{2020});
  CHECK(r.memory.final_allocated == Bytes{0});
  // The log: the copy out [10, 1010], the copy in [1010, 2010], two stalls, h reads version 1.
  std::vector<const LogRecord*> transfers, stalls;
  for (const LogRecord& rec : log.records) {
    if (rec.kind == LogKind::SwapOut || rec.kind == LogKind::SwapIn) transfers.push_back(&rec);
    if (rec.kind == LogKind::Stall) stalls.push_back(&rec);
  }
  REQUIRE(transfers.size() == 2);
  CHECK(transfers[0]->kind == LogKind::SwapOut);
  CHECK(transfers[0]->start == SimTime{10});
  CHECK(transfers[0]->end == SimTime{1010});
  CHECK(transfers[1]->kind == LogKind::SwapIn);
  CHECK(transfers[1]->start == SimTime{1010});
  CHECK(transfers[1]->end == SimTime{2010});
  REQUIRE(stalls.size() == 2);
  CHECK(stalls[0]->start == SimTime{110});
  CHECK(stalls[0]->end == SimTime{1010});
  CHECK(stalls[1]->end == SimTime{2010});
  const LogRecord& last_compute = *std::find_if(log.records.rbegin(), log.records.rend(),
                                                [](const LogRecord& rec) { return rec.kind == LogKind::Compute; });
  CHECK(last_compute.op == OpId{h});
  REQUIRE(last_compute.reads == 1);
  CHECK(log.ref(last_compute).storage == TensorId{x});
  CHECK(log.ref(last_compute).version == 1);
  CHECK(transfers[1]->first < log.refs.size());
  CHECK(log.ref(*transfers[1]).version == 1);
}

TEST_CASE("hybrid engine: a value freed by the trace while on the host is dropped", "[hybrid][engine]") {
  TraceBuilder b;
  const auto x = b.tensor(1000), y = b.tensor(1000);
  const auto f = b.op("f", 10, {}, {x}), g = b.op("g", 5000, {}, {y});
  b.alloc(x).compute(f).alloc(y).compute(g).free(x).free(y);
  FungibleAllocator alloc(Bytes{4000});
  ScriptedPolicy policy({{1, {Step::What::SwapOut, x}}});
  Report r;
  run_engine(b.trace(), alloc, policy, unit_link(4000), r);
  CHECK(r.status == RunStatus::Completed);
  CHECK(r.time.swap_outs == 1);
  CHECK(r.time.swap_ins == 0);
  CHECK(r.time.stall == SimTime{0});
  CHECK(r.memory.final_allocated == Bytes{0});
}

TEST_CASE("hybrid engine: recomputing a value whose input is on the host swaps the input in first",
          "[hybrid][engine]") {
  // x1 = f1() 10ns, x2 = f2(x1) 20ns; x1 goes to the host after event 3 and x2 is evicted;
  // k (1000ns) runs; then h(x2) needs x2: f2 is re-run, which needs x1 back (copy in 1000 ns,
  // a stall), then recompute 20 ns, then h 10 ns.
  TraceBuilder b;
  const auto x1 = b.tensor(1000), x2 = b.tensor(1000), z = b.tensor(1000);
  const auto f1 = b.op("f1", 10, {}, {x1}), f2 = b.op("f2", 20, {x1}, {x2}), k = b.op("k", 1000, {}, {z});
  const auto h = b.op("h", 10, {x2}, {});
  b.alloc(x1).compute(f1).alloc(x2).compute(f2).alloc(z).compute(k).compute(h).free(x2).free(x1).free(z);
  FungibleAllocator alloc(Bytes{3000});
  ScriptedPolicy policy({{3, {Step::What::SwapOut, x1}}, {3, {Step::What::Evict, x2}}});
  RunLog log;
  EngineOptions o = unit_link(3000);
  o.log = &log;
  Report r;
  run_engine(b.trace(), alloc, policy, o, r);
  CHECK(r.status == RunStatus::Completed);
  CHECK(r.time.recomputes == 1);
  CHECK(r.time.recompute_time == SimTime{20});
  CHECK(r.time.swap_ins == 1);
  // The copy out ends at 30 + 1000 = 1030, during k (30..1030); h at 1030 needs x1 back: 1000 ns.
  CHECK(r.time.stall == SimTime{1000});
  CHECK(r.time.simulated == SimTime{10 + 20 + 1000 + 1000 + 20 + 10});
  CHECK(count(log, LogKind::Recompute) == 1);
  const LogRecord& rc = *std::find_if(log.records.begin(), log.records.end(),
                                      [](const LogRecord& rec) { return rec.kind == LogKind::Recompute; });
  CHECK(rc.op == OpId{f2});
  REQUIRE(rc.origin != kNoRecordId);
  CHECK(log.record(rc.origin).kind == LogKind::Compute);
  CHECK(log.record(rc.origin).op == OpId{f2});
  CHECK(log.ref(rc, 0).storage == TensorId{x1});  // reads x1 version 1, writes x2 version 1
  CHECK(log.ref(rc, 0).version == 1);
  CHECK(log.ref(rc, 1).storage == TensorId{x2});
  CHECK(log.ref(rc, 1).version == 1);
  // x2 by the policy; then eagerly as the trace frees x2, x1 and z (all recomputable).
  CHECK(count(log, LogKind::Evict) == 4);
  CHECK(r.counters.forced_evictions == 1);
}

namespace {

// Two tensors idle across the peak (hand-worked in the comments of the test below):
//  0 alloc P(param)  1 alloc A  2 fA(P->A) 10ns  3 alloc T  4 L(->T) 3ms  5 free T
//  6 alloc B  7 fB(P->B) 100ns  8 alloc W(2 MiB)  9 fw(->W) 10ns  10 free W  11 gB(B) 10ns
//  12 free B  13 alloc U  14 M(->U) 3ms  15 free U  16 gA(A) 10ns  17 free A  18 free P
// Live MiB: 1 2 2 3 3 2 3 3 5 5 3 3 2 3 3 2 2 1 0: peak 5 at event 8, 3 allowed.
TraceBuilder two_gaps() {
  TraceBuilder b;
  const auto p = b.tensor(kMiB, TensorRole::Parameter), a = b.tensor(kMiB), t = b.tensor(kMiB);
  const auto bb = b.tensor(kMiB), w = b.tensor(2 * kMiB), u = b.tensor(kMiB);
  const auto fa = b.op("fA", 10, {p}, {a}), l = b.op("L", 3000000, {}, {t}), fb = b.op("fB", 100, {p}, {bb});
  const auto fw = b.op("fw", 10, {}, {w}), gb = b.op("gB", 10, {bb}, {}), m = b.op("M", 3000000, {}, {u});
  const auto ga = b.op("gA", 10, {a}, {});
  b.alloc(p).alloc(a).compute(fa).alloc(t).compute(l).free(t).alloc(bb).compute(fb).alloc(w).compute(fw).free(w);
  b.compute(gb).free(bb).alloc(u).compute(m).free(u).compute(ga).free(a).free(p);
  return b;
}

constexpr std::uint64_t kThree = 3 * kMiB + 4096;

std::unique_ptr<HybridPolicy> make_hybrid(bool capuchin) {
  if (capuchin) return std::make_unique<CapuchinPolicy>(HybridOptions{});
  return std::make_unique<PoochPolicy>(HybridOptions{});
}

}  // namespace

TEST_CASE("pooch and capuchin: swap the gap that hides, recompute the one that cannot", "[hybrid][pooch][capuchin]") {
  // A (tensor 1): idle 6,000,120 ns between fA and gA; out + in = 2 x 1,048,576 ns hide (stall
  // 0); its copy out ends during L, the copy in must start by 6,000,130 - 1,048,576, i.e. after
  // event 13: absent over events 5..13, covering the peak at 8. B (tensor 3): idle 10 ns, so a
  // swap could never leave memory before its use; recomputing fB costs 100 ns (P is a
  // parameter, always resident). PoocH-like: A by swap (0 ns per byte) then B by recompute.
  // Capuchin-like: A in phase 1 (FreeTime 3,902,968 > 0), B by MSPS in phase 2 (no swap).
  const auto b = two_gaps();
  {
    FungibleAllocator alloc(Bytes{kThree});
    KeepPolicy keep;
    Report r;
    run_engine(b.trace(), alloc, keep, unit_link(kThree), r);
    CHECK(r.status == RunStatus::OutOfMemory);
  }
  for (const bool capuchin : {false, true}) {
    INFO((capuchin ? "capuchin" : "pooch"));
    const auto policy = make_hybrid(capuchin);
    FungibleAllocator alloc(Bytes{kThree});
    Report r;
    run_engine(b.trace(), alloc, *policy, unit_link(kThree), r);
    const auto plan = policy->plan();
    REQUIRE(plan.size() == 2);
    CHECK(plan[0].tensor == 1);
    CHECK_FALSE(plan[0].recompute);
    CHECK(plan[0].cost == SimTime{0});
    CHECK(plan[0].last_use == 2);
    CHECK(plan[0].next_use == 16);
    CHECK(plan[1].tensor == 3);
    CHECK(plan[1].recompute);
    CHECK(plan[1].cost == SimTime{100});
    CHECK(r.status == RunStatus::Completed);
    CHECK(r.time.swap_outs == 1);
    CHECK(r.time.swap_ins == 1);
    CHECK(r.time.stall == SimTime{0});  // the copy in, issued after event 13, ends during M
    CHECK(r.time.recomputes == 1);
    CHECK(r.time.recompute_time == SimTime{100});
    CHECK(r.counters.forced_evictions == 1);
    CHECK(r.time.simulated == SimTime{6000140 + 100});
    CHECK(r.memory.peak_allocated <= Bytes{3 * kMiB});
  }
}

TEST_CASE("pooch and capuchin run on an address-aware allocator with residency checks", "[hybrid]") {
  const auto b = two_gaps();
  for (const bool capuchin : {false, true}) {
    const auto policy = make_hybrid(capuchin);
    BestFitAllocator alloc(Bytes{kThree});
    RunLog log;
    EngineOptions o = unit_link(kThree);
    o.log = &log;
    Report r;
    run_engine(b.trace(), alloc, *policy, o, r);
    CHECK(r.status == RunStatus::Completed);
    CHECK(count(log, LogKind::SwapOut) == 1);
    CHECK(count(log, LogKind::SwapIn) == 1);
    CHECK(count(log, LogKind::Recompute) == 1);
  }
}

}  // namespace hybrid_test
