// Capacity-independent data for the exact search: sections, overlaps, section totals and the
// static preorderings (MiniMalloc's default WAT/TAW/TWA, docs/models/static-planners.md).
#include <algorithm>
#include <numeric>
#include <string_view>

#include "exact_search.hpp"

namespace coopsim::plan::detail {

Layout::Layout(const Problem& problem) {
  const auto& bs = problem.buffers;
  const std::size_t n = bs.size();
  std::vector<std::int64_t> times;
  times.reserve(2 * n);
  for (const auto& b : bs) {
    times.push_back(b.lower);
    times.push_back(b.upper);
  }
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  auto index_of = [&](std::int64_t t) {
    return static_cast<std::uint32_t>(std::lower_bound(times.begin(), times.end(), t) - times.begin());
  };
  const std::size_t sections = times.empty() ? 0 : times.size() - 1;
  members.resize(sections);
  live.assign(sections, 0);
  size.resize(n);
  first.resize(n);
  last.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    size[i] = bs[i].size;
    first[i] = index_of(bs[i].lower);
    last[i] = index_of(bs[i].upper);
    for (std::uint32_t s = first[i]; s < last[i]; ++s) {
      members[s].push_back(static_cast<std::uint32_t>(i));
      live[s] += bs[i].size;
    }
  }
  // Two buffers overlap in time iff they share a section; a sweep over sections finds each
  // pair once (at the later of the two first sections).
  overlaps.resize(n);
  for (std::size_t s = 0; s < sections; ++s)
    for (const std::uint32_t i : members[s]) {
      if (first[i] != s) continue;
      for (const std::uint32_t j : members[s])
        if (j != i && (first[j] < s || (first[j] == s && j < i))) {
          overlaps[i].push_back(j);
          overlaps[j].push_back(i);
        }
    }
  for (auto& o : overlaps) std::sort(o.begin(), o.end());

  std::vector<std::int64_t> total(n, 0);
  for (std::uint32_t i = 0; i < n; ++i)
    for (std::uint32_t s = first[i]; s < last[i]; ++s) total[i] = std::max(total[i], live[s]);
  // W = lifetime width, A = size x width, T = the largest section total over the lifetime.
  auto value = [&](char key, std::uint32_t i) -> std::int64_t {
    const std::int64_t width = bs[i].upper - bs[i].lower;
    return key == 'W' ? width : key == 'A' ? lifetime_area(bs[i]) : total[i];
  };
  for (const std::string_view key : {"WAT", "TAW", "TWA"}) {
    std::vector<std::uint32_t> order(n);
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      for (const char c : key)
        if (value(c, a) != value(c, b)) return value(c, a) > value(c, b);
      return false;
    });
    preorders.push_back(std::move(order));
  }
}

}  // namespace coopsim::plan::detail
