// `smartpool` runtime: device allocation before the switch point, the pool from the planned
// iteration on, reuse in later iterations, backup copies of cross-iteration blocks, fallback on
// mismatches, refused pools, tensor vs index matching, the engine path and the bundled default
// trace, with check_invariants() after every step.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "alloc/smartpool.hpp"
#include "coopsim/engine/engine.hpp"
#include "coopsim/base/error.hpp"
#include "coopsim/policy/keep.hpp"
#include "coopsim/model/report.hpp"
#include "coopsim/model/trace.hpp"
#include "coopsim/formats/trace_file.hpp"
#include "smartpool_test_support.hpp"

using namespace coopsim;
using namespace coopsim::test;

TEST_CASE("smartpool: device allocation before the switch, the pool from the planned iteration on", "[smartpool]") {
  const Trace t = cross_instance();
  SmartPoolAllocator a(Bytes{1 << 20});
  a.prepare(t);
  a.check_invariants();
  const auto placed = replay(a, t);
  // W, a, g, h: exact-size cudaMallocs at 512-aligned addresses; the pool is the fifth.
  const std::uint64_t P = kDeviceBase + 2560;
  REQUIRE(a.pool_address() == P);
  const std::uint64_t D = kDeviceBase;
  const std::vector<std::uint64_t> addrs{D, D + 1024, D + 1536, D + 2048, P + 192, P + 292, P, P + 64};
  REQUIRE(placed.size() == addrs.size());
  for (std::size_t i = 0; i < addrs.size(); ++i) {
    CHECK(placed[i].addr == addrs[i]);
    CHECK(placed[i].size == placed[i].requested);
  }
  const auto& f = a.figures();
  CHECK(f.pool_created);
  CHECK(f.pool_size.value == 342);
  CHECK(f.pool_allocs == 4);
  CHECK(f.fallback_allocs == 4);
  CHECK(f.fallback_bytes.value == 1196);
  CHECK(f.mismatched_allocs == 0);
  CHECK(f.peak_fallback_live.value == 1196);
  CHECK(f.fallback_live.value == 1000);  // W
  const auto s = a.stats();
  CHECK(s.reserved.value == 1000 + 342);
  CHECK(s.allocated.value == 1000 + 64 + 32);  // W, g, h live at the end
  CHECK(s.device_mallocs == 5);
  CHECK(s.device_frees == 3);  // a (iteration 0), g, h (freed in iteration 1)
  CHECK(s.segments == 2);
  CHECK(s.free_ranges == 1);  // [96, 342) of the pool
  const auto r = a.ranges();
  REQUIRE(r.size() == 4);
  CHECK((r[0].addr == kDeviceBase && !r[0].free && r[0].size.value == 1000));
  CHECK((r[1].addr == P && !r[1].free && r[1].size.value == 64 && r[1].segment == 4));
  CHECK((r[2].addr == P + 64 && !r[2].free && r[2].size.value == 32));
  CHECK((r[3].addr == P + 96 && r[3].free && r[3].size.value == 246));
}

TEST_CASE("smartpool: the engine plans before the replay", "[smartpool][engine]") {
  // Iteration 0 peaks at W + a + g + h = 1196 bytes on the device; iteration 1 starts with W
  // alone (1000) and takes the 342-byte pool: reserved peaks at 1342, while at most
  // W + a + b = 1150 is allocated.
  const Trace t = cross_instance();
  SmartPoolAllocator alloc(Bytes{1 << 20});
  KeepPolicy keep;
  EngineOptions o;
  o.budget = Bytes{1 << 20};
  o.paranoid = true;
  Report r;
  run_engine(t, alloc, keep, o, r);
  CHECK(r.status == RunStatus::Completed);
  CHECK(alloc.figures().pool_created);
  CHECK(r.memory.peak_reserved.value == 1342);
  CHECK(r.memory.peak_requested.value == 1196);
  CHECK(r.memory.peak_allocated.value == 1196);
  CHECK(r.memory.allocated_at_reserved_peak.value == 1150);
  CHECK(r.counters.device_mallocs == 5);
  CHECK(r.counters.device_frees == 3);
}

