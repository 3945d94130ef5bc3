// `coopsim plan` hardening (issue 15, classes 2 and 5): sizes whose sum passes 2^63 - 1 are
// refused, offsets near 2^63 are checked without wrapping, the caps (limits.max_buffers, the
// line length, limits.max_conflicts) hold, the conflict lists and the list-free decoder place
// exactly as the plain greedy rule does, and a tiny time limit still gives a valid placement.
// Every input is generated here.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <utility>

#include "coopsim/base/error.hpp"
#include "coopsim/planner/check.hpp"
#include "coopsim/planner/planner.hpp"
#include "coopsim/planner/problem.hpp"
#include "test_paths.hpp"

using namespace coopsim::plan;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace plan_limits_test {

// The function, not the namespace coopsim::plan that other files' `using namespace coopsim` bring in.
using coopsim::plan::plan;

namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

Problem problem_of(const std::string& text, const PlanLimits& limits = {}) {
  std::istringstream in(text);
  return parse_problem(in, "p.csv", limits);
}

std::string parse_error(const std::string& text, const PlanLimits& limits = {}) {
  try {
    problem_of(text, limits);
  } catch (const coopsim::InputError& e) {
    return e.what();
  }
  return "no error";
}

std::string write(const std::string& name, const std::string& text) {
  const auto path = (coopsim::test::scratch_dir("plan-limits-" + name) / "s.csv").string();
  std::ofstream(path) << text;
  return path;
}

std::string row(const std::string& id, std::int64_t lower, std::int64_t upper, std::int64_t size) {
  return id + "," + std::to_string(lower) + "," + std::to_string(upper) + "," + std::to_string(size) + "\n";
}

// n buffers with lifetimes [lo, lo + w) for lo uniform in [0, n) and w uniform in [1, width].
Problem random_problem(std::size_t n, std::int64_t width, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string text = "id,lower,upper,size\n";
  for (std::size_t i = 0; i < n; ++i) {
    const auto lo = static_cast<std::int64_t>(rng() % n);
    const auto w = 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(width));
    text += row("b" + std::to_string(i), lo, lo + w, 1 + static_cast<std::int64_t>(rng() % 4096));
  }
  return problem_of(text);
}

// The rule written out plainly: each buffer scans every buffer placed before it, sorts and
// merges the ranges of those alive with it, then picks a gap (greedy.cpp's rule, O(n^2)).
std::vector<std::int64_t> reference_placement(const Problem& p, const std::vector<std::size_t>& order, Fit fit) {
  std::vector<std::int64_t> offsets(p.buffers.size(), 0);
  std::vector<std::size_t> placed;
  for (const std::size_t i : order) {
    std::vector<std::pair<std::int64_t, std::int64_t>> r;
    for (const std::size_t j : placed)
      if (lifetimes_overlap(p.buffers[i], p.buffers[j])) r.emplace_back(offsets[j], offsets[j] + p.buffers[j].size);
    std::sort(r.begin(), r.end());
    std::vector<std::pair<std::int64_t, std::int64_t>> m;
    for (const auto& x : r) {
      if (!m.empty() && x.first <= m.back().second)
        m.back().second = std::max(m.back().second, x.second);
      else
        m.push_back(x);
    }
    const std::int64_t size = p.buffers[i].size;
    std::int64_t at = m.empty() ? 0 : m.back().second;
    if (fit == Fit::First) {
      std::int64_t from = 0;
      for (const auto& x : m) {
        if (x.first - from >= size) break;
        from = x.second;
      }
      at = from;
    } else if (fit == Fit::BestQuirk && m.size() == 1) {
      at = size <= m[0].first ? 0 : m[0].second;
    } else if (!m.empty()) {
      std::int64_t best_gap = kMax, from = 0;
      for (std::size_t k = 0; k < m.size(); ++k) {
        const std::int64_t gap = m[k].first - from;
        if (!(fit == Fit::BestQuirk && k == 0) && gap >= size && gap < best_gap) {
          best_gap = gap;
          at = from;
        }
        from = m[k].second;
      }
    }
    offsets[i] = at;
    placed.push_back(i);
  }
  return offsets;
}

}  // namespace

