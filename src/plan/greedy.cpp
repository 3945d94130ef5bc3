// Greedy placement in a given order, with the offset rules of SmartPool (apache/singa PR #412
// @0f3722d3, src/core/memory/memory.cc: MergeColoredSegments, BestFit/FirstFit) and TFLite's
// GreedyBySizeAssignment (greedy_by_size_assignment.cc: smallest fitting gap, else on top).
#include <algorithm>
#include <limits>
#include <numeric>
#include <utility>

#include "placement.hpp"

namespace coopsim::plan {

namespace detail {

std::vector<std::vector<std::size_t>> build_conflicts(const Problem& problem) {
  const auto& bs = problem.buffers;
  std::vector<std::vector<std::size_t>> conflicts(bs.size());
  for (std::size_t i = 0; i < bs.size(); ++i)
    for (std::size_t j = i + 1; j < bs.size(); ++j)
      if (lifetimes_overlap(bs[i], bs[j])) {
        conflicts[i].push_back(j);
        conflicts[j].push_back(i);
      }
  for (auto& c : conflicts) std::sort(c.begin(), c.end());
  return conflicts;
}

namespace {

using Range = std::pair<std::int64_t, std::int64_t>;  // [begin, end) bytes

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
  if (fit == Fit::BestQuirk && ranges.size() == 1)
    return size <= ranges[0].first ? 0 : ranges[0].second;
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

}  // namespace

std::uint64_t place_suffix(const Problem& problem, const std::vector<std::vector<std::size_t>>& conflicts,
                  const std::vector<std::size_t>& order, const std::vector<std::size_t>& position,
                  std::size_t from, Fit fit, std::vector<std::int64_t>& offsets) {
  std::vector<Range> ranges;
  std::uint64_t visited = 0;
  for (std::size_t t = from; t < order.size(); ++t) {
    const std::size_t i = order[t];
    ranges.clear();
    visited += conflicts[i].size();
    for (const std::size_t j : conflicts[i])
      if (position[j] < t) ranges.emplace_back(offsets[j], offsets[j] + problem.buffers[j].size);
    merge(ranges);
    offsets[i] = choose_offset(ranges, problem.buffers[i].size, fit);
  }
  return visited;
}

}  // namespace detail

std::vector<std::int64_t> place_in_order(const Problem& problem, const std::vector<std::size_t>& order,
                                         Fit fit) {
  // One pass, no conflict lists: each buffer scans the ones placed before it. The lists of a
  // training iteration are dense (most activations are alive together), so building them cost
  // memory and time quadratic anyway; this keeps only what the scan reads, in placement order.
  const auto& bs = problem.buffers;
  std::vector<std::int64_t> offsets(bs.size(), 0);
  struct Placed {
    std::int64_t lower, upper, begin, end;
  };
  std::vector<Placed> placed;
  placed.reserve(order.size());
  std::vector<detail::Range> ranges;
  for (const std::size_t i : order) {
    const Buffer& x = bs[i];
    ranges.clear();
    for (const Placed& p : placed)
      if (x.lower < p.upper && p.lower < x.upper) ranges.emplace_back(p.begin, p.end);  // lifetimes_overlap
    detail::merge(ranges);
    offsets[i] = detail::choose_offset(ranges, x.size, fit);
    placed.push_back({x.lower, x.upper, offsets[i], offsets[i] + x.size});
  }
  return offsets;
}

}  // namespace coopsim::plan
