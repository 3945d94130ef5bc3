// Method dispatch and the default `planner`: multi-ordering greedy construction followed by a
// deterministic local search over the placement order (move a buffer that reaches the current
// height earlier, or swap two buffers; keep the change when the height does not grow). The
// orderings include MiniMalloc's static preorderings WAT/TAW/TWA (google/minimalloc
// src/solver.cc PreorderingComparator: W = lifespan width, A = size x width, T = max section
// total; all descending). The iteration budget is a fixed function of --time-limit so results do
// not depend on the machine; the wall clock is only a safety cut, reported in the result.
#include <algorithm>
#include <chrono>
#include <functional>
#include <numeric>
#include <random>
#include <tuple>

#include "coopsim/error.hpp"
#include "placement.hpp"

namespace coopsim::plan {

Method parse_method(const std::string& name) {
  if (name == "smartpool-bf") return Method::SmartPoolBF;
  if (name == "smartpool-ff") return Method::SmartPoolFF;
  if (name == "greedy-by-size") return Method::GreedyBySize;
  if (name == "planner") return Method::Planner;
  throw ConfigError("--method", "unknown method '" + name +
                                    "' (expected smartpool-bf, smartpool-ff, greedy-by-size or planner)");
}

std::string method_name(Method method) {
  switch (method) {
    case Method::SmartPoolBF: return "smartpool-bf";
    case Method::SmartPoolFF: return "smartpool-ff";
    case Method::GreedyBySize: return "greedy-by-size";
    case Method::Planner: return "planner";
  }
  return "?";
}

namespace {

// Local-search work (conflict-list entries visited by the decoder) per second of --time-limit:
// a machine-independent budget, set so that the search ends well inside the limit on the
// challenging set and resnet50 (measured; see docs/results-planner.md).
constexpr std::uint64_t kWorkPerSecond = 25'000'000;

std::vector<std::size_t> identity(std::size_t n) {
  std::vector<std::size_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// Max total live bytes over each buffer's lifetime (MiniMalloc's "section total").
std::vector<std::int64_t> section_totals(const Problem& problem) {
  const auto& bs = problem.buffers;
  std::vector<std::int64_t> times;
  for (const auto& b : bs) times.push_back(b.lower);
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  std::vector<std::int64_t> live(times.size(), 0);
  for (const auto& b : bs)
    for (auto t = std::lower_bound(times.begin(), times.end(), b.lower); t != times.end() && *t < b.upper; ++t)
      live[static_cast<std::size_t>(t - times.begin())] += b.size;
  std::vector<std::int64_t> total(bs.size(), 0);
  for (std::size_t i = 0; i < bs.size(); ++i)
    for (auto t = std::lower_bound(times.begin(), times.end(), bs[i].lower); t != times.end() && *t < bs[i].upper; ++t)
      total[i] = std::max(total[i], live[static_cast<std::size_t>(t - times.begin())]);
  return total;
}

std::vector<std::vector<std::size_t>> candidate_orders(const Problem& problem) {
  const auto& bs = problem.buffers;
  const auto T = section_totals(problem);
  auto W = [&](std::size_t i) { return bs[i].upper - bs[i].lower; };
  auto A = [&](std::size_t i) { return bs[i].size * W(i); };
  using Key = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>;
  std::vector<std::function<Key(std::size_t)>> keys = {
      [&](std::size_t i) { return Key{-bs[i].size, bs[i].lower, 0, 0}; },    // SmartPool
      [&](std::size_t i) { return Key{-W(i), -A(i), -T[i], 0}; },            // WAT
      [&](std::size_t i) { return Key{-T[i], -A(i), -W(i), 0}; },            // TAW
      [&](std::size_t i) { return Key{-T[i], -W(i), -A(i), 0}; },            // TWA
      [&](std::size_t i) { return Key{-A(i), -bs[i].size, 0, 0}; },          // area
      [&](std::size_t i) { return Key{-T[i], -bs[i].size, bs[i].lower, 0}; },  // pressure, size
      [&](std::size_t i) { return Key{bs[i].lower, -bs[i].size, 0, 0}; },    // by start time
  };
  std::vector<std::vector<std::size_t>> orders;
  for (const auto& key : keys) {
    auto order = identity(bs.size());
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
    orders.push_back(std::move(order));
  }
  return orders;
}

struct Candidate {
  std::vector<std::size_t> order;
  Fit fit = Fit::Best;
  std::vector<std::int64_t> offsets;
  std::int64_t height = 0;
};

PlanResult run_planner(const Problem& problem, const PlanOptions& options, PlanResult result) {
  const std::size_t n = problem.buffers.size();
  const auto conflicts = detail::build_conflicts(problem);
  Candidate best;
  bool have = false;
  for (auto& order : candidate_orders(problem))
    for (const Fit fit : {Fit::Best, Fit::First}) {
      std::vector<std::size_t> position(n);
      for (std::size_t t = 0; t < n; ++t) position[order[t]] = t;
      std::vector<std::int64_t> offsets(n, 0);
      detail::place_suffix(problem, conflicts, order, position, 0, fit, offsets);
      const auto h = placement_height(problem, offsets);
      if (!have || h < best.height) {
        best = Candidate{order, fit, offsets, h};
        have = true;
      }
    }
  if (n < 2) {
    result.offsets = best.offsets;
    result.height = best.height;
    return result;
  }
  // Local search over the order of the best construction.
  const auto budget = static_cast<std::uint64_t>(std::max(0.0, options.time_limit_s) * kWorkPerSecond);
  std::uint64_t work = 0;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(std::max(0.0, options.time_limit_s));
  std::mt19937_64 rng(0x5eed);  // fixed seed; raw draws only (distributions are not portable)
  auto draw = [&](std::size_t bound) { return static_cast<std::size_t>(rng() % bound); };
  std::vector<std::size_t> order = best.order, position(n);
  for (std::size_t t = 0; t < n; ++t) position[order[t]] = t;
  std::vector<std::int64_t> offsets = best.offsets;
  std::int64_t height = best.height;
  std::vector<std::size_t> critical;
  for (std::uint64_t it = 0; work < budget && height > result.lower_bound; ++it) {
    if ((it & 63) == 0 && std::chrono::steady_clock::now() > deadline) {
      result.time_cut = true;
      break;
    }
    ++result.iterations;
    auto trial = order;
    std::size_t from = 0;
    if (draw(4) != 0) {
      critical.clear();
      for (std::size_t t = 0; t < n; ++t)
        if (offsets[order[t]] + problem.buffers[order[t]].size == height) critical.push_back(t);
      const std::size_t p = critical[draw(critical.size())];
      if (p == 0) continue;
      const std::size_t q = draw(p);
      std::rotate(trial.begin() + static_cast<std::ptrdiff_t>(q), trial.begin() + static_cast<std::ptrdiff_t>(p),
                  trial.begin() + static_cast<std::ptrdiff_t>(p) + 1);
      from = q;
    } else {
      const std::size_t a = draw(n), b = draw(n);
      if (a == b) continue;
      std::swap(trial[a], trial[b]);
      from = std::min(a, b);
    }
    auto trial_position = position;
    for (std::size_t t = from; t < n; ++t) trial_position[trial[t]] = t;
    auto trial_offsets = offsets;
    work += n + detail::place_suffix(problem, conflicts, trial, trial_position, from, best.fit, trial_offsets);
    const auto h = placement_height(problem, trial_offsets);
    if (h <= height) {
      order = std::move(trial);
      position = std::move(trial_position);
      offsets = std::move(trial_offsets);
      height = h;
    }
  }
  result.offsets = std::move(offsets);
  result.height = height;
  return result;
}

std::vector<std::size_t> size_descending(const Problem& problem, bool ties_by_lower) {
  auto order = identity(problem.buffers.size());
  const auto& bs = problem.buffers;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (bs[a].size != bs[b].size) return bs[a].size > bs[b].size;
    return ties_by_lower && bs[a].lower < bs[b].lower;
  });
  return order;
}

}  // namespace

PlanResult plan(const Problem& problem, const PlanOptions& options) {
  PlanResult result;
  result.lower_bound = max_live_bytes(problem);
  switch (options.method) {
    case Method::SmartPoolBF:
      result.offsets = place_in_order(problem, size_descending(problem, true),
                                      options.bf_quirk ? Fit::BestQuirk : Fit::Best);
      break;
    case Method::SmartPoolFF:
      result.offsets = place_in_order(problem, size_descending(problem, true), Fit::First);
      break;
    case Method::GreedyBySize:
      result.offsets = place_in_order(problem, size_descending(problem, false), Fit::Best);
      break;
    case Method::Planner:
      result = run_planner(problem, options, result);
      break;
  }
  result.height = placement_height(problem, result.offsets);
  result.proven_optimal = result.height == result.lower_bound;
  if (options.capacity && result.height > *options.capacity)
    throw Error(problem.file + ": " + method_name(options.method) + " found height " + std::to_string(result.height) +
                " > capacity " + std::to_string(*options.capacity));
  return result;
}

}  // namespace coopsim::plan
