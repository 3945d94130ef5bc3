// Level search: depth-first search over canonical placements, written from the ideas published
// for MiniMalloc (Moffitt, ASPLOS 2023; docs/models/static-planners.md). No MiniMalloc code is used.
//  * canonical solutions: every buffer sits at its minimum offset (0 or the top of a lifetime-
//    overlapping buffer placed before it), and buffers are placed in non-decreasing order of
//    (offset, preorder rank) — one rising level for the whole problem. Pushing every buffer
//    down as far as it goes turns any placement into this form without raising its height.
//  * dominance: no buffer is placed at or above the top another unplaced buffer would have at
//    its own minimum offset (that buffer could always sit underneath instead).
//  * section inference: nothing unplaced goes below the level, and a section's unplaced
//    buffers stack above the least of their minimum offsets, so max(level, least) + their
//    bytes must fit under the capacity in every section.
//  * dynamic decomposition: when no unplaced buffer crosses a section boundary any more, the
//    two sides are independent and are solved one after the other.
#include <algorithm>
#include <limits>
#include <utility>

#include "exact_search.hpp"

namespace coopsim::plan::detail {

namespace {

class LevelSearch final : public Searcher {
 public:
  LevelSearch(const Layout& layout, std::int64_t capacity, Budget& budget)
      : l_(layout),
        capacity_(capacity),
        budget_(budget),
        offset_(layout.buffers(), kUnplaced),
        min_offset_(layout.buffers(), 0),
        floor_(layout.sections(), 0),
        total_(layout.live),
        cuts_(layout.sections(), 0),
        rank_(layout.buffers(), 0),
        mark_(layout.sections(), 0),
        solution_(layout.buffers(), 0) {
    for (std::size_t i = 0; i < l_.buffers(); ++i)
      for (std::uint32_t s = l_.first[i]; s + 1 < l_.last[i]; ++s) ++cuts_[s];
  }

  Outcome run(const std::vector<std::uint32_t>& preorder, std::uint64_t node_limit) override {
    by_rank_ = preorder;
    for (std::uint32_t r = 0; r < preorder.size(); ++r) rank_[preorder[r]] = r;
    nodes_left_ = node_limit;
    Part all{0, static_cast<std::uint32_t>(l_.sections()), {}};
    for (std::uint32_t i = 0; i < l_.buffers(); ++i) all.buffers.push_back(i);
    return solve_parts(all);
  }

  const std::vector<std::int64_t>& solution() const override { return solution_; }

 private:
  struct Change {
    bool is_floor;  // else a minimum offset
    std::uint32_t index;
    std::int64_t old;
  };

  // Splits `part` at the boundaries no unplaced buffer crosses and solves the pieces in turn.
  Outcome solve_parts(const Part& part) {
    std::vector<std::uint32_t> cuts;
    for (std::uint32_t s = part.lo; s + 1 < part.hi; ++s)
      if (cuts_[s] == 0) cuts.push_back(s + 1);
    budget_.used += part.hi - part.lo;
    if (cuts.empty()) return search(part, 0, 0);
    cuts.push_back(part.hi);
    std::uint32_t lo = part.lo;
    for (const std::uint32_t hi : cuts) {
      Part piece{lo, hi, {}};
      for (const std::uint32_t i : part.buffers)
        if (offset_[i] == kUnplaced && l_.first[i] < hi && lo < l_.last[i]) piece.buffers.push_back(i);
      budget_.used += part.buffers.size();
      lo = hi;
      if (piece.buffers.empty()) continue;
      if (const Outcome s = search(piece, 0, 0); s != Outcome::Found) return s;
    }
    return Outcome::Found;
  }

  Outcome search(const Part& part, std::int64_t level, std::uint32_t last_rank) {
    if (budget_.spent() || nodes_left_ == 0) return Outcome::Aborted;
    --nodes_left_;
    budget_.used += part.buffers.size();
    std::int64_t min_top = kInfinity;
    for (const std::uint32_t i : part.buffers)
      if (offset_[i] == kUnplaced) min_top = std::min(min_top, min_offset_[i] + l_.size[i]);
    if (min_top == kInfinity) return Outcome::Found;
    std::vector<std::pair<std::int64_t, std::uint32_t>> candidates;  // (offset, rank)
    for (const std::uint32_t i : part.buffers) {
      if (offset_[i] != kUnplaced) continue;
      const std::int64_t o = min_offset_[i];
      if (o >= min_top) continue;                                       // dominated
      if (o < level || (o == level && rank_[i] < last_rank)) continue;  // not canonical
      candidates.emplace_back(o, rank_[i]);
    }
    std::sort(candidates.begin(), candidates.end());
    // Placing i at o makes o the level, so every section then needs o + its unplaced bytes
    // (less i's own): prefix/suffix maxima of those bytes reject most candidates unplaced.
    const std::uint32_t width = part.hi - part.lo;
    std::vector<std::int64_t> before(width + 1, 0), after(width + 1, 0);
    for (std::uint32_t k = 0; k < width; ++k) before[k + 1] = std::max(before[k], total_[part.lo + k]);
    for (std::uint32_t k = width; k-- > 0;) after[k] = std::max(after[k + 1], total_[part.lo + k]);
    budget_.used += candidates.size() + std::uint64_t{2} * width;
    for (const auto& [o, r] : candidates) {
      const std::uint32_t i = by_rank_[r];
      std::int64_t rest = std::max(before[l_.first[i] - part.lo], after[l_.last[i] - part.lo]);
      for (std::uint32_t s = l_.first[i]; s < l_.last[i]; ++s) rest = std::max(rest, total_[s] - l_.size[i]);
      budget_.used += l_.last[i] - l_.first[i];
      if (o + rest > capacity_) continue;
      const std::size_t mark = trail_.size();
      place(i, o);
      Outcome s = Outcome::NotFound;
      if (fits(part, o)) s = after_place(part, i, o, r);
      undo(i, mark);
      if (s != Outcome::NotFound) return s;
    }
    return Outcome::NotFound;
  }

