// `coopsim advise` (coopsim/sweep/advise.hpp): the PYTORCH_CUDA_ALLOC_CONF lines, the ranking, the
// candidates of both rounds, a fragmentation case that only expandable segments fit, the verdict
// (spare or short bytes worked out by hand), defaults first, the reserve, and ms per step.
#include <catch2/catch.hpp>

#include <algorithm>

#include "coopsim/base/error.hpp"
#include "coopsim/sweep/advise.hpp"
#include "trace_builder.hpp"

using namespace coopsim;
using namespace coopsim::advise;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace advise_test {

namespace {

constexpr std::uint64_t kMiB = 1ULL << 20;

Outcome fitting(std::size_t index, double overhead, std::uint64_t retries, std::uint64_t reserved_mib,
                AllocConf conf = {}) {
  Outcome o;
  o.index = index;
  o.candidate.conf = conf;
  o.compute_overhead = overhead;
  o.alloc_retries = retries;
  o.peak_reserved = Bytes{reserved_mib * kMiB};
  return o;
}

Outcome oom(std::size_t index, std::uint64_t event) {
  Outcome o;
  o.index = index;
  o.status = RunStatus::OutOfMemory;
  o.oom_event = event;
  return o;
}

std::vector<std::size_t> order(std::vector<Outcome> v) {
  rank(v);
  std::vector<std::size_t> idx;
  for (const auto& o : v) idx.push_back(o.index);
  return idx;
}

// Five 8 MiB tensors fill three 20 MiB segments; freeing two leaves 12 MiB holes in segments that
// stay split, so a 55 MiB request needs a fourth segment: 116 MiB reserved for 79 MiB live. An
// expandable segment maps the request right after the live tensors: 100 MiB.
Trace fragmenting() {
  test::TraceBuilder b;
  std::vector<std::uint32_t> x;
  for (int i = 0; i < 5; ++i) x.push_back(b.tensor(8 * kMiB));
  const std::uint32_t y = b.tensor(55 * kMiB);
  for (const auto t : x) b.alloc(t);
  b.free(x[1]).free(x[3]).alloc(y);
  return b.trace();
}

}  // namespace

TEST_CASE("advise: PYTORCH_CUDA_ALLOC_CONF lines as PyTorch parses them", "[advise]") {
  CHECK(conf_string({}).empty());
  CHECK(conf_overrides({}).empty());
  CHECK(conf_string({.expandable_segments = true}) == "expandable_segments:True");
  CHECK(conf_string({.max_split_size_mb = 256}) == "max_split_size_mb:256");
  CHECK(conf_string({.roundup_power2_divisions = 4}) == "roundup_power2_divisions:4");
  CHECK(conf_string({.garbage_collection_threshold = 0.6}) == "garbage_collection_threshold:0.6");
  const AllocConf all{true, 128, 8, 0.8};
  CHECK(all.changed() == 4);
  CHECK(conf_string(all) ==
        "expandable_segments:True,max_split_size_mb:128,roundup_power2_divisions:8,garbage_collection_threshold:0.8");
  CHECK(conf_overrides(all) ==
        std::vector<std::string>{"pytorch.expandable_segments=true", "pytorch.max_split_size=128MiB",
                                 "pytorch.roundup_power2_divisions=8", "pytorch.garbage_collection_threshold=0.8"});
  CHECK(conf_string({.max_split_size_mb = 256, .garbage_collection_threshold = 0.6}) ==
        "max_split_size_mb:256,garbage_collection_threshold:0.6");
}

TEST_CASE("advise: ranking", "[advise]") {
  SECTION("fitting first, then overhead, retries, peak reserved") {
    CHECK(order({oom(0, 900), fitting(1, 1.5, 0, 10), fitting(2, 1.0, 3, 10), fitting(3, 1.0, 0, 20),
                 fitting(4, 1.0, 0, 15)}) == std::vector<std::size_t>{4, 3, 2, 1, 0});
  }
  SECTION("equal figures: fewer changed settings, then the order tried") {
    const AllocConf two{.expandable_segments = true, .max_split_size_mb = 256};
    const AllocConf one{.expandable_segments = true};
    CHECK(order({fitting(0, 1.0, 0, 10, two), fitting(1, 1.0, 0, 10, one), fitting(2, 1.0, 0, 10, one)}) ==
          std::vector<std::size_t>{1, 2, 0});
  }
  SECTION("the defaults first when they fit, whatever they cost in memory or retries") {
    const AllocConf expandable{.expandable_segments = true};
    CHECK(order({fitting(0, 1.0, 0, 10, expandable), fitting(1, 1.0, 3, 20), oom(2, 5)}) ==
          std::vector<std::size_t>{1, 0, 2});
  }
  SECTION("policies PyTorch offers first (vdnn: save_on_cpu), then by overhead") {
    Outcome dtr = fitting(0, 1.01, 0, 10);
    dtr.candidate.policy = "dtr";
    Outcome vdnn = fitting(1, 4.0, 0, 10);
    vdnn.candidate.policy = "vdnn";
    Outcome capuchin = fitting(2, 1.0, 0, 10);
    capuchin.candidate.policy = "capuchin";
    CHECK(order({dtr, vdnn, capuchin}) == std::vector<std::size_t>{1, 2, 0});
    CHECK(in_pytorch("vdnn").offered);
    CHECK(in_pytorch("dtr").kind == "recompute");
    CHECK_FALSE(in_pytorch("dtr").offered);
    CHECK(in_pytorch("keep").counterpart.empty());
  }
  SECTION("not fitting: further through the trace first, then the order tried") {
    Outcome thrash = oom(0, 0);
    thrash.status = RunStatus::Thrashed;
    thrash.oom_event.reset();
    CHECK(order({thrash, oom(1, 10), oom(2, 30), oom(3, 10)}) == std::vector<std::size_t>{2, 1, 3, 0});
  }
}

TEST_CASE("advise: first-round candidates", "[advise]") {
  test::TraceBuilder b;
  const auto big = b.tensor(300 * kMiB);
  const auto mid = b.tensor(100 * kMiB);
  const auto small = b.tensor(1 * kMiB);
  b.alloc(big).alloc(mid).alloc(small).free(mid).alloc(mid);
  std::vector<std::string> not_tried;
  const auto c = first_round(b.trace(), not_tried);
  REQUIRE(c.size() >= 2);
  CHECK(c[0].conf == AllocConf{});
  CHECK(c[1].conf == AllocConf{.expandable_segments = true});
  std::vector<std::uint64_t> splits;
  for (const auto& x : c) {
    CHECK(x.policy == "keep");
    if (x.conf.max_split_size_mb != 0) splits.push_back(x.conf.max_split_size_mb);
  }
  // Requests from 21 MiB: 300 + 100 + 100 MiB. Half the bytes sit at 300 MiB and up, a tenth too:
  // one trace size, 300. 512 MiB exceeds the largest segment (300 MiB).
  CHECK(splits == std::vector<std::uint64_t>{128, 256, 300});
  CHECK(not_tried == std::vector<std::string>{
                         "max_split_size_mb:512 (no block reaches 512 MiB: the largest segment is 300.00 MiB)"});
  // Every candidate is a config the pytorch model accepts.
  for (const auto& x : c) {
    SimConfig cfg;
    for (const auto& s : conf_overrides(x.conf)) apply_override(cfg, s);
    CHECK_NOTHROW(check_config(cfg));
  }
}

TEST_CASE("advise: second round combines the best of each option", "[advise]") {
  std::vector<Outcome> ranked{
      fitting(0, 1.0, 0, 10, {.max_split_size_mb = 256}),
      fitting(1, 1.0, 0, 11, {.garbage_collection_threshold = 0.8}),
      fitting(2, 1.0, 0, 12, {.roundup_power2_divisions = 4}),
      fitting(3, 1.0, 0, 13, {.max_split_size_mb = 128}),
      fitting(4, 1.0, 0, 14, {.expandable_segments = true}),
      fitting(5, 1.0, 0, 15, {.expandable_segments = true, .roundup_power2_divisions = 4}),  // tried already
  };
  std::vector<std::string> lines;
  for (const auto& c : second_round(ranked)) {
    CHECK(c.origin == "combination");
    lines.push_back(conf_string(c.conf));
  }
  CHECK(lines == std::vector<std::string>{"max_split_size_mb:256,garbage_collection_threshold:0.8",
                                          "max_split_size_mb:256,roundup_power2_divisions:4",
                                          "expandable_segments:True,max_split_size_mb:256"});
}

TEST_CASE("advise: expandable segments fit where fragmentation makes every other setting OOM", "[advise]") {
  const Trace trace = fragmenting();
  Options o;
  o.capacity = Bytes{110 * kMiB};
  o.audit = true;
  o.jobs = 1;
  const Advice a = evaluate(SimConfig{}, trace, o);
  REQUIRE(a.answer() != nullptr);
  CHECK(a.answer()->candidate.conf == AllocConf{.expandable_segments = true});
  CHECK(a.answer()->peak_reserved == Bytes{100 * kMiB});
  CHECK(use_line(a) == "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
  // The defaults need three 20 MiB segments and one of 56 MiB: 116 MiB, 6 MiB more than 110.
  CHECK(a.defaults_min_usable == std::optional<Bytes>{Bytes{116 * kMiB}});
  CHECK(a.short_by() == std::optional<Bytes>{Bytes{6 * kMiB}});
  CHECK(a.min_capacity() == std::optional<Bytes>{Bytes{116 * kMiB}});
  CHECK_FALSE(a.spare());
  CHECK(a.fits_with_settings());
  CHECK_FALSE(a.fits_with_policy());
  CHECK(verdict(a) ==
        "needs 6.00 MiB more with PyTorch's defaults (a capacity of 116.00 MiB or more); "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True makes it fit (10.00 MiB to spare); 0.000 ms per step");
  const auto j = to_json(a);
  CHECK(j["verdict"] == verdict(a));
  CHECK(j["fits"] == true);
  CHECK(j["fits_with_settings"] == true);
  CHECK(j["fits_with_policy"] == false);
  CHECK(j["short_bytes"] == 6 * kMiB);
  CHECK(j["spare_bytes"].is_null());
  CHECK(j["min_capacity_bytes"] == 116 * kMiB);
  CHECK(j["reserve_bytes"] == 0);
  CHECK(j["usable_bytes"] == 110 * kMiB);
  CHECK(run_arguments(a, *a.answer()) == "-a pytorch -p keep -b 115343360 --set pytorch.expandable_segments=true");
  for (const Outcome& x : a.settings) {
    if (x.fits()) CHECK(x.candidate.conf.expandable_segments);  // (rounding 55 MiB up to 64 MiB does not fit)
    if (x.candidate.conf == AllocConf{}) {
      CHECK(x.status == RunStatus::OutOfMemory);
      CHECK(x.oom_event == std::optional<std::uint64_t>{7});  // the 55 MiB request
    }
  }
  CHECK(a.policies.empty());  // a setting fits

  SECTION("the same ranking on any number of threads") {
    o.jobs = 3;
    CHECK(to_json(evaluate(SimConfig{}, trace, o)) == to_json(a));
  }
  SECTION("below the live bytes nothing fits, and a trace without ops cannot try policies") {
    o.capacity = Bytes{64 * kMiB};
    const Advice none = evaluate(SimConfig{}, trace, o);
    CHECK(none.answer() == nullptr);
    CHECK(use_line(none).empty());
    CHECK(none.policies.empty());
    CHECK(none.policies_skipped == "the trace has no ops: recompute and swap policies need to know what ops read");
    CHECK(none.short_by() == std::optional<Bytes>{Bytes{52 * kMiB}});
    CHECK_FALSE(none.fits_with_settings());
    CHECK_FALSE(none.fits_with_policy());
    CHECK(to_json(none)["fits"] == false);
    CHECK(to_json(none)["step_ms"].is_null());
  }
  SECTION("the defaults fit: they are the answer, though expandable segments reserve 16 MiB less") {
    o.capacity = Bytes{120 * kMiB};
    const Advice fit = evaluate(SimConfig{}, trace, o);
    REQUIRE(fit.answer() != nullptr);
    CHECK(fit.answer()->is_defaults());
    CHECK(fit.answer() == fit.defaults());
    CHECK(fit.answer()->peak_reserved == Bytes{116 * kMiB});
    CHECK(std::any_of(fit.settings.begin(), fit.settings.end(), [](const Outcome& x) {
      return x.candidate.conf == AllocConf{.expandable_segments = true} && x.peak_reserved == Bytes{100 * kMiB};
    }));
    CHECK(use_line(fit) == "the defaults (no PYTORCH_CUDA_ALLOC_CONF)");
    CHECK(fit.spare() == std::optional<Bytes>{Bytes{4 * kMiB}});
    CHECK_FALSE(fit.short_by());
    CHECK(fit.min_capacity() == std::optional<Bytes>{Bytes{116 * kMiB}});
    CHECK(verdict(fit) ==
          "fits with 4.00 MiB to spare with PyTorch's defaults (peak reserved 116.00 MiB of 120.00 MiB usable); "
          "0.000 ms per step");
    CHECK(to_json(fit)["spare_bytes"] == 4 * kMiB);
    CHECK(to_json(fit)["short_bytes"].is_null());
  }
  SECTION("the reserve comes off the capacity: 120 MiB less 10 fits only with expandable segments") {
    o.capacity = Bytes{120 * kMiB};
    o.reserve = Bytes{10 * kMiB};
    const Advice r = evaluate(SimConfig{}, trace, o);
    CHECK(r.usable == Bytes{110 * kMiB});
    REQUIRE(r.answer() != nullptr);
    CHECK(r.answer()->candidate.conf == AllocConf{.expandable_segments = true});
    CHECK(r.short_by() == std::optional<Bytes>{Bytes{6 * kMiB}});
    CHECK(r.min_capacity() == std::optional<Bytes>{Bytes{126 * kMiB}});  // the reserve included
    CHECK(run_arguments(r, *r.answer()) == "-a pytorch -p keep -b 115343360 --set pytorch.expandable_segments=true");
    o.reserve = Bytes{120 * kMiB};
    CHECK_THROWS_AS(evaluate(SimConfig{}, trace, o), UsageError);
  }
}

TEST_CASE("advise: a reserve must leave something of the capacity", "[advise]") {
  CHECK_NOTHROW(check_reserve(Bytes{2 * kMiB}, Bytes{kMiB}));
  CHECK_NOTHROW(check_reserve(Bytes{2 * kMiB}, Bytes{0}));
  try {
    check_reserve(Bytes{kMiB}, Bytes{kMiB});
    FAIL("no error");
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()) ==
          "--reserve: 1.00 MiB (1048576 bytes) leaves nothing of the capacity 1.00 MiB (1048576 bytes); give a "
          "smaller reserve (--reserve 0 replays at the whole capacity)");
  }
  CHECK(kDefaultReserve == Bytes{512 * kMiB});
}

TEST_CASE("advise: ms per step is the simulated time over the trace's iterations", "[advise]") {
  // Two iterations of one 3 ms op on a 40 MiB tensor: 6 ms simulated, 3 ms per step.
  test::TraceBuilder b;
  const auto t = b.tensor(40 * kMiB);
  const auto op = b.op("matmul", 3'000'000, {}, {t});
  for (std::uint32_t i = 0; i < 2; ++i) b.iteration(i).alloc(t).compute(op).free(t);
  Options o;
  o.capacity = Bytes{64 * kMiB};
  o.audit = true;
  const Advice a = evaluate(SimConfig{}, b.trace(), o);
  CHECK(a.iterations == 2);
  REQUIRE(a.answer() != nullptr);
  CHECK(a.answer()->is_defaults());
  CHECK(a.answer()->simulated == SimTime{6'000'000});
  CHECK(a.answer()->step_ms() == 3.0);
  CHECK(to_json(a)["step_ms"] == 3.0);
  CHECK(to_json(a)["answer"]["step_ms"] == 3.0);
  // The defaults take one 40 MiB segment: 24 MiB of 64 to spare.
  CHECK(verdict(a) ==
        "fits with 24.00 MiB to spare with PyTorch's defaults (peak reserved 40.00 MiB of 64.00 MiB "
        "usable); 3.0 ms per step");
}

TEST_CASE("advise: the base config may not choose what advise chooses", "[advise]") {
  auto refused = [](const std::string& set) {
    SimConfig c;
    apply_override(c, set);
    try {
      check_base(c);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(refused("budget=1GiB") == "budget: advise chooses it (policies are tried at --capacity when no setting fits)");
  CHECK(refused("policy=dtr") == "policy: advise chooses it (policies are tried at --capacity when no setting fits)");
  CHECK(refused("allocator=cnmem") == "allocator: advise replays the pytorch allocator model only, got 'cnmem'");
  CHECK(refused("pytorch.max_split_size=64MiB") == "params.pytorch: advise chooses the pytorch parameters itself");
  CHECK(refused("allocator=pytorch").empty());
  CHECK(refused("link.preset=pcie5-x16").empty());
}

TEST_CASE("advise: a recorded initial state is replayed from an empty allocator, and said so", "[advise]") {
  // A recorded 60 MiB segment holds a 40 MiB tensor and 20 MiB cached free; the trace frees the
  // tensor and asks for 50 MiB. From an empty allocator the defaults take a 40 MiB segment, then a
  // 50 MiB one (90 MiB reserved); an expandable segment grows the freed 40 MiB to 50 (60 MiB).
  test::TraceBuilder b;
  const auto t = b.tensor(40 * kMiB);
  const auto u = b.tensor(50 * kMiB);
  Trace trace = b.free(t).alloc(u).trace();
  InitialSegment s;
  s.addr = 1ULL << 40;
  s.blocks = {{Bytes{40 * kMiB}, TensorId{t}}, {Bytes{20 * kMiB}, kNoTensor}};
  trace.initial_segments.push_back(s);
  Options o;
  o.capacity = Bytes{100 * kMiB};
  o.audit = true;
  const Advice a = evaluate(SimConfig{}, trace, o);
  CHECK(a.initial_state == "empty");
  CHECK(a.recorded_reserved == Bytes{60 * kMiB});
  // The defaults fit, so they answer; expandable segments reserve less and rank below them.
  REQUIRE(a.answer() != nullptr);
  CHECK(a.answer() == a.defaults());
  CHECK(a.answer()->peak_reserved == Bytes{90 * kMiB});
  CHECK(run_arguments(a, *a.answer()) == "-a pytorch -p keep -b 104857600 --initial-state empty");
  const auto expandable = std::find_if(a.settings.begin(), a.settings.end(), [](const Outcome& x) {
    return x.candidate.conf == AllocConf{.expandable_segments = true};
  });
  REQUIRE(expandable != a.settings.end());
  CHECK(expandable->peak_reserved == Bytes{60 * kMiB});
  CHECK(run_arguments(a, *expandable) ==
        "-a pytorch -p keep -b 104857600 --set pytorch.expandable_segments=true --initial-state empty");
  CHECK(to_json(a)["initial_state"] == "empty");

  SECTION("a base config that keeps the recorded state: every setting is infeasible below its 60 MiB") {
    SimConfig base;
    apply_override(base, "initial_state=recorded");
    o.capacity = Bytes{50 * kMiB};
    const Advice r = evaluate(base, trace, o);
    CHECK(r.initial_state.empty());
    CHECK(r.answer() == nullptr);
    for (const Outcome& x : r.settings) CHECK(x.status == RunStatus::Infeasible);
  }
}

}  // namespace advise_test