TEST_CASE("smartpool: a later iteration reuses the planned slots", "[smartpool]") {
  const Trace t = cross_instance(1);  // iterations 0, 1, 2; iteration 2 repeats iteration 1
  for (const auto match : {SmartPoolMatch::Tensor, SmartPoolMatch::Index}) {
    SmartPoolOptions o;
    o.match = match;
    SmartPoolAllocator a(Bytes{1 << 20}, o);
    a.prepare(t);
    const auto placed = replay(a, t);
    REQUIRE(placed.size() == 12);
    for (std::size_t i = 4; i < 8; ++i) CHECK(placed[i + 4].addr == placed[i].addr);
    CHECK(a.figures().pool_allocs == 8);
    CHECK(a.figures().mismatched_allocs == 0);
    CHECK(a.stats().reserved.value == 1000 + 342);
  }
}

TEST_CASE("smartpool: a cross-iteration block still alive takes its backup copy", "[smartpool]") {
  // Fresh tensor ids every iteration (as some importers write them): x_k (100) and g_k (64);
  // g_{k-1} is freed after g_k is allocated. Plan of iteration 1: g1 cross -> 0, X = 64;
  // x1 -> 128; pool 228. Index matching: x -> slot 0, g -> slot 1 every iteration.
  TraceBuilder t;
  std::vector<std::uint32_t> x, g;
  for (int k = 0; k < 4; ++k) {
    x.push_back(t.tensor(100));
    g.push_back(t.tensor(64));
  }
  t.iteration(0).alloc(x[0]).alloc(g[0]).free(x[0]);
  for (std::uint32_t k = 1; k < 4; ++k) t.iteration(k).alloc(x[k]).alloc(g[k]).free(g[k - 1]).free(x[k]);
  SmartPoolOptions o;
  o.match = SmartPoolMatch::Index;
  SmartPoolAllocator a(Bytes{1 << 20}, o);
  a.prepare(t.trace());
  REQUIRE(a.plan()->pool_size.value == 228);
  const auto placed = replay(a, t.trace());
  const std::uint64_t P = kDeviceBase + 1024;  // after x0 (100 -> 512) and g0 (64 -> 512)
  REQUIRE(a.pool_address() == P);
  //          x0, g0 (device)  x1       g1 primary  x2       g2 backup   x3       g3 primary
  const std::vector<std::uint64_t> addrs{kDeviceBase, kDeviceBase + 512, P + 128, P, P + 128, P + 64, P + 128, P};
  REQUIRE(placed.size() == addrs.size());
  for (std::size_t i = 0; i < addrs.size(); ++i) CHECK(placed[i].addr == addrs[i]);

  // Matching by tensor id finds no slot for g2, g3, x2, x3 (new ids): they fall back.
  SmartPoolAllocator by_tensor(Bytes{1 << 20});
  by_tensor.prepare(t.trace());
  replay(by_tensor, t.trace());
  CHECK(by_tensor.figures().pool_allocs == 2);
  CHECK(by_tensor.figures().mismatched_allocs == 4);
}

