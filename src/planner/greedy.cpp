// Greedy placement in a given order, with the offset rules of SmartPool (apache/singa PR #412
// @0f3722d3, src/core/memory/memory.cc: MergeColoredSegments, BestFit/FirstFit) and TFLite's
// GreedyBySizeAssignment (greedy_by_size_assignment.cc: smallest fitting gap, else on top).
#include <algorithm>
#include <bit>
#include <limits>
#include <numeric>
#include <utility>

#include "placement.hpp"

namespace coopsim::plan {

namespace detail {

std::optional<Conflicts> build_conflicts(const Problem& problem, Clock* clock) {
  const auto& bs = problem.buffers;
  const std::size_t n = bs.size();
  // List sizes first (count_conflicts' rule per buffer), then one sweep in order of lower
  // fills them: each buffer meets the ones still alive when it starts.
  std::vector<std::int64_t> lowers(n), uppers(n);
  for (std::size_t i = 0; i < n; ++i) {
    lowers[i] = bs[i].lower;
    uppers[i] = bs[i].upper;
  }
  std::sort(lowers.begin(), lowers.end());
  std::sort(uppers.begin(), uppers.end());
  Conflicts c;
  c.start_.assign(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const auto before_end = std::lower_bound(lowers.begin(), lowers.end(), bs[i].upper) - lowers.begin();
    const auto ended = std::upper_bound(uppers.begin(), uppers.end(), bs[i].lower) - uppers.begin();
    c.start_[i + 1] = c.start_[i] + static_cast<std::uint64_t>(before_end - ended - 1);
  }
  c.list_.resize(c.start_[n]);
  std::vector<std::uint64_t> fill(c.start_.begin(), c.start_.end() - 1);
  std::vector<std::uint32_t> by_lower(n);
  std::iota(by_lower.begin(), by_lower.end(), 0u);
  std::stable_sort(by_lower.begin(), by_lower.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return bs[a].lower < bs[b].lower; });
  std::vector<std::uint32_t> alive;
  constexpr std::size_t kClockStride = 4096;
  for (std::size_t t = 0; t < n; ++t) {
    if (clock != nullptr && t % kClockStride == 0 && clock->expired()) return std::nullopt;
    const std::uint32_t i = by_lower[t];
    std::size_t kept = 0;
    for (const std::uint32_t j : alive) {
      if (bs[j].upper <= bs[i].lower) continue;  // ended: dropped from the sweep
      alive[kept++] = j;
      c.list_[fill[i]++] = j;
      c.list_[fill[j]++] = i;
    }
    alive.resize(kept);
    alive.push_back(i);
  }
  return c;
}

namespace {

// Ranges sorted by begin, merged when touching or overlapping (SINGA merges when
// prev.last + 2 > next.first with inclusive ends, i.e. next.begin <= prev.end here).
void merge(std::vector<Range>& ranges) {
  std::sort(ranges.begin(), ranges.end());
  std::size_t out = 0;
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    if (out > 0 && ranges[i].first <= ranges[out - 1].second)
      ranges[out - 1].second = std::max(ranges[out - 1].second, ranges[i].second);
    else
      ranges[out++] = ranges[i];
  }
  ranges.resize(out);
}

}  // namespace

std::int64_t choose_offset(const std::vector<Range>& ranges, std::int64_t size, Fit fit) {
  if (ranges.empty()) return 0;
  if (fit == Fit::First) {
    std::int64_t candidate = 0;
    for (const auto& r : ranges) {
      if (r.first - candidate >= size) return candidate;
      candidate = r.second;
    }
    return candidate;
  }
  if (fit == Fit::BestQuirk && ranges.size() == 1) return size <= ranges[0].first ? 0 : ranges[0].second;
  // Best fit: the smallest gap that fits, the lowest on ties; BestQuirk (SINGA, >= 2 ranges)
  // does not consider the gap below the lowest range.
  std::int64_t best = -1;
  std::int64_t best_gap = std::numeric_limits<std::int64_t>::max();
  std::int64_t prev_end = 0;
  for (std::size_t k = 0; k < ranges.size(); ++k) {
    const std::int64_t gap = ranges[k].first - prev_end;
    const bool considered = !(fit == Fit::BestQuirk && k == 0);
    if (considered && gap >= size && gap < best_gap) {
      best_gap = gap;
      best = prev_end;
    }
    prev_end = ranges[k].second;
  }
  return best >= 0 ? best : prev_end;
}

