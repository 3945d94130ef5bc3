// Skyline search: depth-first search that always fills the lowest valley of the skyline (the
// tops placed so far, per section), in the manner of bottom-left-fill searches for rectangle
// packing, with MiniMalloc's section inference and dynamic decomposition (docs/models/static-planners.md).
// Unlike the level search there is no global level: each region of the time axis rises on its
// own.
//  * branching: at the lowest valley V (a maximal run of sections at the least floor f), either
//    some buffer whose whole lifetime lies in V sits at f, or nothing in V sits at f and V rises
//    to the lower of its neighbours. Complete: a buffer at f in V cannot reach past V (its
//    neighbours are higher), and when nothing sits at f, the lowest buffer starting below the
//    neighbours lies inside V and could be pushed down to f. For the same reason a valley
//    spanning its whole part never rises.
//  * symmetry: once "i at f" has failed, later siblings exclude i at f (a completion of theirs
//    with i at f would also be one of i's).
//  * inference: a buffer's minimum offset is the highest floor over its lifetime; each section's
//    unplaced buffers stack above the least of those and must fit under the capacity.
#include <algorithm>
#include <limits>
#include <utility>

#include "exact_search.hpp"

namespace coopsim::plan::detail {

namespace {

constexpr std::int64_t kNone = -1;

class SkylineSearch final : public Searcher {
 public:
  SkylineSearch(const Layout& layout, std::int64_t capacity, Budget& budget)
      : l_(layout),
        capacity_(capacity),
        budget_(budget),
        offset_(layout.buffers(), kUnplaced),
        low_(layout.buffers(), 0),
        skip_(layout.buffers(), kNone),
        floor_(layout.sections(), 0),
        total_(layout.live),
        cuts_(layout.sections(), 0),
        mark_(layout.sections(), 0),
        solution_(layout.buffers(), 0) {
    trail_.reserve(4 * (l_.buffers() + l_.sections()));
    for (std::size_t i = 0; i < l_.buffers(); ++i)
      for (std::uint32_t s = l_.first[i]; s + 1 < l_.last[i]; ++s) ++cuts_[s];
  }

  Outcome run(const std::vector<std::uint32_t>& preorder, std::uint64_t node_limit) override {
    nodes_left_ = node_limit;
    return solve_parts(Part{0, static_cast<std::uint32_t>(l_.sections()), preorder});
  }

  const std::vector<std::int64_t>& solution() const override { return solution_; }

 private:
  struct Change {
    std::int64_t* slot;
    std::int64_t old;
  };

  void set(std::int64_t& slot, std::int64_t value) {
    trail_.push_back({&slot, slot});
    slot = value;
  }

  void undo_to(std::size_t mark) {
    for (; trail_.size() > mark; trail_.pop_back()) *trail_.back().slot = trail_.back().old;
  }

  // Splits `part` at the boundaries no unplaced buffer crosses and solves the pieces in turn.
  Outcome solve_parts(const Part& part) {
    std::vector<std::uint32_t> cuts;
    for (std::uint32_t s = part.lo; s + 1 < part.hi; ++s)
      if (cuts_[s] == 0) cuts.push_back(s + 1);
    budget_.used += part.hi - part.lo;
    if (cuts.empty()) return search(part);
    cuts.push_back(part.hi);
    std::uint32_t lo = part.lo;
    for (const std::uint32_t hi : cuts) {
      Part piece{lo, hi, {}};
      for (const std::uint32_t i : part.buffers)
        if (offset_[i] == kUnplaced && l_.first[i] < hi && lo < l_.last[i]) piece.buffers.push_back(i);
      budget_.used += part.buffers.size();
      lo = hi;
      if (piece.buffers.empty()) continue;
      if (const Outcome s = search(piece); s != Outcome::Found) return s;
    }
    return Outcome::Found;
  }

  bool live(std::uint32_t s) const { return total_[s] > 0; }

