// The planner's deadline (issue 18): every phase reads the clock (the conflict lists' sweep, the
// construction's decodings, the exact search, the local search) and a run stopped at any read
// still returns a valid placement. The clock is the test clock that expires at a chosen read,
// so nothing here depends on the machine's speed. Every input is generated here.
#include <catch2/catch.hpp>

#include <cstdint>
#include <fstream>
#include <random>
#include <string>

#include "coopsim/planner/check.hpp"
#include "coopsim/planner/planner.hpp"
#include "coopsim/planner/problem.hpp"
#include "planner/placement.hpp"
#include "test_paths.hpp"

using namespace coopsim::plan;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace plan_deadline_test {

namespace {

// n buffers, lifetimes [lo, lo + w) with lo uniform in [0, n) and w uniform in [1, width],
// sizes uniform in [1, 4096].
Problem generated(std::size_t n, std::uint64_t width, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Problem p;
  p.file = "generated.csv";
  for (std::size_t i = 0; i < n; ++i) {
    Buffer b;
    b.id = "b" + std::to_string(i);
    b.lower = static_cast<std::int64_t>(rng() % n);
    b.upper = b.lower + 1 + static_cast<std::int64_t>(rng() % width);
    b.size = 1 + static_cast<std::int64_t>(rng() % 4096);
    b.line = i + 2;
    p.buffers.push_back(b);
  }
  return p;
}

bool valid(const Problem& p, const PlanResult& r) {
  const auto path = (coopsim::test::scratch_dir("plan-deadline") / "s.csv").string();
  std::ofstream(path) << format_solution(p, r.offsets);
  const CheckResult verdict = check_solution(p, path, std::nullopt);
  return verdict.ok() && verdict.height == r.height;
}

std::int64_t total_bytes(const Problem& p) {
  std::int64_t sum = 0;
  for (const auto& b : p.buffers) sum += b.size;
  return sum;
}

// Which phases some run was stopped in.
struct Cuts {
  bool sweep = false, construction = false, exact = false, local = false;
};

// Runs the planner with clocks expiring at every read up to the 128th, then 25 % apart, until
// a run ends before its clock does (a phase may read the clock only a few times); every placement must be valid, and
// the same clock must give the same placement.
Cuts stop_everywhere(const Problem& p, const PlanOptions& o) {
  Cuts cuts;
  const std::int64_t stacked = total_bytes(p);
  for (std::uint64_t reads = 0;; reads += reads < 128 ? 1 : reads / 4) {
    INFO("clock expiring at read " << reads + 1);
    auto clock = coopsim::plan::detail::Clock::after_reads(reads);
    const PlanResult r = coopsim::plan::detail::plan_with_clock(p, o, clock);
    REQUIRE(valid(p, r));
    CHECK(r.height >= r.lower_bound);
    auto again = coopsim::plan::detail::Clock::after_reads(reads);
    CHECK(coopsim::plan::detail::plan_with_clock(p, o, again).offsets == r.offsets);
    if (!r.time_cut) return cuts;
    REQUIRE(reads < (std::uint64_t{1} << 24));  // the budgets end every run long before
    if (reads == 0 && r.height == stacked) cuts.sweep = true;
    if (r.exact_work > 0) cuts.exact = true;
    if (r.iterations > 0) cuts.local = true;
    if (r.exact_work == 0 && r.iterations == 0 && r.height < stacked) cuts.construction = true;
  }
}

}  // namespace

TEST_CASE("plan deadline: a run stopped at any read of the clock returns a valid placement", "[plan][deadline]") {
  PlanOptions o;
  o.time_limit_s = 0.05;  // the work limits: small, so that the uncut run ends soon
  SECTION("small problem: sweep, construction and exact search") {
    const Cuts cuts = stop_everywhere(generated(300, 300, 5), o);
    CHECK(cuts.sweep);
    CHECK(cuts.construction);
    CHECK(cuts.exact);
  }
  SECTION("above the exact search's 4,096 buffers: construction and local search") {
    const Cuts cuts = stop_everywhere(generated(5000, 40, 6), o);
    CHECK(cuts.sweep);
    CHECK(cuts.construction);
    CHECK(cuts.local);
  }
  SECTION("above max_conflicts: the list-free construction") {
    o.max_conflicts = 100;
    const Problem p = generated(400, 400, 7);
    auto clock = coopsim::plan::detail::Clock::after_reads(0);
    const PlanResult r = coopsim::plan::detail::plan_with_clock(p, o, clock);
    CHECK(r.without_lists);
    CHECK(r.time_cut);
    CHECK(r.height == total_bytes(p));  // nothing placed by the rules: all stacked
    CHECK(valid(p, r));
    stop_everywhere(p, o);
  }
}

TEST_CASE("plan deadline: a clock stopped in the sweep is a time cut, not a conflict cap", "[plan][deadline]") {
  const Problem p = generated(300, 300, 5);
  PlanOptions o;
  auto clock = coopsim::plan::detail::Clock::after_reads(0);
  const PlanResult r = coopsim::plan::detail::plan_with_clock(p, o, clock);
  CHECK(r.time_cut);
  CHECK_FALSE(r.without_lists);  // the command would otherwise blame limits.max_conflicts
  CHECK(r.iterations == 0);
  CHECK(r.exact_work == 0);
}

}  // namespace plan_deadline_test
