// Minimum-budget search against a brute-force scan of every budget in 1 MiB steps, on a small
// generated CNN training step: keep on two allocators, a recompute policy, and a recompute
// policy under a compute-overhead limit.
#include <catch2/catch.hpp>

#include "coopsim/generate/generator.hpp"
#include "coopsim/sweep/sweep.hpp"
#include "trace_builder.hpp"
#include "audited_run.hpp"

using namespace coopsim;
using namespace coopsim::sweep;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace minbudget_test {

namespace {

constexpr std::uint64_t kMiB = 1ULL << 20;
// Every probe validated, as the CLI does under COOPSIM_AUDIT=1.
const MinBudgetOptions validated{std::nullopt, 1.25, true, Bytes{}};

Trace small_cnn() {
  GeneratorOptions o;
  o.model = "cnn";
  o.layers = 4;
  o.batch = 32;
  o.width = 32;
  o.spatial = 32;
  o.iterations = 2;
  return generate_training_trace(o);
}

SimConfig config(const std::string& allocator, const std::string& policy) {
  SimConfig c;
  c.doc["allocator"] = allocator;
  c.doc["policy"] = policy;
  return c;
}

// The smallest multiple of 1 MiB whose run passes, scanning upwards from 1 MiB.
std::uint64_t brute_force(const SimConfig& cfg, const Trace& trace, std::optional<double> max_overhead) {
  for (std::uint64_t k = 1; k < 4096; ++k) {
    SimConfig c = cfg;
    c.doc["budget"] = std::to_string(k * kMiB);
    const Report r = test::audited_run(c, trace);
    if (r.status == RunStatus::Completed && (!max_overhead || r.time.compute_overhead <= *max_overhead))
      return k * kMiB;
  }
  return 0;
}

}  // namespace

TEST_CASE("minbudget finds what a 1 MiB brute-force scan finds", "[sweep][minbudget]") {
  const Trace trace = small_cnn();
  const Bytes peak = summarize(trace).peak_live;
  REQUIRE(peak.value == 42725668);  // 40.75 MiB: 41 steps of 1 MiB below the peak

  struct Case {
    const char* allocator;
    const char* policy;
    std::optional<double> max_overhead;
  };
  for (const Case& c : {Case{"pytorch", "keep", {}}, Case{"cnmem", "keep", {}}, Case{"bestfit", "keep", {}},
                        Case{"bestfit", "dtr", {}}, Case{"bestfit", "dtr", 1.05}}) {
    INFO(c.allocator << " " << c.policy << " max overhead " << c.max_overhead.value_or(0.0));
    const SimConfig cfg = config(c.allocator, c.policy);
    const MinBudgetResult r =
        find_min_budget(check_config(cfg), trace, {c.max_overhead, validated.margin, true, Bytes{}});
    const std::uint64_t expected = brute_force(cfg, trace, c.max_overhead);
    REQUIRE(r.found);
    CHECK(r.unit.value == kMiB);
    CHECK(r.peak == peak);
    CHECK(r.budget.value == expected);
    CHECK(r.failing.value == expected - kMiB);  // the bracket is one precision step wide
    CHECK_FALSE(r.failing_status.empty());
    if (c.max_overhead) CHECK(r.compute_overhead <= *c.max_overhead);
    if (std::string(c.policy) == "keep") CHECK(r.compute_overhead == 1.0);
    CHECK(r.runs <= 8);  // a bisection, not a scan
  }
}

TEST_CASE("minbudget: a budget known to fail bounds the search from below (advise)", "[sweep][minbudget]") {
  const Trace trace = small_cnn();
  const CheckedConfig cfg = check_config(config("pytorch", "keep"));
  const MinBudgetResult plain = find_min_budget(cfg, trace, validated);
  REQUIRE(plain.found);
  MinBudgetOptions o = validated;
  o.fails_at = Bytes{plain.budget.value - 5 * kMiB + 123};  // the search starts at the MiB below it
  const MinBudgetResult above = find_min_budget(cfg, trace, o);
  CHECK(above.budget == plain.budget);
  CHECK(above.runs < plain.runs);
  // A fails_at at or above the minimum (as if a larger budget had failed): the answer lies above it.
  o.fails_at = plain.budget;
  const MinBudgetResult beyond = find_min_budget(cfg, trace, o);
  CHECK(beyond.budget.value == plain.budget.value + kMiB);
}

TEST_CASE("minbudget: fungible keep needs the peak, rounded up to the precision unit", "[sweep][minbudget]") {
  const MinBudgetResult r = find_min_budget(check_config(config("fungible", "keep")), small_cnn(), validated);
  CHECK(r.budget.value == 41 * kMiB);  // 40.75 MiB of live bytes
  CHECK(r.failing.value == 40 * kMiB);
  CHECK(r.failing_status == "oom");

  // A 5 GiB + 1 byte peak: the unit is floor(peak / 1000 / 1 MiB) = 5 MiB, so the answer is
  // ceil(peak / 5 MiB) = 1025 units.
  test::TraceBuilder b("big");
  const auto t = b.tensor((5ULL << 30) + 1);
  const auto op = b.op("fill", 10, {}, {t});
  b.alloc(t).compute(op).free(t);
  const MinBudgetResult big = find_min_budget(check_config(config("fungible", "keep")), b.trace(), validated);
  CHECK(big.unit.value == 5 * kMiB);
  CHECK(big.budget.value == 1025 * 5 * kMiB);
  CHECK(big.failing.value == 1024 * 5 * kMiB);
  // the first bound, ceil(1.25 x peak / unit) units, passes: no growth, then a bisection
  CHECK(big.searched_up_to.value == 1281 * 5 * kMiB);
}

}  // namespace minbudget_test