  Outcome search(const Part& part) {
    if (budget_.spent() || nodes_left_ == 0) return Outcome::Aborted;
    --nodes_left_;
    // The lowest valley [a, b) at floor f: the leftmost live section at the least floor,
    // extended over live neighbours at the same floor.
    budget_.used += part.buffers.size() + part.hi - part.lo;
    std::uint32_t a = part.hi;
    for (std::uint32_t s = part.lo; s < part.hi; ++s)
      if (live(s) && (a == part.hi || floor_[s] < floor_[a])) a = s;
    if (a == part.hi) return Outcome::Found;
    const std::int64_t f = floor_[a];
    std::uint32_t b = a + 1;
    while (a > part.lo && live(a - 1) && floor_[a - 1] == f) --a;
    while (b < part.hi && live(b) && floor_[b] == f) ++b;
    const std::size_t mark = trail_.size();
    for (const std::uint32_t i : part.buffers) {
      if (offset_[i] != kUnplaced || l_.first[i] < a || l_.last[i] > b || skip_[i] == f) continue;
      if (f + l_.size[i] > capacity_) continue;
      const std::size_t before = trail_.size();
      place(i, f);
      Outcome s = Outcome::NotFound;
      if (consistent()) s = after_place(part, i);
      undo_place(i, before);
      if (s != Outcome::NotFound) {
        undo_to(mark);
        return s;
      }
      set(skip_[i], f);
    }
    // Nothing sits at f anywhere in the valley: raise it to its lower neighbour.
    std::int64_t to = kInfinity;
    if (a > part.lo && live(a - 1)) to = std::min(to, floor_[a - 1]);
    if (b < part.hi && live(b)) to = std::min(to, floor_[b]);
    Outcome s = Outcome::NotFound;
    if (to != kInfinity) {
      raise(a, b, to);
      if (consistent()) s = search(part);
    }
    undo_to(mark);
    return s;
  }

  Outcome after_place(const Part& part, std::uint32_t i) {
    bool split = false;
    for (std::uint32_t s = l_.first[i]; s + 1 < l_.last[i]; ++s)
      if (--cuts_[s] == 0 && part.lo < s + 1 && s + 1 < part.hi) split = true;
    const Outcome outcome = split ? solve_parts(part) : search(part);
    for (std::uint32_t s = l_.first[i]; s + 1 < l_.last[i]; ++s) ++cuts_[s];
    return outcome;
  }

  void touch(std::uint32_t s) {
    if (mark_[s] != epoch_) {
      mark_[s] = epoch_;
      affected_.push_back(s);
    }
  }

  // Sections [a, b) got new floors: raise their unplaced buffers' minimum offsets.
  void propagate(std::uint32_t a, std::uint32_t b) {
    ++epoch_;
    affected_.clear();
    for (std::uint32_t s = a; s < b; ++s) {
      touch(s);
      budget_.used += l_.members[s].size();
      for (const std::uint32_t j : l_.members[s]) {
        if (offset_[j] != kUnplaced || low_[j] >= floor_[s]) continue;
        set(low_[j], floor_[s]);
        budget_.used += l_.last[j] - l_.first[j];
        for (std::uint32_t t = l_.first[j]; t < l_.last[j]; ++t) touch(t);
      }
    }
  }

  void place(std::uint32_t i, std::int64_t o) {
    offset_[i] = o;
    solution_[i] = o;
    for (std::uint32_t s = l_.first[i]; s < l_.last[i]; ++s) {
      set(floor_[s], o + l_.size[i]);
      total_[s] -= l_.size[i];
    }
    propagate(l_.first[i], l_.last[i]);
  }

  void undo_place(std::uint32_t i, std::size_t mark) {
    undo_to(mark);
    for (std::uint32_t s = l_.first[i]; s < l_.last[i]; ++s) total_[s] += l_.size[i];
    offset_[i] = kUnplaced;
  }

  void raise(std::uint32_t a, std::uint32_t b, std::int64_t to) {
    for (std::uint32_t s = a; s < b; ++s) set(floor_[s], to);
    propagate(a, b);
  }

  // Every affected section: its unplaced buffers stack at or above the least of their minimum
  // offsets (itself at least the floor) and must fit under the capacity. The scan stops at the
  // first buffer low enough.
  bool consistent() {
    for (const std::uint32_t s : affected_) {
      if (!live(s)) continue;
      const std::int64_t room = capacity_ - total_[s];  // the highest the stack may start
      if (floor_[s] > room) return false;
      bool fits = false;
      for (const std::uint32_t j : l_.members[s]) {
        ++budget_.used;
        if (offset_[j] == kUnplaced && low_[j] <= room) {
          fits = true;
          break;
        }
      }
      if (!fits) return false;
    }
    return true;
  }

  const Layout& l_;
  const std::int64_t capacity_;
  Budget& budget_;
  std::uint64_t nodes_left_ = 0, epoch_ = 0;
  std::vector<std::int64_t> offset_;
  std::vector<std::int64_t> low_;   // per buffer: the highest floor over its lifetime
  std::vector<std::int64_t> skip_;  // per buffer: an offset excluded by a failed sibling
  std::vector<std::int64_t> floor_, total_;
  std::vector<std::int32_t> cuts_;  // unplaced buffers crossing the boundary after section s
  std::vector<std::uint64_t> mark_;
  std::vector<std::uint32_t> affected_;
  std::vector<Change> trail_;
  std::vector<std::int64_t> solution_;
};

}  // namespace

std::unique_ptr<Searcher> make_skyline_search(const Layout& layout, std::int64_t capacity, Budget& budget) {
  return std::make_unique<SkylineSearch>(layout, capacity, budget);
}

}  // namespace coopsim::plan::detail