TEST_CASE("plan limits: sizes whose sum passes 2^63 - 1 are refused at the row that passes it", "[plan][limits]") {
  // Two overlapping buffers of 2^62: any valid placement is 2^63 high (used to be reported
  // optimal at 2^62 with the second buffer on top of the first, its end wrapped).
  CHECK(parse_error("id,lower,upper,size\n" + row("a", 0, 10, std::int64_t{1} << 62) +
                    row("b", 0, 10, std::int64_t{1} << 62)) ==
        "p.csv:3: sizes add up to more than 9223372036854775807 bytes (heights and offsets are signed 64-bit)");
  // Exactly 2^63 - 1 in all: planned on top of each other, height 2^63 - 1, and valid.
  const auto p = problem_of("id,lower,upper,size\n" + row("a", 0, 10, (std::int64_t{1} << 62) - 1) +
                            row("b", 0, 10, std::int64_t{1} << 62));
  PlanOptions o;
  o.time_limit_s = 1;
  const PlanResult r = plan(p, o);
  CHECK(r.height == kMax);
  CHECK(r.offsets == std::vector<std::int64_t>{std::int64_t{1} << 62, 0});
  CHECK(r.lower_bound == kMax);
  const auto verdict = check_solution(p, write("exact", format_solution(p, r.offsets)), std::nullopt);
  CHECK(verdict.ok());
  CHECK(verdict.height == kMax);
  // Both at offset 0: one overlap, not a valid placement of height 2^62.
  const auto path = write("same",
                          "id,lower,upper,size,offset\na,0,10,4611686018427387903,0\n"
                          "b,0,10,4611686018427387904,0\n");
  CHECK(check_solution(p, path, std::nullopt).violations ==
        std::vector<std::string>{path + ":3: id 'b' overlaps id 'a' (line 2) in time and address"});
}

TEST_CASE("plan limits: --check refuses an end past 2^63 - 1 instead of wrapping", "[plan][limits]") {
  const auto p = problem_of("id,lower,upper,size\na,0,10,1\nb,5,20,2\n");
  const std::string rows = "id,lower,upper,size,offset\na,0,10,1,9223372036854775807\nb,5,20,2,9223372036854775806\n";
  const auto path = write("far", rows);
  const auto r = check_solution(p, path, std::nullopt);
  CHECK(r.violations ==
        std::vector<std::string>{path + ":2: offset 9223372036854775807 + size 1 is past the largest address "
                                        "9223372036854775807",
                                 path + ":3: offset 9223372036854775806 + size 2 is past the largest address "
                                        "9223372036854775807"});
  // The last byte below 2^63 - 1 is a valid place.
  const auto top = check_solution(p,
                                  write("top",
                                        "id,lower,upper,size,offset\na,0,10,1,9223372036854775806\n"
                                        "b,5,20,2,0\n"),
                                  std::nullopt);
  CHECK(top.ok());
  CHECK(top.height == kMax);
}

TEST_CASE("plan limits: the caps on buffers, lines and limit values", "[plan][limits]") {
  PlanLimits three;
  three.max_buffers = 3;
  const std::string four =
      "id,lower,upper,size\n" + row("a", 0, 1, 1) + row("b", 0, 1, 1) + "\n" + row("c", 0, 1, 1) + row("d", 0, 1, 1);
  CHECK(parse_error(four, three) == "p.csv:6: more than 3 buffers (limits.max_buffers)");
  CHECK(problem_of(four).buffers.size() == 4);
  // A solution with more rows than the cap, checked against a problem within it.
  const auto p = problem_of("id,lower,upper,size\n" + row("a", 0, 1, 1) + row("b", 0, 1, 1) + row("c", 0, 1, 1), three);
  const auto sol = write("rows", "id,lower,upper,size,offset\na,0,1,1,0\nb,0,1,1,1\nc,0,1,1,2\nd,0,1,1,3\n");
  CHECK_THROWS_WITH(check_solution(p, sol, std::nullopt, three), sol + ":5: more than 3 buffers (limits.max_buffers)");
  // One line of more than 1 MiB (an id with no end) is refused before it is held whole.
  CHECK(parse_error("id,lower,upper,size\n" + std::string(PlanLimits::kMaxLineBytes + 1, 'x')) ==
        "p.csv:2: line longer than 1048576 bytes");
  CHECK(
      problem_of("id,lower,upper,size\n" + std::string(PlanLimits::kMaxLineBytes - 8, 'x') + ",0,1,1").buffers.size() ==
      1);
  CHECK_THROWS_WITH(plan_limits_from_json({{"max_buffers", 0}}),
                    "limits.max_buffers: must be between 1 and 4294967295, got 0");
  CHECK_THROWS_WITH(plan_limits_from_json({{"max_buffers", 4294967296LL}}),
                    "limits.max_buffers: must be between 1 and 4294967295, got 4294967296");
  CHECK_THROWS_WITH(plan_limits_from_json({{"max_conflicts", -1}}),
                    "limits.max_conflicts: must be between 1 and 9223372036854775807, got -1");
  CHECK_THROWS_WITH(plan_limits_from_json({{"max_tensors", 5}}),
                    "limits.max_tensors: unknown parameter (valid for limits: max_buffers, max_conflicts)");
  const PlanLimits l = plan_limits_from_json({{"max_buffers", 7}, {"max_conflicts", 9}});
  CHECK(l.max_buffers == 7);
  CHECK(l.max_conflicts == 9);
  CHECK(plan_limits_from_json(nlohmann::json()).max_conflicts == PlanLimits::kDefaultMaxConflicts);
}

