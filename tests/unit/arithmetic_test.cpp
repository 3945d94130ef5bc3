// Time and byte arithmetic never wraps (issue 15, class 2; docs/limits.md, "Arithmetic"): a run
// whose clock would pass 2^63 - 1 ns stops with an error naming the event, under every engine
// (swap, recompute, simrd's replay); a very slow link gives a huge copy time or that error,
// never zero; byte sums saturate; SmartPool runs out of memory like every other model when its
// live blocks pass 2^63 bytes. Every trace is built here.
#include <catch2/catch.hpp>

#include <limits>
#include <string>

#include "alloc/fungible.hpp"
#include "coopsim/alloc/allocator.hpp"
#include "coopsim/sim/builtin.hpp"
#include "coopsim/engine/engine.hpp"
#include "coopsim/base/error.hpp"
#include "coopsim/model/link.hpp"
#include "coopsim/sim/simulation.hpp"
#include "trace_builder.hpp"
#include "audited_run.hpp"

using namespace coopsim;
using coopsim::test::TraceBuilder;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace arithmetic_test {

namespace {

constexpr std::int64_t kMaxNs = std::numeric_limits<std::int64_t>::max();
const std::string kPasses = "simulated time passes 2^63 - 1 ns (about 292 years): ";

Report simulate(const Trace& t, const nlohmann::json& doc) {
  SimConfig cfg;
  cfg.doc = doc;
  return test::audited_run(cfg, t);
}

// Op 0 (`long_ns`) writes x (1 MiB); three times a 1 MiB temporary is made (evicting x at a
// 1.5 MiB budget, which holds one of them) and freed, then x is read: three recomputations.
TraceBuilder recompute_three_times(std::int64_t long_ns) {
  TraceBuilder b;
  const auto x = b.tensor(1 << 20);
  const auto p = b.op("p", long_ns, {}, {x});
  b.alloc(x).compute(p);
  for (int k = 0; k < 3; ++k) {
    const auto t = b.tensor(1 << 20);
    const auto q = b.op("q", 1, {}, {t});
    const auto r = b.op("r", 1, {x}, {});
    b.alloc(t).compute(q).free(t).compute(r);
  }
  return b;
}

nlohmann::json remat_config(const std::string& policy, bool thrash_limit) {
  nlohmann::json doc = {{"allocator", "bestfit"}, {"policy", policy}, {"budget", "1572864"}};
  if (!thrash_limit) doc["params"] = {{policy, {{"thrash_limit", 0}}}};
  return doc;
}

// Swaps out the lowest-index resident tensor not in use, one per failed allocation.
class SwapLowest final : public Policy {
 public:
  std::vector<Action> on_alloc_failure(const AllocRequest&, const MemoryView& v) override {
    for (std::uint32_t t = 0; t < v.trace().tensors.size(); ++t)
      if (v.residency(TensorId{t}) == Residency::Resident && !v.pinned(TensorId{t}))
        return {{Action::Kind::SwapOut, TensorId{t}}};
    return {};
  }
};

LinkModel link_at(double gbps) {
  return make_link(Params("link", nlohmann::json{{"d2h_gbps", gbps}, {"h2d_gbps", gbps}}, link_param_docs()));
}

// A 400-byte budget: b's allocation swaps a out, reading a again swaps b out and a back in.
Report swap_run(const LinkModel& link) {
  TraceBuilder b;
  const auto a = b.tensor(400), c = b.tensor(400);
  const auto f = b.op("f", 100, {}, {a});
  const auto g = b.op("g", 100, {}, {c});
  b.alloc(a).compute(f).alloc(c).compute(g).access(a);
  FungibleAllocator alloc(Bytes{400});
  SwapLowest policy;
  EngineOptions o;
  o.budget = Bytes{400};
  o.link = link;
  Report r;
  run_engine(b.trace(), alloc, policy, o, r);
  return r;
}

}  // namespace

TEST_CASE("arithmetic: sums of bytes saturate, sums of times are checked", "[arithmetic]") {
  constexpr std::uint64_t kMaxB = std::numeric_limits<std::uint64_t>::max();
  CHECK((Bytes{kMaxB - 1} + Bytes{5}).value == kMaxB);
  Bytes total{std::uint64_t{1} << 63};
  total += Bytes{std::uint64_t{1} << 63};
  CHECK(total.value == kMaxB);
  CHECK((Bytes{40} + Bytes{2}).value == 42);
  CHECK(checked_add(SimTime{kMaxNs - 1}, SimTime{1}) == SimTime{kMaxNs});
  CHECK_FALSE(checked_add(SimTime{kMaxNs - 1}, SimTime{2}).has_value());
  CHECK(sat_add(SimTime{kMaxNs - 1}, SimTime{2}) == SimTime::max());
}

TEST_CASE("arithmetic: an op of 6e18 ns recomputed stops the run instead of wrapping the clock", "[arithmetic]") {
  // The first recomputation already takes the clock to 1.2e19 ns. Before, every recompute
  // policy reported "completed" with a wrapped recompute time of -4.5e17 ns.
  const auto b = recompute_three_times(6'000'000'000'000'000'000);
  const std::string expected =
      "<builder>: event 5: " + kPasses + "recomputing op 0 (6000000000000000000 ns) at 6000000000000000001 ns";
  for (const char* policy : {"dtr", "dte", "coop"}) {
    INFO(policy);
    CHECK_THROWS_WITH(simulate(b.trace(), remat_config(policy, false)), expected);
    CHECK_THROWS_WITH(simulate(b.trace(), remat_config(policy, true)), expected);
  }
  nlohmann::json simrd = remat_config("dtr", false);
  simrd["params"]["dtr"]["compat"] = "simrd";
  CHECK_THROWS_WITH(
      simulate(b.trace(), simrd),
      "<builder>: event 5: " + kPasses + "running an op of 6000000000000000000 ns at 6000000000000000001 ns");
}

TEST_CASE("arithmetic: an op of 2e18 ns recomputed three times fits: exact times", "[arithmetic]") {
  const auto b = recompute_three_times(2'000'000'000'000'000'000);
  for (const char* policy : {"dtr", "dte", "coop"}) {
    INFO(policy);
    const Report r = simulate(b.trace(), remat_config(policy, false));
    REQUIRE(r.status == RunStatus::Completed);
    CHECK(r.time.recomputes == 3);
    CHECK(r.time.recompute_time.count() == 6'000'000'000'000'000'000);
    CHECK(r.time.simulated.count() == 8'000'000'000'000'000'006);
    CHECK(r.time.op_time.count() == 2'000'000'000'000'000'006);
    // The default limit (2x the op time) stops it as thrashing at the second recomputation.
    const Report t = simulate(b.trace(), remat_config(policy, true));
    CHECK(t.status == RunStatus::Thrashed);
  }
}

TEST_CASE("arithmetic: ops whose durations add past 2^63 - 1 ns stop the swap engine", "[arithmetic]") {
  TraceBuilder b;
  const auto x = b.tensor(64), y = b.tensor(64);
  const auto f = b.op("f", 5'000'000'000'000'000'000, {}, {x});
  const auto g = b.op("g", 5'000'000'000'000'000'000, {x}, {y});
  b.alloc(x).compute(f).alloc(y).compute(g);
  const nlohmann::json doc = {{"allocator", "fungible"}, {"policy", "keep"}, {"budget", "1024"}};
  CHECK_THROWS_WITH(simulate(b.trace(), doc), "<builder>: event 3: " + kPasses +
                                                  "running op 1 (5000000000000000000 ns) at 5000000000000000000 ns");
  // A timestamp near the end of the range, then an op that would cross it.
  TraceBuilder late;
  const auto z = late.tensor(64);
  const auto h = late.op("h", 10, {}, {z});
  late.alloc(z, 0).compute(h, kMaxNs - 5);
  CHECK_THROWS_WITH(simulate(late.trace(), doc),
                    "<builder>: event 1: " + kPasses + "running op 0 (10 ns) at 9223372036854775802 ns");
}

TEST_CASE("arithmetic: copy times grow as the link slows, then stop the run; never zero", "[arithmetic]") {
  // 400 bytes at 1e-9 GB/s (1 byte per second) is 4e11 ns per copy, plus the preset's latency
  // (pcie4-x16: 47.2 us D2H, 9.7 us H2D).
  CHECK(link_at(1e-9).d2h.transfer_time(Bytes{400}).count() == 400'000'047'200);
  SimTime previous{0};
  for (const double gbps : {1e3, 1.0, 1e-3, 1e-9, 1e-12}) {
    INFO(gbps);
    const SimTime t = link_at(gbps).d2h.transfer_time(Bytes{400});
    CHECK(t >= previous);
    previous = t;
  }
  CHECK(link_at(1e-20).d2h.transfer_time(Bytes{400}) == SimTime::max());  // saturated, not wrapped
  // Stalls grow with the copy times: here two copies out and one in, back to back.
  const Report fast = swap_run(link_at(1.0)), slow = swap_run(link_at(1e-9));
  REQUIRE(slow.status == RunStatus::Completed);
  CHECK(slow.time.stall.count() == 1'200'000'104'100);
  CHECK(slow.time.stall > fast.time.stall);
  CHECK_THROWS_WITH(swap_run(link_at(1e-20)), "<builder>: event 2: " + kPasses +
                                                  "a D2H copy of 400 bytes taking 9223372036854775807 ns from 100 ns");
  // Bandwidths with no finite reciprocal are refused with the key.
  CHECK_THROWS_WITH(link_at(1e-320),
                    "link.d2h_gbps: must be a finite bandwidth in GB/s above 0 (0: the preset's), got 1e-320");
}

TEST_CASE("arithmetic: 1,024 live 2^53-byte tensors: SmartPool runs out of memory like every model", "[arithmetic]") {
  // 2^63 bytes live at once: no 64-bit pool holds them. SmartPool used to stop with "slot 1023
  // lies outside its band"; it now creates no pool and its device allocations run out at the
  // same point as every other allocator's.
  TraceBuilder b;
  std::vector<std::uint32_t> ts;
  for (int i = 0; i < 1024; ++i) {
    ts.push_back(b.tensor(std::uint64_t{1} << 53));
    b.alloc(ts.back());
  }
  for (const auto x : ts) b.free(x);
  for (const auto& a : builtin_components().allocators.entries()) {
    INFO(a.name);
    auto doc = [&](std::uint64_t budget) {
      return nlohmann::json{{"allocator", a.name}, {"policy", "keep"}, {"budget", std::to_string(budget)}};
    };
    const Report r = simulate(b.trace(), doc(std::uint64_t{1} << 62));
    REQUIRE(r.status == RunStatus::OutOfMemory);
    CHECK(r.oom->event == EventId{512});
    CHECK(r.oom->requested.value == std::uint64_t{1} << 53);
    // The whole 2^64 - 1 budget holds them all.
    const Report all = simulate(b.trace(), doc(std::numeric_limits<std::uint64_t>::max()));
    CHECK(all.status == RunStatus::Completed);
    CHECK(all.memory.peak_requested.value == std::uint64_t{1} << 63);
  }
}

TEST_CASE("arithmetic: simrd's replay compares bytes with the budget without wrapping", "[arithmetic]") {
  // The budget used to be cast to int64: 2^64 - 1 became -1 and every op ran out of memory.
  const auto b = recompute_three_times(1000);
  nlohmann::json doc = remat_config("dtr", false);
  doc["params"]["dtr"]["compat"] = "simrd";
  doc["budget"] = std::to_string(std::numeric_limits<std::uint64_t>::max());
  const Report all = simulate(b.trace(), doc);
  CHECK(all.status == RunStatus::Completed);
  CHECK(all.time.recomputes == 0);
  doc["budget"] = "1572864";
  const Report tight = simulate(b.trace(), doc);
  CHECK(tight.status == RunStatus::Completed);
  CHECK(tight.time.recomputes == 3);
}

TEST_CASE("arithmetic: the simulated device refuses to hand out addresses past 2^64", "[arithmetic]") {
  // cudaMalloc's model never reuses an address: four cycles of 2^62 bytes reach 2^64.
  DeviceMemory dev(Bytes{1ULL << 63});
  const std::uint64_t size = 1ULL << 62;
  for (int i = 0; i < 3; ++i) {
    const auto a = dev.malloc(Bytes{size});
    REQUIRE(a.has_value());
    CHECK(*a == DeviceMemory::kBaseAddress + static_cast<std::uint64_t>(i) * size);
    dev.free(*a, Bytes{size});
  }
  CHECK_THROWS_WITH(dev.malloc(Bytes{size}),
                    "the simulated device ran out of addresses: its cudaMalloc calls handed out more than 2^64 "
                    "bytes in this run (it never reuses an address); 4611686018427387904 more bytes requested at "
                    "0xc0007f0000000000");
  CHECK(dev.used().value == 0);
  CHECK(dev.mallocs() == 3);
}

}  // namespace arithmetic_test