namespace {

// The clock is read every this many placements.
constexpr std::size_t kClockStride = 64;

bool out_of_time(Clock* clock, std::size_t t) { return clock != nullptr && t % kClockStride == 0 && clock->expired(); }

// order[t..] stacked above everything order[..t) occupies: valid whatever the conflicts.
void stack_rest(const Problem& problem, const std::vector<std::size_t>& order, std::size_t t,
                std::vector<std::int64_t>& offsets) {
  std::int64_t top = 0;
  for (std::size_t k = 0; k < t; ++k) top = std::max(top, end_of(offsets[order[k]], problem.buffers[order[k]].size));
  for (std::size_t k = t; k < order.size(); ++k) {
    offsets[order[k]] = top;
    top = end_of(top, problem.buffers[order[k]].size);
  }
}

}  // namespace

std::uint64_t place_by_scan(const Problem& problem, const std::vector<std::size_t>& order, Fit fit,
                            std::vector<std::int64_t>& offsets, Clock* clock) {
  AddressOrder placed;
  std::vector<Range> ranges;
  std::uint64_t visited = 0;
  for (std::size_t t = 0; t < order.size(); ++t) {
    if (out_of_time(clock, t)) {
      stack_rest(problem, order, t, offsets);
      break;
    }
    const Buffer& x = problem.buffers[order[t]];
    visited += placed.overlapping(x.lower, x.upper, ranges);
    const std::int64_t o = choose_offset(ranges, x.size, fit);
    offsets[order[t]] = o;
    placed.insert({o, end_of(o, x.size), x.lower, x.upper});
  }
  return visited;
}

std::uint64_t place_suffix(const Problem& problem, const Conflicts& conflicts, const std::vector<std::size_t>& order,
                           const std::vector<std::size_t>& position, std::size_t from, Fit fit,
                           std::vector<std::int64_t>& offsets, Clock* clock, std::uint64_t* sorted) {
  std::vector<Range> ranges;
  std::uint64_t visited = 0;
  for (std::size_t t = from; t < order.size(); ++t) {
    if (t > from && out_of_time(clock, t)) {
      stack_rest(problem, order, t, offsets);
      break;
    }
    const std::size_t i = order[t];
    ranges.clear();
    visited += conflicts[i].size();
    for (const std::uint32_t j : conflicts[i])
      if (position[j] < t) ranges.emplace_back(offsets[j], end_of(offsets[j], problem.buffers[j].size));
    if (sorted != nullptr) *sorted += ranges.size() * static_cast<std::uint64_t>(std::bit_width(ranges.size()));
    merge(ranges);
    offsets[i] = choose_offset(ranges, problem.buffers[i].size, fit);
  }
  return visited;
}

}  // namespace detail

std::vector<std::int64_t> place_in_order(const Problem& problem, const std::vector<std::size_t>& order, Fit fit,
                                         std::uint64_t max_conflicts) {
  // Conflict lists for sparse problems (work linear in the pairs, plus sorting each buffer's
  // ranges); the lifetime index for dense ones, where it is cheaper than building and sorting
  // the lists (a training iteration: most activations alive together), and above the cap (one
  // pass over all placed buffers per buffer, the scan, made this quadratic: issue 18). All see
  // the same ranges, so the offsets are the same.
  std::vector<std::int64_t> offsets(problem.buffers.size(), 0);
  const std::uint64_t n = problem.buffers.size(), pairs = count_conflicts(problem);
  if (pairs > max_conflicts || pairs >= n * n / 16) {
    if (!detail::place_by_lifetime_index(problem, order, fit, offsets))
      detail::place_by_scan(problem, order, fit, offsets);
    return offsets;
  }
  std::vector<std::size_t> position(order.size());
  for (std::size_t t = 0; t < order.size(); ++t) position[order[t]] = t;
  detail::place_suffix(problem, *detail::build_conflicts(problem), order, position, 0, fit, offsets);
  return offsets;
}

}  // namespace coopsim::plan
