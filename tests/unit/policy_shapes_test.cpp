// Trace shapes the loader accepts but no generator writes (issue 29), each reduced from a finding
// of the `policy` fuzz target (tests/fuzz/policy_fuzz.cpp) to a few records: an op written
// twice, an output that is also an input, duplicate outputs, state updated in place by an op
// with outputs of its own, a storage overwritten after its value was evicted. Each runs with the
// allocator invariants, the engine's residency checks and the independent auditor on, and must end
// completed or at an OOM point with a consistent report: the first four failed before (exit 70
// "two resident values at one address", or an auditor finding: a recompute that writes state
// or reads a state version that has changed since).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "coopsim/formats/trace_file.hpp"
#include "coopsim/output/report_writers.hpp"
#include "coopsim/sim/simulation.hpp"
#include "test_paths.hpp"
#include "audited_run.hpp"

using namespace coopsim;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace policy_shapes_test {

namespace {

Trace load_text(const std::string& name, const std::vector<std::string>& records, int iterations = 3) {
  const auto path = test::scratch_dir("policy_shapes") / (name + ".jsonl");
  {
    std::ofstream out(path);
    out << R"({"format":"coopsim-trace","version":1,"iterations":)" << iterations << "}\n";
    for (const auto& r : records) out << r << '\n';
  }
  return load_trace(path.string());
}

Report run_checked(const Trace& t, const std::string& policy, const std::string& allocator, double percent,
                   const std::vector<std::string>& sets = {}) {
  SimConfig cfg;
  for (const auto& s : sets) apply_override(cfg, s);
  cfg.doc["policy"] = policy;
  cfg.doc["allocator"] = allocator;
  cfg.doc["budget"] = percent_of_peak(percent, summarize(t).peak_live, "budget").value;
  cfg.doc["engine"]["paranoid"] = true;
  cfg.doc["engine"]["residency_checks"] = true;
  cfg.doc["engine"]["allow_no_dataflow"] = true;  // reduced traces: some ops read nothing
  const Report r = test::audited_run(cfg, t);
  INFO(policy << " on " << allocator << " at " << percent << "%");
  CHECK(r.memory.peak_reserved >= r.memory.peak_allocated);
  CHECK(r.time.compute_overhead >= 1.0);
  CHECK(r.time.recompute_overhead >= 1.0);
  if (r.status == RunStatus::Completed) {
    CHECK(r.counters.computes == summarize(t).computes);
  } else {
    CHECK((r.oom.has_value() || r.thrash.has_value()));
  }
  return r;
}

}  // namespace

// op1 writes tensor 6 again (op0 computed it) while coop has evicted op0's value of it to make
// room for tensor 5: the new version used to take the evicted value's stale block, where 5 now
// lives ("two resident values at one address", exit 70).
TEST_CASE("policy shapes: an output written again after its value was evicted", "[remat][shapes]") {
  const Trace t = load_text("overwrite_evicted",
                            {R"({"kind":"tensor","id":4,"bytes":4034,"role":"other"})",
                             R"({"kind":"tensor","id":5,"bytes":11776,"role":"gradient"})",
                             R"({"kind":"tensor","id":6,"bytes":14848,"role":"other"})",
                             R"({"kind":"op","id":0,"duration":9681,"outputs":[4,6,4]})",
                             R"({"kind":"op","id":1,"duration":0,"outputs":[6,5]})",
                             R"({"kind":"iteration","index":0})", R"({"kind":"alloc","tensor":4})",
                             R"({"kind":"alloc","tensor":6})", R"({"kind":"compute","op":0})",
                             R"({"kind":"alloc","tensor":5})", R"({"kind":"compute","op":1})",
                             R"({"kind":"iteration","index":1})", R"({"kind":"iteration","index":2})"});
  for (const char* a : {"cnmem", "bestfit", "pytorch", "fungible"}) {
    for (const char* p : {"coop", "dtr", "dte", "pooch"}) run_checked(t, p, a, 80.0);
  }
}

// op5 updates tensor 5 in place and has an output of its own, so 5 is state from then on; op6
// then writes 5 again. A recompute of op1 (the first writer of 5) used to be planned to bring
// back tensor 1, writing state.
TEST_CASE("policy shapes: state written again is never recomputed", "[remat][shapes]") {
  const Trace t = load_text(
      "state_rewritten",
      {R"({"kind":"tensor","id":1,"bytes":8704,"role":"other"})", R"({"kind":"tensor","id":2,"bytes":512,"role":"other"})",
       R"({"kind":"tensor","id":3,"bytes":186,"role":"parameter"})",
       R"({"kind":"tensor","id":5,"bytes":512,"role":"other"})",
       R"({"kind":"op","id":1,"duration":5961,"outputs":[5]})",
       R"({"kind":"op","id":5,"duration":4601,"inputs":[5],"mutates":[5],"outputs":[1]})",
       R"({"kind":"op","id":6,"duration":9481,"inputs":[3],"outputs":[5,3]})",
       R"({"kind":"op","id":7,"duration":2201,"inputs":[1,3],"outputs":[2]})", R"({"kind":"alloc","tensor":3})",
       R"({"kind":"iteration","index":0})", R"({"kind":"alloc","tensor":5})", R"({"kind":"compute","op":1})",
       R"({"kind":"alloc","tensor":1})", R"({"kind":"compute","op":5})", R"({"kind":"compute","op":6})",
       R"({"kind":"alloc","tensor":2})", R"({"kind":"compute","op":7})", R"({"kind":"iteration","index":1})",
       R"({"kind":"iteration","index":2})"});
  // op6 lists parameter 3 among its outputs and inputs: the loader records it as mutated.
  const OpInfo& op6 = t.ops[2];
  REQUIRE(op6.mutated.size() == 1);
  CHECK(t.tensor(op6.mutated[0]).file_id == 3);
  for (const char* a : {"bestfit", "cnmem", "fungible"}) {
    for (const double pct : {80.0, 100.0}) {
      run_checked(t, "coop", a, pct, {"coop.op_guided_allocation=false"});
      run_checked(t, "dtr", a, pct);
    }
  }
}

// op2 reads tensor 0 and updates it in place (state from then on); op3 writes 0 again. The
// value of tensor 6 that op2 computed from 0's old contents used to be evicted and recomputed
// after op3, reading a state version that no longer exists.
TEST_CASE("policy shapes: values computed from state are settled before it changes", "[remat][shapes]") {
  const Trace t = load_text(
      "state_readers",
      {R"({"kind":"tensor","id":0,"bytes":2560,"role":"gradient"})",
       R"({"kind":"tensor","id":2,"bytes":3442,"role":"optimizer_state"})",
       R"({"kind":"tensor","id":4,"bytes":13824,"role":"optimizer_state"})",
       R"({"kind":"tensor","id":5,"bytes":6920,"role":"activation"})",
       R"({"kind":"tensor","id":6,"bytes":2560,"role":"other"})",
       R"({"kind":"op","id":0,"duration":5161,"outputs":[2,0]})",
       R"({"kind":"op","id":2,"duration":761,"inputs":[0],"mutates":[0],"outputs":[2,6]})",
       R"({"kind":"op","id":3,"duration":3201,"inputs":[2],"outputs":[5,0]})", R"({"kind":"iteration","index":0})",
       R"({"kind":"alloc","tensor":2})", R"({"kind":"alloc","tensor":0})", R"({"kind":"compute","op":0})",
       R"({"kind":"alloc","tensor":6})", R"({"kind":"compute","op":2})", R"({"kind":"alloc","tensor":5})",
       R"({"kind":"compute","op":3})", R"({"kind":"access","mode":"write","op":2,"tensor":6})",
       R"({"kind":"alloc","tensor":4})", R"({"kind":"iteration","index":1})", R"({"kind":"iteration","index":2})"});
  for (const char* a : {"cnmem", "bestfit", "fungible", "pytorch"}) {
    for (const double pct : {55.0, 80.0}) {
      for (const char* p : {"coop", "dtr", "dte"}) run_checked(t, p, a, pct);
    }
  }
}

// Tensor 2 is state from op13 (an in-place update by an op with an output) until it is freed;
// in the next iteration it is a fresh activation again, which a recompute may rewrite. The
// auditor used to keep it state for good and report the engine's recompute of op0.
TEST_CASE("policy shapes: state from an in-place update ends with the tensor's lifetime", "[remat][shapes]") {
  const Trace t = load_text(
      "state_lifetime",
      {R"({"kind":"tensor","id":0,"bytes":5120,"role":"gradient"})",
       R"({"kind":"tensor","id":1,"bytes":15872,"role":"parameter"})",
       R"({"kind":"tensor","id":2,"bytes":2048,"role":"other"})",
       R"({"kind":"tensor","id":3,"bytes":15360,"role":"gradient"})",
       R"({"kind":"tensor","id":4,"bytes":11264,"role":"activation"})",
       R"({"kind":"tensor","id":5,"bytes":926,"role":"input"})", R"({"kind":"op","id":0,"duration":2361,"outputs":[2]})",
       R"({"kind":"op","id":1,"duration":9361,"inputs":[5],"outputs":[2,0],"views":[[0,5]]})",
       R"({"kind":"op","id":2,"duration":2281,"inputs":[0],"outputs":[3]})",
       R"({"kind":"op","id":6,"duration":0,"inputs":[0,3,4],"outputs":[3,3]})",
       R"({"kind":"op","id":8,"duration":7561,"inputs":[2,2],"outputs":[3]})",
       R"({"kind":"op","id":13,"duration":881,"inputs":[2],"mutates":[2],"outputs":[3]})",
       R"({"kind":"alloc","tensor":1})", R"({"kind":"alloc","tensor":5})", R"({"kind":"iteration","index":0})",
       R"({"kind":"alloc","tensor":2})", R"({"kind":"alloc","tensor":3})", R"({"kind":"alloc","tensor":4})",
       R"({"kind":"free","tensor":3})", R"({"kind":"alloc","tensor":3})", R"({"kind":"compute","op":13})",
       R"({"kind":"free","tensor":2})", R"({"kind":"free","tensor":3})", R"({"kind":"free","tensor":4})",
       R"({"kind":"iteration","index":1})", R"({"kind":"alloc","tensor":2})", R"({"kind":"compute","op":0})",
       R"({"kind":"alloc","tensor":3})", R"({"kind":"compute","op":2})", R"({"kind":"alloc","tensor":4})",
       R"({"kind":"compute","op":6})", R"({"kind":"compute","op":8})", R"({"kind":"iteration","index":2})"});
  for (const char* a : {"fungible", "bestfit", "cnmem"}) {
    for (const double pct : {100.0, 130.0}) {
      for (const char* p : {"coop", "dtr", "dte"}) {
        run_checked(t, p, a, pct, {"coop.dealloc=no-dealloc", "dtr.dealloc=no-dealloc"});
      }
    }
  }
}

// Tensor 3 is swapped out after op2 reads it, freed while the copy is in flight and allocated
// again: the completion of the old lifetime's copy used to free the new block ("use of a
// tensor that is not allocated", exit 70 under autoswap, and under vdnn with its fallback on,
// or "deallocate of unknown block"). The new lifetime now waits for the old copy.
TEST_CASE("policy shapes: a tensor allocated again while its old copy is in flight", "[swap][shapes]") {
  const Trace t = load_text("realloc_in_flight", {
       R"({"bytes":6217,"id":0,"kind":"tensor","role":"gradient"})",
       R"({"bytes":9728,"id":1,"kind":"tensor","role":"other"})",
       R"({"bytes":9728,"id":2,"kind":"tensor","role":"other"})",
       R"({"bytes":512,"id":3,"kind":"tensor","role":"activation"})",
       R"({"bytes":5120,"id":4,"kind":"tensor","role":"input"})",
       R"({"bytes":16384,"id":5,"kind":"tensor","role":"parameter"})",
       R"({"duration":9001,"id":2,"inputs":[3,1],"kind":"op","name":"op2","outputs":[]})",
       R"({"duration":3241,"id":5,"inputs":[0,4,2],"kind":"op","name":"op5","outputs":[3]})",
       R"({"kind":"alloc","tensor":4})",
       R"({"kind":"alloc","tensor":5})",
       R"({"index":0,"kind":"iteration"})",
       R"({"kind":"alloc","tensor":3})",
       R"({"kind":"alloc","tensor":1})",
       R"({"kind":"alloc","tensor":2})",
       R"({"kind":"compute","op":2})",
       R"({"kind":"alloc","tensor":0})",
       R"({"kind":"free","tensor":0})",
       R"({"kind":"mark","label":"backward"})",
       R"({"kind":"alloc","tensor":0})",
       R"({"kind":"access","mode":"read","op":2,"tensor":5})",
       R"({"kind":"free","tensor":3})",
       R"({"kind":"alloc","tensor":3})",
       R"({"kind":"compute","op":5})",
       R"({"index":1,"kind":"iteration"})"}, 2);
  for (const char* a : {"cnmem", "bestfit", "pytorch", "fungible"}) {
    for (const double pct : {80.0, 130.0}) {
      for (const char* p : {"autoswap", "vdnn"}) {
        run_checked(t, p, a, pct, {"autoswap.smallest_block=1", "vdnn.fallback=true"});
      }
    }
  }
}

// vDNN's Belady fallback (a heap kept from the trace's events) is asked for room by a prefetch
// issued after event 6, which allocated tensor 2: the heap did not offer it yet and disagreed
// with the plain search (the cross-check's InvariantError under --paranoid).
TEST_CASE("policy shapes: the swap fallback offers the storages of the event just processed", "[swap][shapes]") {
  const Trace t = load_text("fallback_current_event", {
       R"({"bytes":8192,"id":0,"kind":"tensor","role":"gradient"})",
       R"({"bytes":1222,"id":1,"kind":"tensor","role":"input"})",
       R"({"bytes":9728,"id":2,"kind":"tensor","role":"activation"})",
       R"({"bytes":4293,"id":3,"kind":"tensor","role":"optimizer_state"})",
       R"({"duration":0,"id":0,"inputs":[1],"kind":"op","name":"op0","outputs":[0,0]})",
       R"({"duration":0,"id":2,"inputs":[1],"kind":"op","name":"op2","outputs":[3,1]})",
       R"({"kind":"alloc","tensor":1})",
       R"({"index":0,"kind":"iteration"})",
       R"({"kind":"alloc","tensor":0})",
       R"({"kind":"compute","op":0})",
       R"({"kind":"mark","label":"backward"})",
       R"({"kind":"free","tensor":0})",
       R"({"kind":"alloc","tensor":2})",
       R"({"kind":"free","tensor":2})",
       R"({"kind":"alloc","tensor":3})",
       R"({"kind":"compute","op":2})",
       R"({"kind":"alloc","tensor":0})",
       R"({"index":1,"kind":"iteration"})"}, 2);
  for (const char* a : {"bestfit", "cnmem", "pytorch"}) run_checked(t, "vdnn", a, 80.0, {"vdnn.fallback=true"});
}

// The loader's rule (docs/trace-format.md §4.2): a duplicate output is one output, and an output
// that is also an input is an in-place update.
TEST_CASE("policy shapes: the loader writes self-references in place and drops duplicate outputs",
          "[remat][shapes][trace]") {
  const Trace t = load_text("self_reference", {R"({"kind":"tensor","id":0,"bytes":512,"role":"input"})",
                                               R"({"kind":"tensor","id":1,"bytes":512})",
                                               R"({"kind":"op","id":0,"inputs":[0],"outputs":[1,1]})",
                                               R"({"kind":"op","id":1,"duration":10,"inputs":[1],"outputs":[1]})",
                                               R"({"kind":"alloc","tensor":0})", R"({"kind":"iteration","index":0})",
                                               R"({"kind":"alloc","tensor":1})", R"({"kind":"compute","op":0})",
                                               R"({"kind":"compute","op":1})", R"({"kind":"free","tensor":1})",
                                               R"({"kind":"iteration","index":1})", R"({"kind":"iteration","index":2})"});
  CHECK(t.ops[0].outputs.size() == 1);
  REQUIRE(t.ops[1].mutated.size() == 1);
  CHECK(t.ops[1].mutated[0] == t.ops[1].outputs[0]);
  for (const char* p : {"keep", "coop", "dtr", "dte", "pooch", "capuchin"}) run_checked(t, p, "bestfit", 100.0);
}

// dtr.compat=simrd replays simrd's programs (SSA: each tensor written once); other traces are
// refused with one line instead of an internal error or a runaway recursion.
TEST_CASE("policy shapes: the simrd profile refuses traces outside simrd's grammar", "[dtr][simrd][shapes]") {
  const Trace t = load_text("simrd_twice", {R"({"kind":"tensor","id":0,"bytes":512,"role":"input"})",
                                            R"({"kind":"tensor","id":1,"bytes":512})",
                                            R"({"kind":"op","id":0,"duration":10,"inputs":[0],"outputs":[1]})",
                                            R"({"kind":"alloc","tensor":0})", R"({"kind":"iteration","index":0})",
                                            R"({"kind":"alloc","tensor":1})", R"({"kind":"compute","op":0})",
                                            R"({"kind":"free","tensor":1})", R"({"kind":"iteration","index":1})",
                                            R"({"kind":"alloc","tensor":1})", R"({"kind":"compute","op":0})",
                                            R"({"kind":"iteration","index":2})"});
  SimConfig cfg;
  cfg.doc = {{"allocator", "fungible"}, {"policy", "dtr"}, {"budget", 4096}, {"params", {{"dtr", {{"compat", "simrd"}}}}}};
  CHECK_THROWS_WITH(test::audited_run(cfg, t),
                    Catch::Contains("dtr.compat=simrd refuses this trace: op 0 writes tensor 1 a second time"));
}

// limits.max_search_steps bounds one run's victim searches: past it the run stops with status
// limit, its report naming the event, like an OOM point (issue 29: a chain of 50,000 evictable
// layers searched for 84 s under coop and more than 120 s under dtr).
TEST_CASE("policy shapes: a run past limits.max_search_steps stops with status limit", "[remat][limits]") {
  std::vector<std::string> records{R"({"kind":"tensor","id":0,"bytes":1024,"role":"input"})"};
  const int n = 40;
  for (int i = 1; i <= n; ++i) {
    records.push_back(fmt::format(R"({{"kind":"tensor","id":{},"bytes":1024}})", i));
    records.push_back(fmt::format(R"({{"kind":"op","id":{},"duration":{},"inputs":[{}],"outputs":[{}]}})", i, 100 + i, i - 1, i));
  }
  records.push_back(R"({"kind":"alloc","tensor":0})");
  for (int i = 1; i <= n; ++i) {
    records.push_back(fmt::format(R"({{"kind":"alloc","tensor":{}}})", i));
    records.push_back(fmt::format(R"({{"kind":"compute","op":{}}})", i));
  }
  const auto path = test::scratch_dir("policy_shapes_limit") / "chain.jsonl";
  {
    std::ofstream out(path);
    out << R"({"format":"coopsim-trace","version":1})" << "\n";
    for (const auto& r : records) out << r << "\n";
  }
  const Trace t = load_trace(path.string());
  for (const char* p : {"coop", "dtr", "dte"}) {
    SimConfig cfg;
    cfg.doc = {{"allocator", "bestfit"}, {"policy", p}, {"budget", "50%"}};
    cfg.doc["budget"] = percent_of_peak(50.0, summarize(t).peak_live, "budget").value;
    const Report free_run = test::audited_run(cfg, t);
    INFO(p);
    REQUIRE(free_run.status == RunStatus::Completed);
    REQUIRE(free_run.counters.search_scanned > 10);
    cfg.doc["limits"] = {{"max_search_steps", 10}};
    const Report r = test::audited_run(cfg, t);
    CHECK(r.status == RunStatus::Limited);
    REQUIRE(r.limit.has_value());
    CHECK(r.limit->search_steps == 10);
    CHECK(r.counters.search_scanned > 10);
    CHECK(index_of(r.limit->event) < t.events.size());
    CHECK(to_json(r)["status"] == "limit");
    CHECK(to_json(r)["limit"]["key"] == "limits.max_search_steps");
  }
}

}  // namespace policy_shapes_test