TEST_CASE("smartpool: requests that do not match the plan fall back to the device", "[smartpool]") {
  const Trace t = cross_instance();
  for (const auto match : {SmartPoolMatch::Tensor, SmartPoolMatch::Index}) {
    SmartPoolOptions o;
    o.match = match;
    SmartPoolAllocator a(Bytes{1 << 20}, o);
    a.prepare(t);
    std::vector<Block> held;
    for (std::uint32_t k : {0U, 1U, 3U, 4U}) {  // W, a, g, h: before the switch
      held.push_back(*a.allocate(AllocRequest{t.tensors[k].size, 0, TensorId{k}}));
      a.check_invariants();
    }
    CHECK_FALSE(a.pool_address().has_value());
    // Slot 0 is a (100 bytes); asking 101 for tensor a creates the pool but gets the device.
    const auto wrong = a.allocate(AllocRequest{Bytes{101}, 0, TensorId{1}});
    a.check_invariants();
    REQUIRE(wrong.has_value());
    REQUIRE(a.pool_address().has_value());
    CHECK(wrong->addr > *a.pool_address());
    CHECK(a.figures().mismatched_allocs == 1);
    CHECK(a.figures().mismatched_bytes.value == 101);
    a.deallocate(*wrong);
    a.check_invariants();
    CHECK(a.stats().reserved.value == 1000 + 100 + 64 + 32 + 342);
  }
}

TEST_CASE("smartpool: a slot whose memory is still in use falls back", "[smartpool]") {
  // Planned: a [0,2) and b [2,4) do not overlap in time, so both get offset 0. Replayed with b
  // allocated while a is alive, b's range is taken: b goes to the device (SINGA would hand out
  // overlapping memory). A second request for a while a is alive (normal slot taken) falls back.
  TraceBuilder t;
  const auto a = t.tensor(100), b = t.tensor(100);
  t.alloc(a).free(a).alloc(b).free(b);
  SmartPoolAllocator alloc(Bytes{1 << 20});
  alloc.prepare(t.trace());
  REQUIRE(offsets(*alloc.plan()) == std::vector<std::uint64_t>{0, 0});
  const auto ba = alloc.allocate(AllocRequest{Bytes{100}, 0, TensorId{a}});
  alloc.check_invariants();
  const auto bb = alloc.allocate(AllocRequest{Bytes{100}, 0, TensorId{b}});
  alloc.check_invariants();
  const auto again = alloc.allocate(AllocRequest{Bytes{100}, 0, TensorId{a}});
  alloc.check_invariants();
  REQUIRE((ba && bb && again));
  CHECK(ba->addr == *alloc.pool_address());
  CHECK(bb->addr != ba->addr);
  CHECK(again->addr != ba->addr);
  CHECK(alloc.figures().pool_allocs == 1);
  CHECK(alloc.figures().mismatched_allocs == 2);
  alloc.deallocate(*ba);
  alloc.check_invariants();
  // Now free: b gets its slot.
  const auto b2 = alloc.allocate(AllocRequest{Bytes{100}, 0, TensorId{b}});
  alloc.check_invariants();
  CHECK(b2->addr == *alloc.pool_address());
}

TEST_CASE("smartpool: an extra allocation shifts index matching but not tensor matching", "[smartpool]") {
  // Iterations 1 and 2 repeat; in iteration 2 an eviction policy's extra allocation (a swap-in
  // of W after a swap-out) comes first. Index matching then compares every request of
  // iteration 2 with the previous slot: all fall back. Tensor matching still finds them.
  const Trace t = cross_instance(1);
  for (const auto match : {SmartPoolMatch::Tensor, SmartPoolMatch::Index}) {
    SmartPoolOptions o;
    o.match = match;
    SmartPoolAllocator a(Bytes{1 << 20}, o);
    a.prepare(t);
    std::map<std::uint32_t, Block> live;
    bool extra_done = false;
    for (const TraceEvent& e : t.events) {
      if (e.kind == EventKind::Iteration && e.iteration_index() == 2) {
        a.deallocate(live.at(0));                                          // swap-out of W ...
        live[0] = *a.allocate(AllocRequest{Bytes{1000}, 0, TensorId{0}});  // ... and back in
        extra_done = true;
      } else if (e.kind == EventKind::Alloc) {
        live[index_of(e.tensor())] = *a.allocate(AllocRequest{t.tensor(e.tensor()).size, 0, e.tensor()});
      } else if (e.kind == EventKind::Free) {
        a.deallocate(live.at(index_of(e.tensor())));
        live.erase(index_of(e.tensor()));
      }
      a.check_invariants();
    }
    REQUIRE(extra_done);
    if (match == SmartPoolMatch::Tensor) {
      CHECK(a.figures().pool_allocs == 8);
      CHECK(a.figures().mismatched_allocs == 1);  // W itself: not in the plan
    } else {
      CHECK(a.figures().pool_allocs == 4);
      CHECK(a.figures().mismatched_allocs == 5);
    }
  }
}

