// The independent auditor on hand-built event logs (a correct swap-out/swap-in run
// passes, and each kind of broken log is caught with its exact message) and on the engine's own
// logs (every policy passes; damaged logs are caught).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "coopsim/sim/simulation.hpp"
#include "coopsim/audit/audit.hpp"
#include "coopsim/formats/trace_file.hpp"
#include "runlog_builder.hpp"
#include "audited_run.hpp"

using namespace coopsim;
using coopsim::test::TraceBuilder;
using Lines = std::vector<std::string>;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace audit_runlog_test {

namespace {

using Log = coopsim::test::LogBuilder;
using coopsim::test::chain_trace;
using coopsim::test::ref;

// The chain with b swapped out after g and back in for h (records numbered in comments).
// `drop` leaves out the records whose numbers it lists.
Log swapped_chain(std::vector<int> drop = {}) {
  Log l;
  auto keep = [&](int n) { return std::find(drop.begin(), drop.end(), n) == drop.end(); };
  l.alloc(0, ref(0, 0, 0x0));                                       // 0
  l.memory(0, 512, 1024);                                           // 1
  l.compute(1, 0, 0, 10, {}, {ref(0, 1, 0x0)});                     // 2
  l.alloc(2, ref(1, 0, 0x200));                                     // 3
  l.compute(3, 1, 10, 30, {ref(0, 1, 0x0)}, {ref(1, 1, 0x200)});    // 4
  if (keep(5)) l.swap_out(4, 30, 430, ref(1, 1, 0x200));            // 5
  l.free(4, ref(1, 0, 0x200));                                      // 6
  l.free(4, ref(0, 0, 0x0));                                        // 7
  l.alloc(5, ref(2, 0, 0x0));                                       // 8
  if (keep(9)) l.alloc(6, ref(1, 0, 0x200), /*fresh=*/false);       // 9
  if (keep(10)) l.swap_in(6, 430, 830, ref(1, 1, 0x200));           // 10
  l.stall(6, 30, 830);                                              // 11
  l.compute(6, 2, 830, 860, {ref(1, 1, 0x200)}, {ref(2, 1, 0x0)});  // 12
  l.free(7, ref(1, 0, 0x200));                                      // 13
  l.free(8, ref(2, 0, 0x0));                                        // 14
  return l;
}

}  // namespace

TEST_CASE("auditor: a correct swap-out / swap-in run passes", "[audit]") {
  const Trace t = chain_trace();
  const AuditResult r = audit_runlog(t, swapped_chain().log());
  CHECK(r.violations == Lines{});
  CHECK(r.ok());
  CHECK(r.records == 15);
  CHECK(r.reads == 3);  // g reads a, the swap-out reads b, h reads b
}

TEST_CASE("auditor: reading after a swap-out without the swap-in", "[audit]") {
  const Trace t = chain_trace();
  SECTION("the block was freed and nothing was placed again") {
    const auto r = audit_runlog(t, swapped_chain({9, 10}).log());
    CHECK(r.violations ==
          Lines{"record 10, event 6, tensor 1: compute of op 'h' reads version 1 at 0x200: the block was "
                "freed by record 6",
                "record 11, event 7, tensor 1: frees the block at 0x200 twice (first freed by record 6)"});
  }
  SECTION("a block was placed but the swap-in never came") {
    const auto r = audit_runlog(t, swapped_chain({10}).log());
    CHECK(r.violations == Lines{"record 11, event 6, tensor 1: compute of op 'h' reads version 1 at 0x200: the block "
                                "(placed by record 9) holds nothing yet"});
    CHECK(r.violation_count == 1);
  }
}

TEST_CASE("auditor: a swap-in without a swap-out", "[audit]") {
  const auto r = audit_runlog(chain_trace(), swapped_chain({5}).log());
  CHECK(r.violations ==
        Lines{"record 9, event 6, tensor 1: swap-in of version 1: no swap-out of the tensor came before it",
              "record 11, event 6, tensor 1: compute of op 'h' reads version 1 at 0x200: the block "
              "(placed by record 8) holds nothing yet"});
}

TEST_CASE("auditor: reading a stale version", "[audit]") {
  const Trace t = chain_trace();
  SECTION("the record names an old version") {
    Log l;
    l.alloc(0, ref(0, 0, 0x0)).compute(1, 0, 0, 10, {}, {ref(0, 1, 0x0)}).alloc(2, ref(1, 0, 0x200));
    l.compute(3, 1, 10, 30, {ref(0, 0, 0x0)}, {ref(1, 1, 0x200)});
    CHECK(audit_runlog(t, l.log()).violations ==
          Lines{"record 3, event 3, tensor 0: compute of op 'g' reads version 0, but the current version is 1"});
  }
  SECTION("the block holds an old version: f's write went elsewhere") {
    Log l(4096);
    l.alloc(0, ref(0, 0, 0x0)).alloc(0, ref(0, 0, 0x400), false).compute(1, 0, 0, 10, {}, {ref(0, 1, 0x400)});
    l.alloc(2, ref(1, 0, 0x200)).compute(3, 1, 10, 30, {ref(0, 1, 0x0)}, {ref(1, 1, 0x200)});
    CHECK(audit_runlog(t, l.log()).violations ==
          Lines{"record 4, event 3, tensor 0: compute of op 'g' reads version 1 at 0x0: the block holds version 0"});
  }
}

TEST_CASE("auditor: recomputes repeat their origin", "[audit]") {
  const Trace t = chain_trace();
  // a is evicted after g and recomputed (by f) into a new block, then read by an access.
  auto base = [&](std::uint32_t recompute_version, std::uint32_t read_version) {
    Log l;
    l.alloc(0, ref(0, 0, 0x0)).compute(1, 0, 0, 10, {}, {ref(0, 1, 0x0)});                     // 0, 1
    l.alloc(2, ref(1, 0, 0x200)).compute(3, 1, 10, 30, {ref(0, 1, 0x0)}, {ref(1, 1, 0x200)});  // 2, 3
    l.evict(3, ref(0, 1, 0x0)).free(3, ref(0, 0, 0x0));                                        // 4, 5
    l.alloc(3, ref(0, 0, 0x0), false);                                                         // 6
    l.recompute(3, 0, 1, 30, 40, {}, {ref(0, recompute_version, 0x0)});                        // 7
    l.recompute(3, 1, 3, 40, 60, {ref(0, read_version, 0x0)}, {ref(1, 1, 0x200)});             // 8
    return l;
  };
  CHECK(audit_runlog(t, base(1, 1).log()).ok());
  CHECK(audit_runlog(t, base(1, 2).log()).violations ==
        Lines{"record 8, event 3, tensor 0: recompute of op 'g' reads version 2, but its origin (record 3) read "
              "version 1"});
  CHECK(audit_runlog(t, base(2, 1).log()).violations ==
        Lines{"record 7, event 3, tensor 0: recompute of op 'f' writes version 2, but its origin (record 1) wrote "
              "version 1"});
  SECTION("reading the evicted value before its recompute") {
    Log l;
    l.alloc(0, ref(0, 0, 0x0)).compute(1, 0, 0, 10, {}, {ref(0, 1, 0x0)});
    l.alloc(2, ref(1, 0, 0x200)).evict(2, ref(0, 1, 0x0));
    l.compute(3, 1, 10, 30, {ref(0, 1, 0x0)}, {ref(1, 1, 0x200)});
    CHECK(audit_runlog(t, l.log()).violations == Lines{"record 4, event 3, tensor 0: compute of op 'g' reads "
                                                          "version 1 at 0x0: the block was evicted by record 3"});
  }
  SECTION("an origin that is not a compute of the op") {
    Log l = base(1, 1);
    l.recompute(3, 2, 3, 60, 70, {}, {});
    CHECK(
        audit_runlog(t, l.log()).violations ==
        Lines{
            "record 9, event 3: recompute of op 'h' names origin record 3, which is not an earlier compute of the op"});
  }
}

TEST_CASE("auditor: overlapping blocks", "[audit]") {
  const Trace t = chain_trace();
  Log l;
  l.alloc(0, ref(0, 0, 0x0)).compute(1, 0, 0, 10, {}, {ref(0, 1, 0x0)}).alloc(2, ref(1, 0, 0x100));
  CHECK(audit_runlog(t, l.log()).violations == Lines{"record 2, event 2, tensor 1: block [0x100, 0x300) overlaps "
                                                        "the live block [0x0, 0x200) of tensor 0 (record 0)"});
  SECTION("addresses of an address-blind allocator are not a layout") {
    Log blind(1024, /*address_aware=*/false);
    blind.alloc(0, ref(0, 0, 0x0)).compute(1, 0, 0, 10, {}, {ref(0, 1, 0x0)}).alloc(2, ref(1, 0, 0x100));
    CHECK(audit_runlog(t, blind.log()).ok());
  }
}

TEST_CASE("auditor: the budget", "[audit]") {
  Log l(800);
  l.alloc(0, ref(0, 0, 0x0)).memory(0, 512, 800).alloc(2, ref(1, 0, 0x200)).memory(2, 1024, 2048);
  l.alloc(5, ref(2, 0, 0x400)).free(4, ref(0, 0, 0x0)).free(5, ref(2, 0, 0x400)).alloc(5, ref(2, 0, 0x0));
  CHECK(
      audit_runlog(chain_trace(), l.log()).violations ==
      Lines{"record 2, event 2, tensor 1: live blocks hold 1024 bytes after this allocation, over the budget of 800",
            "record 3, event 2: reserved 2048 bytes exceed the budget of 800",
            "record 7, event 5, tensor 2: live blocks hold 1024 bytes after this allocation, over the budget of 800"});
  Log m(4096);
  m.memory(0, 1024, 512);
  CHECK(audit_runlog(chain_trace(), m.log()).violations ==
        Lines{"record 0, event 0: allocated 1024 bytes exceed reserved 512"});
}

TEST_CASE("auditor: frees match allocations", "[audit]") {
  Log l;
  l.alloc(0, ref(0, 0, 0x0)).free(4, ref(0, 0, 0x0)).free(4, ref(0, 0, 0x0)).free(4, ref(1, 0, 0x200));
  CHECK(audit_runlog(chain_trace(), l.log()).violations ==
        Lines{"record 2, event 4, tensor 0: frees the block at 0x0 twice (first freed by record 1)",
              "record 3, event 4, tensor 1: frees 0x200, where no block is live"});
}

TEST_CASE("auditor: ops read and write exactly their tensors, in trace order", "[audit]") {
  const Trace t = chain_trace();
  Log l;
  l.alloc(0, ref(0, 0, 0x0)).alloc(2, ref(1, 0, 0x200));
  l.compute(3, 1, 0, 20, {}, {ref(1, 1, 0x200)});  // g without its input; f skipped
  l.compute(3, 1, 10, 40, {ref(0, 0, 0x0)}, {});   // g again, overlapping, writing nothing
  CHECK(audit_runlog(t, l.log()).violations ==
        Lines{"record 2, event 3: trace event 1 (compute of op 'f') never ran",
              "record 2, event 3: compute of op 'g' reads tensors [], but its inputs are [0]",
              "record 3, event 3: compute of op 'g' runs trace event 3 a second time",
              "record 3, event 3: compute of op 'g' starts at 10 ns, before the compute stream's previous step ends at "
              "20 ns",
              "record 3, event 3: compute of op 'g' writes tensors [], but it writes [1]"});
}

TEST_CASE("auditor: in-place updates and re-allocations make new contents", "[audit]") {
  // p (0) is updated in place by `step` twice; x (1) is allocated twice, read by `use` each time.
  TraceBuilder b;
  const auto p = b.tensor(256, TensorRole::Parameter, "p");
  const auto x = b.tensor(256, TensorRole::Activation, "x");
  const auto mk = b.op("mk", 5, {}, {x});
  const auto step = b.op("step", 5, {p, x}, {});
  b.mutates(step, p);
  b.alloc(p).alloc(x).compute(mk).compute(step).free(x).alloc(x).compute(mk).compute(step).free(x).free(p);
  const Trace& t = b.trace();
  auto run = [&](std::uint64_t second_x_addr, std::uint32_t second_p_version) {
    Log l;
    l.alloc(0, ref(0, 0, 0x0, 256)).alloc(1, ref(1, 0, 0x100, 256));
    l.compute(2, mk, 0, 5, {}, {ref(1, 1, 0x100, 256)});
    l.compute(3, step, 5, 10, {ref(0, 0, 0x0, 256), ref(1, 1, 0x100, 256)}, {ref(0, 1, 0x0, 256)});
    l.alloc(5, ref(1, 0, 0x200, 256));  // the old block at 0x100 is kept (never freed) on purpose
    l.compute(6, mk, 10, 15, {}, {ref(1, 1, 0x200, 256)});
    l.compute(7, step, 15, 20, {ref(0, second_p_version, 0x0, 256), ref(1, 1, second_x_addr, 256)},
              {ref(0, second_p_version + 1, 0x0, 256)});
    return audit_runlog(t, l.log());
  };
  CHECK(run(0x200, 1).ok());
  CHECK(run(0x100, 1).violations == Lines{"record 6, event 7, tensor 1: compute of op 'step' reads version 1 at 0x100: "
                                          "the block holds an earlier allocation of the tensor"});
  CHECK(run(0x200, 0).violations ==
        Lines{"record 6, event 7, tensor 0: compute of op 'step' reads version 0, but the "
              "current version is 1",
              "record 6, event 7, tensor 0: compute of op 'step' writes version 1, expected version 2"});
}

TEST_CASE("auditor: an input updated in place by an op with outputs is state from that op on", "[audit]") {
  // g (0) is made by mk, then updated in place by upd, which has an output y (1) of its own (as
  // a gradient accumulated by a backward op). Before upd, g is an ordinary value that a
  // recompute of mk may restore; from upd on it keeps no history (engine: unevictable).
  TraceBuilder b;
  const auto g = b.tensor(256, TensorRole::Gradient, "g");
  const auto y = b.tensor(256, TensorRole::Activation, "y");
  const auto mk = b.op("mk", 10, {}, {g});
  const auto upd = b.op("upd", 5, {g}, {y});
  b.mutates(upd, g);
  b.alloc(g).compute(mk).alloc(y).compute(upd).free(y).free(g);
  const Trace& t = b.trace();
  Log l;
  l.alloc(0, ref(0, 0, 0x0, 256)).compute(1, mk, 0, 10, {}, {ref(0, 1, 0x0, 256)});                // 0, 1
  l.evict(2, ref(0, 1, 0x0, 256)).free(2, ref(0, 0, 0x0, 256));                                    // 2, 3
  l.alloc(2, ref(1, 0, 0x100, 256));                                                               // 4
  l.alloc(3, ref(0, 0, 0x0, 256), false).recompute(3, mk, 1, 10, 20, {}, {ref(0, 1, 0x0, 256)});   // 5, 6
  l.compute(3, upd, 20, 25, {ref(0, 1, 0x0, 256)}, {ref(0, 2, 0x0, 256), ref(1, 1, 0x100, 256)});  // 7
  CHECK(audit_runlog(t, l.log()).ok());
  // The same recompute after upd would restore version 1 over the update: refused.
  l.evict(4, ref(0, 2, 0x0, 256)).free(4, ref(0, 0, 0x0, 256));                                   // 8, 9
  l.alloc(4, ref(0, 0, 0x0, 256), false).recompute(4, mk, 1, 25, 35, {}, {ref(0, 1, 0x0, 256)});  // 10, 11
  const auto v = audit_runlog(t, l.log()).violations;
  REQUIRE(!v.empty());
  CHECK(v.front().rfind("record 11, event 4, tensor 0: recompute of op 'mk' writes state", 0) == 0);
}

TEST_CASE("auditor: accesses and the message cap", "[audit]") {
  TraceBuilder b;
  const auto a = b.tensor(100);
  b.alloc(a);
  for (int i = 0; i < 150; ++i) b.access(a);
  Log l;
  l.alloc(0, ref(0, 0, 0x0));
  for (std::uint32_t i = 0; i < 150; ++i) l.access(i + 1, 0, ref(0, 0, i == 0 ? 0x0 : 0x1000));
  const auto r = audit_runlog(b.trace(), l.log());
  CHECK(r.violation_count == 149);
  REQUIRE(r.violations.size() == kMaxViolationMessages);
  CHECK(r.violations[0] == "record 2, event 2, tensor 0: access reads version 0 at 0x1000: no block is live there");
  CHECK(r.reads == 150);
}

namespace {

struct EngineRun {
  Report report;
  RunLog log;
};

EngineRun engine_run(const Trace& t, const std::string& policy, const std::string& allocator, double budget_ratio) {
  SimConfig cfg;
  cfg.doc["policy"] = policy;
  cfg.doc["allocator"] = allocator;
  cfg.doc["budget"] =
      std::to_string(static_cast<std::uint64_t>(budget_ratio * static_cast<double>(summarize(t).peak_live.value)));
  EngineRun r;
  r.report = test::audited_run(cfg, t, &r.log);
  return r;
}

}  // namespace

TEST_CASE("auditor: engine runs of every policy on the default trace pass", "[audit][engine]") {
  const Trace t = load_trace("traces/default.jsonl.gz");
  for (const auto& e : builtin_components().policies.entries()) {
    for (const char* allocator : {"pytorch", "bestfit", "fungible"}) {
      INFO(e.name << " on " << allocator);
      const EngineRun r = engine_run(t, e.name, allocator, e.name == "keep" ? 1.5 : 0.6);
      CHECK(r.report.status == RunStatus::Completed);
      const AuditResult v = audit_runlog(t, r.log);
      CHECK(v.violations == Lines{});
      CHECK(v.records == r.log.records.size());
      CHECK(v.reads > 0);
    }
  }
}

TEST_CASE("auditor: damaged engine logs are caught", "[audit][engine]") {
  const Trace t = load_trace("traces/default.jsonl.gz");
  SECTION("a swap-in left out") {
    EngineRun r = engine_run(t, "autoswap", "pytorch", 0.6);
    REQUIRE(r.report.time.swap_ins > 0);
    const auto it = std::find_if(r.log.records.begin(), r.log.records.end(),
                                 [](const LogRecord& x) { return x.kind == LogKind::SwapIn; });
    const std::uint64_t addr = r.log.ref(*it).addr;
    auto placed = static_cast<std::uint32_t>(it - r.log.records.begin());
    while (r.log.records[placed].kind != LogKind::Alloc || r.log.ref(r.log.records[placed]).addr != addr) --placed;
    r.log.records.erase(it);  // no content arrives
    const AuditResult v = audit_runlog(t, r.log);
    REQUIRE(!v.ok());
    CHECK(v.violations[0].find(fmt::format("at {:#x}: the block (placed by record {}) holds nothing yet", addr,
                                           placed)) != std::string::npos);
  }
  SECTION("a recompute reading another version") {
    EngineRun r = engine_run(t, "coop", "bestfit", 0.6);
    REQUIRE(r.report.time.recomputes > 0);
    const auto it = std::find_if(r.log.records.begin(), r.log.records.end(),
                                 [](const LogRecord& x) { return x.kind == LogKind::Recompute && x.reads > 0; });
    REQUIRE(it != r.log.records.end());
    LogRef& read = r.log.refs[it->first];
    ++read.version;
    const AuditResult v = audit_runlog(t, r.log);
    REQUIRE(!v.ok());
    CHECK(v.violations[0].find(fmt::format("record {}, ", it - r.log.records.begin())) == 0);
    CHECK(v.violations[0].find(fmt::format("reads version {}", read.version)) != std::string::npos);
  }
}

}  // namespace audit_runlog_test