TEST_CASE("plan limits: counted conflicts, conflict lists and the list-free decoder agree with the plain rule",
          "[plan][limits]") {
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    const Problem p = random_problem(300, seed % 3 == 0 ? 300 : 20, seed);
    std::uint64_t pairs = 0;
    for (std::size_t i = 0; i < p.buffers.size(); ++i)
      for (std::size_t j = i + 1; j < p.buffers.size(); ++j) pairs += lifetimes_overlap(p.buffers[i], p.buffers[j]);
    INFO("seed " << seed << ", " << pairs << " pairs");
    CHECK(count_conflicts(p) == pairs);
    std::vector<std::size_t> order(p.buffers.size());
    for (std::size_t k = 0; k < order.size(); ++k) order[k] = (k * 7919 + seed) % order.size();  // a permutation
    for (const Fit fit : {Fit::Best, Fit::BestQuirk, Fit::First}) {
      const auto expected = reference_placement(p, order, fit);
      CHECK(place_in_order(p, order, fit) == expected);                       // conflict lists
      CHECK(place_in_order(p, order, fit, /*max_conflicts=*/1) == expected);  // no lists
    }
  }
}

TEST_CASE("plan limits: above max_conflicts the planner builds no lists and its placement is valid", "[plan][limits]") {
  const Problem p = random_problem(400, 400, 99);
  PlanOptions o;
  o.time_limit_s = 1;
  o.max_conflicts = 100;
  const PlanResult r = plan(p, o);
  CHECK(r.without_lists);
  CHECK(r.conflicts == count_conflicts(p));
  CHECK(r.conflicts > 100);
  CHECK(r.iterations == 0);
  const auto verdict = check_solution(p, write("nolists", format_solution(p, r.offsets)), std::nullopt);
  CHECK(verdict.ok());
  CHECK(verdict.height == r.height);
  CHECK(r.height >= r.lower_bound);
  // The same orderings with lists: the construction is the same, the searches can only lower it.
  o.max_conflicts = PlanLimits::kDefaultMaxConflicts;
  const PlanResult with_lists = plan(p, o);
  CHECK_FALSE(with_lists.without_lists);
  CHECK(with_lists.height <= r.height);
}

TEST_CASE("plan limits: a time limit far too short still ends with a valid placement", "[plan][limits]") {
  // 20,000 buffers alive together in most pairs (10^8 overlapping pairs): one decoding takes
  // far longer than 10 ms on any machine, so the clock stops it and the rest is stacked.
  const Problem dense = random_problem(20'000, 20'000, 7);
  PlanOptions o;
  o.time_limit_s = 0.01;
  const PlanResult r = plan(dense, o);
  CHECK(r.time_cut);
  CHECK(r.without_lists);
  const auto verdict = check_solution(dense, write("cut", format_solution(dense, r.offsets)), std::nullopt);
  CHECK(verdict.ok());
  CHECK(verdict.height == r.height);
  // With conflict lists (a sparse problem), whatever phase the clock stops.
  const Problem sparse = random_problem(20'000, 40, 8);
  const PlanResult s = plan(sparse, o);
  CHECK_FALSE(s.without_lists);
  CHECK(check_solution(sparse, write("cut-sparse", format_solution(sparse, s.offsets)), std::nullopt).ok());
}

}  // namespace plan_limits_test
