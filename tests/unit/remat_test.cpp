// Recompute policies on hand-worked traces: DTR's runtime rules (pinning, recursive
// rematerialization, multi-output ops, views, unevictable tensors, deallocation modes, thrash vs
// OOM), recomputable in-place versus copy-on-write, and Coop's window against DTR's per-tensor
// loop on the paper's motivating layout. Every expected figure is derived in the comments.
#include <catch2/catch.hpp>

#include "alloc/bestfit.hpp"
#include "alloc/fungible.hpp"
#include "coopsim/engine/engine.hpp"
#include "policy/coop.hpp"
#include "coopsim/policy/dtr.hpp"
#include "remat_steps.hpp"
#include "trace_builder.hpp"

using namespace coopsim;
using coopsim::test::TraceBuilder;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace remat_test {

namespace {

constexpr std::uint64_t kMiB = 1ULL << 20;

EngineOptions options(std::uint64_t budget) { return test::checked_options(budget); }
std::unique_ptr<Policy> dtr(const nlohmann::json& params) { return test::dtr_policy(params); }
std::unique_ptr<Policy> coop(const nlohmann::json& params) { return test::coop_policy(params); }

Report replay_fungible(const Trace& t, Policy& p, std::uint64_t budget) {
  FungibleAllocator a(Bytes{budget});
  Report r;
  run_engine(t, a, p, options(budget), r);
  return r;
}

// x0 (input) -> f1 -> x1 -> ... -> fN -> xN, every x kept; then backward ops b_N .. b_1, b_i
// reading x_i. All tensors 100 B, every op 1 ns.
TraceBuilder forward_backward_chain(std::uint32_t n) {
  TraceBuilder b;
  std::vector<std::uint32_t> x{b.tensor(100, TensorRole::Input, "x0")};
  b.alloc(x[0]);
  for (std::uint32_t i = 1; i <= n; ++i) {
    x.push_back(b.tensor(100));
    const auto f = b.op("f", 1, {x[i - 1]}, {x[i]});
    b.alloc(x[i]).compute(f);
  }
  for (std::uint32_t i = n; i >= 1; --i) b.compute(b.op("b", 1, {x[i]}, {}));
  return b;
}

}  // namespace

TEST_CASE("chain of 16 ops at a sqrt(N) budget under LRU: hand-worked recompute count", "[remat]") {
  // Budget 500 B = x0 + s = 4 activations. Forward: each alloc from x5 on evicts the least
  // recently used activation (x_{i-4}): 12 evictions, x13..x16 stay. Backward hits x16..x13,
  // misses x12: rematerializing it re-runs f1..f12 (12 recomputes), each evicting the LRU
  // tensor (first the four already consumed, then x1, x2, ...), leaving x9..x12. Then misses at
  // x8 (8 recomputes) and x4 (4). Recomputes = sum over j of (N - j s) = 12 + 8 + 4 = 24;
  // forced evictions = 12 + 24 = 36; overhead (32 + 24) / 32 = 1.75 (under the 2x limit).
  const auto b = forward_backward_chain(16);
  auto p = dtr({{"heuristic", "lru"}});
  const Report r = replay_fungible(b.trace(), *p, 500);
  REQUIRE(r.status == RunStatus::Completed);
  CHECK(r.time.recomputes == 24);
  CHECK(r.time.recompute_time == SimTime{24});
  CHECK(r.counters.forced_evictions == 36);
  CHECK(r.time.op_time == SimTime{32});
  CHECK(r.time.recompute_overhead == Approx(1.75));
  CHECK(r.memory.peak_allocated.value == 500);
}

TEST_CASE("thrash limit and OOM are reported distinctly", "[remat]") {
  SECTION("thrash: the same chain with a 1.5x limit stops at the 17th recompute") {
    // Limit 1.5 => recompute time may reach 0.5 x 32 ns = 16 ns; the first miss costs 12, the
    // second stops as soon as the total passes 16: at recompute 17.
    const auto b = forward_backward_chain(16);
    auto p = dtr({{"heuristic", "lru"}, {"thrash_limit", 1.5}});
    const Report r = replay_fungible(b.trace(), *p, 500);
    CHECK(r.status == RunStatus::Thrashed);
    REQUIRE(r.thrash.has_value());
    CHECK_FALSE(r.oom.has_value());
    CHECK(r.time.recomputes == 17);
    CHECK(r.thrash->recompute_time == SimTime{17});
  }
  SECTION("oom: nothing evictable can make room") {
    const auto b = forward_backward_chain(4);
    auto p = dtr({{"heuristic", "lru"}});
    // 200 B: x0 (unevictable) + one activation. x2's allocation (before f2 runs, nothing
    // pinned) evicts x1; f2 then needs x1 back, but x2 has no producer yet and x0 is an input:
    // nothing can go, OOM while rematerializing x1.
    const Report r = replay_fungible(b.trace(), *p, 200);
    CHECK(r.status == RunStatus::OutOfMemory);
    REQUIRE(r.oom.has_value());
    CHECK_FALSE(r.thrash.has_value());
    CHECK(r.oom->tensor_file_id == 1);
    CHECK(r.counters.forced_evictions == 1);
  }
}

TEST_CASE("rematerialization is iterative: a chain of 100000 evicted ops", "[remat]") {
  // x_{i-1} is freed (eagerly evicted) after f_i, so after the forward pass only x0 and xN are
  // resident. A 200 B allocation (budget 300 B) evicts xN; reading it then re-runs f1..fN with
  // three tensors resident at a time: N recomputes, one forced eviction.
  constexpr std::uint32_t n = 100000;
  TraceBuilder b;
  std::vector<std::uint32_t> x{b.tensor(100, TensorRole::Input)};
  b.alloc(x[0]);
  for (std::uint32_t i = 1; i <= n; ++i) {
    x.push_back(b.tensor(100));
    b.alloc(x[i]).compute(b.op("f", 1, {x[i - 1]}, {x[i]}));
    if (i >= 2) b.free(x[i - 1]);
  }
  const auto z = b.tensor(200);
  b.alloc(z).compute(b.op("z", 1, {x[0]}, {z})).free(z);
  b.compute(b.op("use", 1, {x[n]}, {}));
  auto p = dtr({});
  EngineOptions o = options(300);
  o.paranoid = false;  // keep the test fast; residency checks stay on
  FungibleAllocator a(Bytes{300});
  Report r;
  run_engine(b.trace(), a, *p, o, r);
  REQUIRE(r.status == RunStatus::Completed);
  CHECK(r.time.recomputes == n);
  CHECK(r.counters.forced_evictions == 1);
  CHECK(r.memory.peak_allocated.value == 300);
}

TEST_CASE("Coop's window versus DTR's per-tensor loop on the motivating layout", "[remat]") {
  // Arena of 6 MiB: x0 (input, a barrier) and a..e of 1 MiB each fill it; then y needs 2 MiB.
  // Costs a 10, b 1, c 100, d 1, e 50 ns => at y's allocation (clock 162) the staleness is
  // a 152, b 151, c 51, d 50, e 1 and h = c / s (sizes equal): b 0.0066 < d 0.02 < a 0.066 <
  // c 1.96 < e 50.
  //  * DTR evicts b: one 1 MiB hole, fails; evicts d: two non-adjacent holes, still fails;
  //    evicts a: the hole [a b] fits. Reading a..e afterwards recomputes a, b, d: 3, 12 ns.
  //  * Coop's window: the cheapest contiguous 2 MiB is {a, b} (0.072 against b+c 1.97, c+d
  //    1.98, d+e 50): it evicts exactly a and b; 2 recomputes, 11 ns.
  // (With op-guided allocation the activations sit in reverse order, cheap ones at the high
  // end, and the same window {b, a} is chosen.)
  TraceBuilder b;
  const auto x0 = b.tensor(kMiB, TensorRole::Input, "x0");
  b.alloc(x0);
  std::vector<std::uint32_t> act;
  for (const int cost : {10, 1, 100, 1, 50}) {
    act.push_back(b.tensor(kMiB));
    b.alloc(act.back()).compute(b.op("op", cost, {x0}, {act.back()}));
  }
  const auto y = b.tensor(2 * kMiB);
  b.alloc(y).compute(b.op("op_y", 5, {x0}, {y})).free(y);
  b.compute(b.op("use", 0, act, {}));

  auto run = [&](Policy& p) {
    BestFitAllocator a(Bytes{6 * kMiB});
    Report r;
    run_engine(b.trace(), a, p, options(6 * kMiB), r);
    return r;
  };
  auto d = dtr({});
  const Report rd = run(*d);
  REQUIRE(rd.status == RunStatus::Completed);
  CHECK(rd.counters.forced_evictions == 3);
  CHECK(rd.counters.alloc_failures == 1);
  CHECK(rd.time.recomputes == 3);
  CHECK(rd.time.recompute_time == SimTime{12});

  for (const bool guided : {false, true}) {
    auto c = coop({{"op_guided_allocation", guided}});
    const Report rc = run(*c);
    REQUIRE(rc.status == RunStatus::Completed);
    CHECK(rc.counters.forced_evictions == 2);
    CHECK(rc.time.recomputes == 2);
    CHECK(rc.time.recompute_time == SimTime{11});
  }
}

TEST_CASE("in-place updates: the old value stays recomputable", "[remat]") {
  // x1 = op1(x0), x2 = op2(x1), x3 = op3(x2), then relu_(x2) in place; x1 freed. Fungible
  // 500 B, tensors 100 B, LRU. z (300 B) evicts x3 (last used at clock 60; x2's new value was
  // computed at 67). Reading x3 re-runs op3, which needs the *old* x2 (before relu), so op2
  // and op1 run again: recomputes 3, recompute time 10 + 20 + 30 = 60 ns (relu's 7 ns is never
  // repeated). Rematerialized x1 and the old x2 are released and evicted right after use.
  //  * recomputable in-place: relu keeps x2's block: allocs x0 x1 x2 x3 z + 3 = 8; eager
  //    evictions: free x1, free z, x1 and old x2 after their use = 4;
  //  * copy-on-write: relu writes a new block (9 allocs) and releases the old value (5 eager).
  TraceBuilder b;
  const auto x0 = b.tensor(100, TensorRole::Input), x1 = b.tensor(100), x2 = b.tensor(100), x3 = b.tensor(100);
  const auto z = b.tensor(300);
  const auto relu = b.op("relu_", 7, {x2}, {});
  b.mutates(relu, x2);
  b.alloc(x0).alloc(x1).compute(b.op("op1", 10, {x0}, {x1}));
  b.alloc(x2).compute(b.op("op2", 20, {x1}, {x2}));
  b.alloc(x3).compute(b.op("op3", 30, {x2}, {x3}));
  b.compute(relu).free(x1);
  b.alloc(z).compute(b.op("opz", 1, {x0}, {z})).free(z);
  b.compute(b.op("use", 1, {x3}, {}));

  for (const std::string mode : {"recomputable", "copy-on-write"}) {
    auto p = dtr({{"heuristic", "lru"}, {"inplace", mode}});
    const Report r = replay_fungible(b.trace(), *p, 500);
    INFO(mode);
    REQUIRE(r.status == RunStatus::Completed);
    CHECK(r.time.recomputes == 3);
    CHECK(r.time.recompute_time == SimTime{60});
    CHECK(r.counters.forced_evictions == 1);
    const bool fbip = mode == "recomputable";
    CHECK(r.counters.allocs == (fbip ? 8U : 9U));
    CHECK(r.counters.eager_evictions == (fbip ? 4U : 5U));
  }
}

TEST_CASE("multi-output ops recompute every output", "[remat]") {
  // m: x0 -> p, q (100 B each, 10 ns). LRU ties go to the lower address (p, allocated first).
  TraceBuilder b;
  const auto x0 = b.tensor(100, TensorRole::Input), p = b.tensor(100), q = b.tensor(100);
  const auto z = b.tensor(300);
  b.alloc(x0).alloc(p).alloc(q).compute(b.op("m", 10, {x0}, {p, q}));
  b.alloc(z).compute(b.op("opz", 1, {x0}, {z})).free(z);
  b.compute(b.op("use", 1, {p}, {}));
  SECTION("both evicted: one recompute brings both back") {
    // 400 B: z needs 200 B more => p and q are evicted; use(p) re-runs m: 2 allocations.
    auto pol = dtr({{"heuristic", "lru"}});
    const Report r = replay_fungible(b.trace(), *pol, 400);
    REQUIRE(r.status == RunStatus::Completed);
    CHECK(r.counters.forced_evictions == 2);
    CHECK(r.time.recomputes == 1);
    CHECK(r.counters.allocs == 6);
  }
  SECTION("a resident sibling gets a temporary copy") {
    // 550 B: z needs 50 B more => only p goes. Re-running m writes p and a second q, dropped.
    auto pol = dtr({{"heuristic", "lru"}});
    const Report r = replay_fungible(b.trace(), *pol, 550);
    REQUIRE(r.status == RunStatus::Completed);
    CHECK(r.counters.forced_evictions == 1);
    CHECK(r.time.recomputes == 1);
    CHECK(r.counters.allocs == 6);
    CHECK(r.memory.final_allocated.value == 300);  // x0, p, q
  }
}

TEST_CASE("a view read rematerializes its base storage", "[remat]") {
  TraceBuilder b;
  const auto x0 = b.tensor(100, TensorRole::Input), base = b.tensor(100), z = b.tensor(200);
  b.alloc(x0).alloc(base).compute(b.op("producer", 5, {x0}, {base}));
  const auto v = b.view(base);
  auto& tr = b.mutable_trace();
  const auto view_op = b.op("slice", 0, {base}, {v});
  tr.ops[view_op].views.emplace_back(TensorId{v}, TensorId{base});
  b.compute(view_op);
  b.alloc(z).compute(b.op("opz", 1, {x0}, {z})).free(z);  // 300 B budget: evicts base
  b.access(v);
  auto p = dtr({});
  const Report r = replay_fungible(b.trace(), *p, 300);
  REQUIRE(r.status == RunStatus::Completed);
  CHECK(r.counters.forced_evictions == 1);
  CHECK(r.time.recomputes == 1);
  CHECK(r.time.recompute_time == SimTime{5});
}

TEST_CASE("unevictable: random outputs, parameters and pinned inputs", "[remat]") {
  // r comes from a random op (100 ns of cost, so h would pick it first), s from a normal one.
  TraceBuilder b;
  const auto w = b.tensor(100, TensorRole::Parameter), r = b.tensor(100), s = b.tensor(100), z = b.tensor(100);
  const auto dropout = b.op("dropout", 1, {w}, {r});
  b.random(dropout);
  b.alloc(w).alloc(r).compute(dropout).alloc(s).compute(b.op("op", 100, {w}, {s}));
  b.alloc(z).compute(b.op("opz", 1, {r}, {z}));
  SECTION("the normal tensor is evicted instead") {
    auto p = dtr({{"heuristic", "dtr-local"}});
    const Report rep = replay_fungible(b.trace(), *p, 300);
    REQUIRE(rep.status == RunStatus::Completed);
    CHECK(rep.counters.forced_evictions == 1);
  }
  SECTION("with only unevictable tensors left, the run is out of memory") {
    auto p = dtr({{"heuristic", "dtr-local"}});
    const Report rep = replay_fungible(b.trace(), *p, 200);
    CHECK(rep.status == RunStatus::OutOfMemory);
  }
}

TEST_CASE("deallocation modes: eager, banish, no-dealloc", "[remat]") {
  // a = f(x0), c = g(a), a freed, then z = h(x0); 300 B, 100 B tensors.
  auto trace_with = [](std::uint64_t z_bytes) {
    TraceBuilder b;
    const auto x0 = b.tensor(100, TensorRole::Input), a = b.tensor(100), c = b.tensor(100), z = b.tensor(z_bytes);
    b.alloc(x0).alloc(a).compute(b.op("f", 1, {x0}, {a}));
    b.alloc(c).compute(b.op("g", 1, {a}, {c})).free(a);
    b.alloc(z).compute(b.op("h", 1, {x0}, {z}));
    return b;
  };
  const auto small = trace_with(100);
  SECTION("eager: a is evicted on release; z fits without forcing anything") {
    auto p = dtr({{"dealloc", "eager"}});
    const Report r = replay_fungible(small.trace(), *p, 300);
    REQUIRE(r.status == RunStatus::Completed);
    CHECK(r.counters.eager_evictions == 1);
    CHECK(r.counters.forced_evictions == 0);
  }
  SECTION("no-dealloc: a stays until the heuristic evicts it") {
    // LRU: a (last read by g at clock 2) and c (computed at 2) tie; a has the lower address.
    auto p = dtr({{"dealloc", "no-dealloc"}, {"heuristic", "lru"}});
    const Report r = replay_fungible(small.trace(), *p, 300);
    REQUIRE(r.status == RunStatus::Completed);
    CHECK(r.counters.eager_evictions == 0);
    CHECK(r.counters.forced_evictions == 1);
  }
  SECTION("banish: a is freed for good and c, which needs it, is locked") {
    // z of 200 B needs c's memory. Under eager eviction c can go (a stays recomputable from
    // x0); under banishing c cannot be recomputed any more: out of memory.
    const auto big = trace_with(200);
    auto eager = dtr({{"dealloc", "eager"}});
    const Report re = replay_fungible(big.trace(), *eager, 300);
    CHECK(re.status == RunStatus::Completed);
    CHECK(re.counters.forced_evictions == 1);
    auto banish = dtr({{"dealloc", "banish"}});
    const Report rb = replay_fungible(big.trace(), *banish, 300);
    CHECK(rb.status == RunStatus::OutOfMemory);
    CHECK(rb.counters.eager_evictions == 0);
  }
}

TEST_CASE("op-guided allocation puts cheap tensors at the high end of the hole", "[remat][coop]") {
  // bestfit arena 4 MiB: x0 at 0; a convolution output (expensive) takes the low end of the
  // hole [1, 4) MiB; a relu output (cheap) its high end [3, 4). Recorded addresses check it.
  TraceBuilder b;
  const auto x0 = b.tensor(kMiB, TensorRole::Input), conv = b.tensor(kMiB), relu = b.tensor(kMiB);
  b.alloc(x0).alloc(conv).compute(b.op("aten::convolution", 5, {x0}, {conv}));
  b.alloc(relu).compute(b.op("aten::relu", 1, {conv}, {relu}));
  auto& ev = b.mutable_trace().events;
  ev[1].addr = kMiB;
  ev[3].addr = 3 * kMiB;
  for (const bool guided : {true, false}) {
    auto p = coop({{"op_guided_allocation", guided}});
    BestFitAllocator a(Bytes{4 * kMiB});
    Report r;
    run_engine(b.trace(), a, *p, options(4 * kMiB), r);
    CHECK(r.addresses.checked == 2);
    CHECK(r.addresses.mismatches == (guided ? 0U : 1U));
  }
  CHECK(CoopPolicy::expensive_op_name("aten::convolution_backward"));
  CHECK(CoopPolicy::expensive_op_name("aten::addmm.out"));
  CHECK(CoopPolicy::expensive_op_name("conv2d"));
  CHECK_FALSE(CoopPolicy::expensive_op_name("aten::relu_"));
  CHECK_FALSE(CoopPolicy::expensive_op_name("aten::add.Tensor"));
}

}  // namespace remat_test
