// Internal: the exact decision search (see src/planner/exact.hpp).
//  exact_layout.cpp   capacity-independent data: sections, overlaps, preorderings
//  exact_level.cpp    MiniMalloc-style search: one rising level for the whole problem
//  exact_skyline.cpp  skyline search: always fill the lowest valley of the skyline
//  exact.cpp          the driver: independent parts, restarts, the portfolio of both searches
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "exact.hpp"
#include "placement.hpp"

namespace coopsim::plan::detail {

// Shared by both searches: a buffer's offset before it is placed, and "no bound".
inline constexpr std::int64_t kUnplaced = -1;
inline constexpr std::int64_t kInfinity = std::numeric_limits<std::int64_t>::max();

// A range of sections [lo, hi) decided on its own, with the buffers unplaced when it was made
// (the skyline search keeps them by preorder rank).
struct Part {
  std::uint32_t lo = 0, hi = 0;
  std::vector<std::uint32_t> buffers;
};

// Sections are the intervals between consecutive distinct lifetime end points; buffer i is
// alive in sections [first[i], last[i]). Everything here is independent of the capacity.
struct Layout {
  std::vector<std::int64_t> size;
  std::vector<std::uint32_t> first, last;
  std::vector<std::vector<std::uint32_t>> overlaps;  // lifetime-overlapping buffers, ascending
  std::vector<std::vector<std::uint32_t>> members;   // buffers alive in each section, ascending
  std::vector<std::int64_t> live;                    // bytes alive in each section
  // Static preorderings (buffer indices, most important first): MiniMalloc's WAT, TAW, TWA
  // (W = lifetime width, A = size x width, T = the largest section total over the lifetime;
  // all descending, then by index).
  std::vector<std::vector<std::uint32_t>> preorders;

  explicit Layout(const Problem& problem);
  std::size_t buffers() const { return size.size(); }
  std::size_t sections() const { return live.size(); }
};

enum class Outcome { Found, NotFound, Aborted };

// Work units shared by every search of one decision: a machine-independent count of inner-loop
// steps. An optional clock is the wall-clock safety cut (checked every 256 calls).
struct Budget {
  std::uint64_t used = 0;
  std::uint64_t limit = 0;
  Clock* clock = nullptr;
  std::uint32_t calls = 0;
  bool spent() {
    if (used >= limit) return true;
    if (clock && (++calls & 255) == 0 && clock->expired()) used = limit;
    return used >= limit;
  }
};

// One search style over one Layout and capacity. run() explores with the given preorder (the
// tie-break among equally low choices) until it finds a placement, proves there is none, or
// passes `node_limit` nodes / the budget; the search state is fully restored when it returns.
class Searcher {
 public:
  virtual ~Searcher() = default;
  virtual Outcome run(const std::vector<std::uint32_t>& preorder, std::uint64_t node_limit) = 0;
  virtual const std::vector<std::int64_t>& solution() const = 0;  // after Found
};

std::unique_ptr<Searcher> make_level_search(const Layout& layout, std::int64_t capacity, Budget& budget);
std::unique_ptr<Searcher> make_skyline_search(const Layout& layout, std::int64_t capacity, Budget& budget);

}  // namespace coopsim::plan::detail

namespace coopsim::plan::detail {

// Decides capacities for one problem; reusable across capacities (the layouts are built once).
class ExactSolver {
 public:
  explicit ExactSolver(const Problem& problem);
  // Parts are decided in time order; a part that is infeasible or undecided ends the decision.
  // `seed` varies the randomized restarts (the same seed, the same answer).
  ExactResult decide(std::int64_t capacity, std::uint64_t work_budget, Clock* clock = nullptr,
                     std::uint64_t seed = 0) const;

 private:
  std::size_t buffers_ = 0;
  std::vector<std::vector<std::size_t>> parts_;  // buffer indices of each independent part
  std::vector<Layout> layouts_;
};

}  // namespace coopsim::plan::detail