  Outcome after_place(const Part& part, std::uint32_t i, std::int64_t o, std::uint32_t r) {
    bool split = false;
    for (std::uint32_t s = l_.first[i]; s + 1 < l_.last[i]; ++s)
      if (--cuts_[s] == 0 && part.lo < s + 1 && s + 1 < part.hi) split = true;
    const Outcome outcome = split ? solve_parts(part) : search(part, o, r);
    for (std::uint32_t s = l_.first[i]; s + 1 < l_.last[i]; ++s) ++cuts_[s];
    return outcome;
  }

  void place(std::uint32_t i, std::int64_t o) {
    offset_[i] = o;
    solution_[i] = o;
    const std::int64_t top = o + l_.size[i];
    ++epoch_;
    affected_.clear();
    budget_.used += l_.overlaps[i].size();
    for (const std::uint32_t j : l_.overlaps[i]) {
      if (offset_[j] != kUnplaced || min_offset_[j] >= top) continue;
      trail_.push_back({false, j, min_offset_[j]});
      min_offset_[j] = top;
      budget_.used += l_.last[j] - l_.first[j];
      for (std::uint32_t s = l_.first[j]; s < l_.last[j]; ++s)
        if (mark_[s] != epoch_) {
          mark_[s] = epoch_;
          affected_.push_back(s);
        }
    }
    // Offsets only rise, so i's top is now the highest placed in each of its sections.
    for (std::uint32_t s = l_.first[i]; s < l_.last[i]; ++s) {
      trail_.push_back({true, s, floor_[s]});
      floor_[s] = top;
      total_[s] -= l_.size[i];
    }
    for (const std::uint32_t s : affected_) {
      std::int64_t least = kInfinity;
      budget_.used += l_.members[s].size();
      for (const std::uint32_t j : l_.members[s])
        if (offset_[j] == kUnplaced) least = std::min(least, min_offset_[j]);
      if (least != kInfinity && floor_[s] < least) {
        trail_.push_back({true, s, floor_[s]});
        floor_[s] = least;
      }
    }
  }

  void undo(std::uint32_t i, std::size_t mark) {
    while (trail_.size() > mark) {
      const Change c = trail_.back();
      trail_.pop_back();
      (c.is_floor ? floor_ : min_offset_)[c.index] = c.old;
    }
    for (std::uint32_t s = l_.first[i]; s < l_.last[i]; ++s) total_[s] += l_.size[i];
    offset_[i] = kUnplaced;
  }

  // Section inference over the part's sections, `level` being the offset just placed.
  bool fits(const Part& part, std::int64_t level) {
    budget_.used += part.hi - part.lo;
    for (std::uint32_t s = part.lo; s < part.hi; ++s)
      if (total_[s] > 0 && std::max(level, floor_[s]) + total_[s] > capacity_) return false;
    return true;
  }

  const Layout& l_;
  const std::int64_t capacity_;
  Budget& budget_;
  std::uint64_t nodes_left_ = 0, epoch_ = 0;
  std::vector<std::int64_t> offset_, min_offset_, floor_, total_;
  std::vector<std::int32_t> cuts_;  // unplaced buffers crossing the boundary after section s
  std::vector<std::uint32_t> rank_, by_rank_;
  std::vector<std::uint64_t> mark_;
  std::vector<std::uint32_t> affected_;
  std::vector<Change> trail_;
  std::vector<std::int64_t> solution_;
};

}  // namespace

std::unique_ptr<Searcher> make_level_search(const Layout& layout, std::int64_t capacity, Budget& budget) {
  return std::make_unique<LevelSearch>(layout, capacity, budget);
}

}  // namespace coopsim::plan::detail
