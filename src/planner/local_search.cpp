// The planner's heuristic half: greedy construction from several orderings, then a
// deterministic local search over the placement order (move a buffer that reaches the current
// height earlier, or swap two buffers; keep the change when the height does not grow). The
// orderings include MiniMalloc's static preorderings WAT/TAW/TWA (google/minimalloc
// src/solver.cc PreorderingComparator: W = lifespan width, A = size x width, T = max section
// total; all descending).
#include <algorithm>
#include <functional>
#include <numeric>
#include <random>
#include <tuple>

#include "placement.hpp"

namespace coopsim::plan::detail {

namespace {

std::vector<std::size_t> identity(std::size_t n) {
  std::vector<std::size_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// Max total live bytes over each buffer's lifetime (MiniMalloc's "section total"), sampled at
// the distinct start times: prefix sums give the bytes alive at each, a segment tree of maxima
// the largest over each lifetime (O(n log n); dense problems made the direct loops quadratic).
std::vector<std::int64_t> section_totals(const Problem& problem) {
  const auto& bs = problem.buffers;
  std::vector<std::int64_t> times;
  for (const auto& b : bs) times.push_back(b.lower);
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  const std::size_t s = times.size();
  auto first_at = [&](std::int64_t t) {  // index of the first time >= t
    return static_cast<std::size_t>(std::lower_bound(times.begin(), times.end(), t) - times.begin());
  };
  std::vector<std::int64_t> tree(2 * s, 0);  // leaves tree[s + k] = bytes alive at times[k]
  for (const auto& b : bs) {
    tree[s + first_at(b.lower)] += b.size;
    if (const std::size_t end = first_at(b.upper); end < s) tree[s + end] -= b.size;
  }
  for (std::size_t k = 1; k < s; ++k) tree[s + k] += tree[s + k - 1];  // at most the sum of sizes
  for (std::size_t k = s; k-- > 1;) tree[k] = std::max(tree[2 * k], tree[2 * k + 1]);
  auto max_over = [&](std::size_t lo, std::size_t hi) {  // [lo, hi), non-empty
    std::int64_t m = 0;
    for (lo += s, hi += s; lo < hi; lo /= 2, hi /= 2) {
      if (lo & 1) m = std::max(m, tree[lo++]);
      if (hi & 1) m = std::max(m, tree[--hi]);
    }
    return m;
  };
  std::vector<std::int64_t> total(bs.size(), 0);
  for (std::size_t i = 0; i < bs.size(); ++i) total[i] = max_over(first_at(bs[i].lower), first_at(bs[i].upper));
  return total;
}

}  // namespace

std::vector<std::vector<std::size_t>> candidate_orders(const Problem& problem) {
  const auto& bs = problem.buffers;
  const auto T = section_totals(problem);
  auto W = [&](std::size_t i) { return bs[i].upper - bs[i].lower; };
  auto A = [&](std::size_t i) { return lifetime_area(bs[i]); };
  using Key = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>;
  std::vector<std::function<Key(std::size_t)>> keys = {
      [&](std::size_t i) {
        return Key{-bs[i].size, bs[i].lower, 0, 0};
      },  // SmartPool
      [&](std::size_t i) {
        return Key{-W(i), -A(i), -T[i], 0};
      },  // WAT
      [&](std::size_t i) {
        return Key{-T[i], -A(i), -W(i), 0};
      },  // TAW
      [&](std::size_t i) {
        return Key{-T[i], -W(i), -A(i), 0};
      },  // TWA
      [&](std::size_t i) {
        return Key{-A(i), -bs[i].size, 0, 0};
      },  // area
      [&](std::size_t i) {
        return Key{-T[i], -bs[i].size, bs[i].lower, 0};
      },  // pressure, size
      [&](std::size_t i) {
        return Key{bs[i].lower, -bs[i].size, 0, 0};
      },  // by start time
  };
  std::vector<std::vector<std::size_t>> orders;
  for (const auto& key : keys) {
    auto order = identity(bs.size());
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
    orders.push_back(std::move(order));
  }
  return orders;
}

Construction best_construction(const Problem& problem, const Conflicts* conflicts, std::uint64_t budget, Clock& clock,
                               std::uint64_t& work) {
  const std::size_t n = problem.buffers.size();
  Construction best;
  bool have = false;
  for (auto& order : candidate_orders(problem))
    for (const Fit fit : {Fit::Best, Fit::First}) {
      if (have && (work >= budget || clock.fired())) return best;
      std::vector<std::int64_t> offsets(n, 0);
      if (conflicts != nullptr) {
        std::vector<std::size_t> position(n);
        for (std::size_t t = 0; t < n; ++t) position[order[t]] = t;
        work += place_suffix(problem, *conflicts, order, position, 0, fit, offsets, &clock, &work);
      } else {
        work += place_by_scan(problem, order, fit, offsets, &clock);
      }
      const auto h = placement_height(problem, offsets);
      if (!have || h < best.height) {
        best = Construction{order, fit, offsets, h};
        have = true;
      }
    }
  return best;
}

std::uint64_t local_search(const Problem& problem, const Conflicts& conflicts, Construction& best, std::uint64_t budget,
                           std::int64_t stop_at, Clock& clock) {
  const std::size_t n = problem.buffers.size();
  if (n < 2) return 0;
  std::uint64_t work = 0, iterations = 0;
  std::mt19937_64 rng(0x5eed);  // fixed seed; raw draws only (distributions are not portable)
  auto draw = [&](std::size_t bound) { return static_cast<std::size_t>(rng() % bound); };
  std::vector<std::size_t> order = best.order, position(n);
  for (std::size_t t = 0; t < n; ++t) position[order[t]] = t;
  std::vector<std::int64_t> offsets = best.offsets;
  std::int64_t height = best.height;
  std::vector<std::size_t> critical;
  // The clock is read every 64 iterations, and after every iteration that visited many
  // entries (one iteration of a large problem can take a good fraction of a second).
  constexpr std::uint64_t kClockWork = 1 << 20;
  std::uint64_t read_at = 0;
  for (std::uint64_t it = 0; work < budget && height > stop_at; ++it) {
    if ((it & 63) == 0 || work - read_at >= kClockWork) {
      read_at = work;
      if (clock.expired()) break;
    }
    ++iterations;
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
    work += n + place_suffix(problem, conflicts, trial, trial_position, from, best.fit, trial_offsets, &clock, &work);
    const auto h = placement_height(problem, trial_offsets);
    if (h <= height) {
      order = std::move(trial);
      position = std::move(trial_position);
      offsets = std::move(trial_offsets);
      height = h;
    }
  }
  best.order = std::move(order);
  best.offsets = std::move(offsets);
  best.height = height;
  return iterations;
}

}  // namespace coopsim::plan::detail