TEST_CASE("smartpool: a pool that does not fit the capacity is not created", "[smartpool]") {
  // Iteration 0 peaks at W + a + g + h = 1196 <= 1300; at the switch W (1000) + pool (342) would
  // be 1342 > 1300: the pool is refused and iteration 1 runs on device allocations.
  const Trace t = cross_instance();
  SmartPoolAllocator a(Bytes{1300});
  a.prepare(t);
  replay(a, t);
  CHECK(a.figures().pool_refused);
  CHECK_FALSE(a.figures().pool_created);
  CHECK_FALSE(a.pool_address().has_value());
  CHECK(a.figures().pool_allocs == 0);
  CHECK(a.figures().mismatched_allocs == 4);
  CHECK(a.figures().peak_fallback_live.value == 1196);
  CHECK(a.stats().reserved.value == 1000 + 64 + 32);
}

TEST_CASE("smartpool: without prepare() every request is a device allocation", "[smartpool]") {
  SmartPoolAllocator a(Bytes{4096});
  const auto x = a.allocate(AllocRequest{Bytes{1000}});
  const auto y = a.allocate(AllocRequest{Bytes{3000}});
  a.check_invariants();
  REQUIRE((x && y));
  CHECK(x->addr == kDeviceBase);
  CHECK(y->addr == kDeviceBase + 1024);
  CHECK_FALSE(a.allocate(AllocRequest{Bytes{97}}).has_value());  // 4000 + 97 > 4096
  CHECK(a.stats().reserved.value == 4000);
  a.deallocate(*x);
  a.check_invariants();
  CHECK(a.stats().reserved.value == 3000);
  CHECK(a.stats().device_frees == 1);
  CHECK_FALSE(a.figures().planned);
  Block bogus = *y;
  bogus.size = Bytes{2999};
  CHECK_THROWS_AS(a.deallocate(bogus), InvariantError);
  CHECK_THROWS_AS(a.prepare(cross_instance()), InvariantError);  // after allocations
}

TEST_CASE("smartpool: the bundled default trace switches at iteration 1 and reuses it in 2", "[smartpool]") {
  const Trace t = load_trace("traces/default.jsonl.gz");
  SmartPoolAllocator a(Bytes{16ULL << 30});
  a.prepare(t);
  const SmartPoolPlan& p = *a.plan();
  CHECK(p.iteration == 1);
  // The pool is at least the largest sum of planned blocks alive together.
  std::vector<std::pair<std::uint64_t, std::int64_t>> points;
  for (const auto& s : p.slots) {
    points.emplace_back(s.r, static_cast<std::int64_t>(s.size.value));
    points.emplace_back(s.d, -static_cast<std::int64_t>(s.size.value));
  }
  std::sort(points.begin(), points.end());
  std::int64_t live = 0, max_live = 0;
  for (const auto& [time, delta] : points) max_live = std::max(max_live, live += delta);
  CHECK(p.pool_size.value >= static_cast<std::uint64_t>(max_live));
  replay(a, t);
  const TraceSummary sum = summarize(t);
  const auto& f = a.figures();
  CHECK(f.pool_created);
  CHECK(f.mismatched_allocs == 0);
  CHECK(f.pool_allocs == 2 * p.slots.size());  // iterations 1 and 2
  CHECK(f.pool_allocs + f.fallback_allocs == sum.allocs);
}
