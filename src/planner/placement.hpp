// Internal: conflict lists and the greedy decoders shared by the greedy methods and the planner,
// the planner's construction and local search (local_search.cpp), and its safety clock.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "coopsim/planner/planner.hpp"

namespace coopsim::plan::detail {

class Clock;

// Conflict lists in one array: conflicts[i] = the buffers whose lifetimes overlap buffer i's,
// in no particular order. 8 bytes per overlapping pair plus 8 per buffer: memory linear in the
// pairs stored (callers keep those under PlanLimits::max_conflicts).
class Conflicts {
 public:
  std::span<const std::uint32_t> operator[](std::size_t i) const {
    return {list_.data() + start_[i], list_.data() + start_[i + 1]};
  }

 private:
  friend std::optional<Conflicts> build_conflicts(const Problem& problem, Clock* clock);
  std::vector<std::uint64_t> start_;  // buffer i's list is list_[start_[i], start_[i + 1])
  std::vector<std::uint32_t> list_;
};

// A sweep over lifetimes: O(n log n + pairs) time, no pair tested twice. Nothing when the
// clock, read every 4,096 buffers of the sweep, expires on the way.
std::optional<Conflicts> build_conflicts(const Problem& problem, Clock* clock = nullptr);

// Places order[from..] given that order[..from) already hold valid offsets in `offsets`.
// `position[i]` must be i's index in `order`. Buffers placed later never move earlier ones.
// Returns the number of conflict-list entries visited (a machine-independent work measure);
// `sorted`, when given, gets the sorting work on top (k log k for k ranges), which dominates on
// dense problems. With a clock that expires on the way, the buffers not yet placed are stacked
// above all the others (a valid placement, however high).
std::uint64_t place_suffix(const Problem& problem, const Conflicts& conflicts, const std::vector<std::size_t>& order,
                           const std::vector<std::size_t>& position, std::size_t from, Fit fit,
                           std::vector<std::int64_t>& offsets, Clock* clock = nullptr, std::uint64_t* sorted = nullptr);

// The same rules without conflict lists, for problems whose pairs exceed the cap: the placed
// buffers are kept in address order, so one pass over them yields the ranges in order (O(n)
// memory, O(n) work per buffer). Returns the placed buffers visited; stacks the rest like
// place_suffix when the clock expires.
std::uint64_t place_by_scan(const Problem& problem, const std::vector<std::size_t>& order, Fit fit,
                            std::vector<std::int64_t>& offsets, Clock* clock = nullptr);

// [begin, end) bytes of placed buffers.
using Range = std::pair<std::int64_t, std::int64_t>;

// The offset for a buffer of `size` bytes given the ranges of the placed buffers whose
// lifetimes overlap its own, sorted and merged when touching: SmartPool's best fit with or
// without its quirk, or first fit.
std::int64_t choose_offset(const std::vector<Range>& ranges, std::int64_t size, Fit fit);

// Placed buffers in address order, in chunks of at most 2 x kChunk so that an insertion moves
// few entries and a pass over them stays sequential in memory.
class AddressOrder {
 public:
  struct Placed {
    std::int64_t begin, end, lower, upper;
  };

  // The merged address ranges of placed buffers whose lifetimes overlap [lower, upper).
  std::uint64_t overlapping(std::int64_t lower, std::int64_t upper, std::vector<Range>& out) const {
    out.clear();
    std::uint64_t visited = 0;
    for (const auto& chunk : chunks_) {
      visited += chunk.size();
      for (const Placed& p : chunk) {
        if (!(p.lower < upper && lower < p.upper)) continue;  // lifetimes_overlap
        if (!out.empty() && p.begin <= out.back().second)
          out.back().second = std::max(out.back().second, p.end);
        else
          out.emplace_back(p.begin, p.end);
      }
    }
    return visited;
  }

  [[nodiscard]] std::size_t size() const { return size_; }

  void insert(const Placed& p) {
    auto by_begin = [](const Placed& a, const Placed& b) { return a.begin < b.begin; };
    ++size_;
    if (chunks_.empty()) chunks_.emplace_back();
    // The last chunk starting at or below p (the first one when none does).
    auto c =
        std::upper_bound(chunks_.begin() + 1, chunks_.end(), p,
                         [&](const Placed& x, const std::vector<Placed>& chunk) { return by_begin(x, chunk.front()); });
    auto& chunk = *std::prev(c);
    chunk.insert(std::upper_bound(chunk.begin(), chunk.end(), p, by_begin), p);
    if (chunk.size() < 2 * kChunk) return;
    std::vector<Placed> upper_half(chunk.begin() + kChunk, chunk.end());
    chunk.resize(kChunk);
    chunks_.insert(c, std::move(upper_half));
  }

 private:
  static constexpr std::size_t kChunk = 256;
  std::vector<std::vector<Placed>> chunks_;
  std::size_t size_ = 0;
};

// place_by_scan's offsets from an index of the placed buffers by lifetime (lifetime_index.cpp):
// work per buffer grows with the disjoint runs of the ranges it meets, not with all placed
// buffers. Returns false, placing nothing, when a buffer has an empty size or lifetime (keep the scan).
bool place_by_lifetime_index(const Problem& problem, const std::vector<std::size_t>& order, Fit fit,
                             std::vector<std::int64_t>& offsets);

// The wall-clock safety cut: results must come from work limits; this only stops a run that
// would overstay the time limit on a very slow machine (and says so in the result). Every
// phase reads it (the conflict lists' sweep, each decoding, the exact and local searches).
class Clock {
 public:
  using Seconds = std::chrono::duration<double>;
  explicit Clock(double seconds)
      : deadline_(std::chrono::time_point_cast<Seconds>(std::chrono::steady_clock::now()) + Seconds(seconds)) {}
  // For tests: a clock that expires at its (reads + 1)-th read whatever the time, so that a
  // run can be stopped at any chosen read, in any phase, with the same result on every machine.
  static Clock after_reads(std::uint64_t reads) {
    Clock c(0.0);
    c.reads_left_ = reads;
    return c;
  }
  bool expired() {
    if (expired_) return true;
    if (reads_left_ != kWallClock)
      expired_ = reads_left_-- == 0;
    else
      expired_ = std::chrono::steady_clock::now() > deadline_;
    return expired_;
  }
  bool fired() const { return expired_; }

 private:
  static constexpr std::uint64_t kWallClock = std::numeric_limits<std::uint64_t>::max();
  std::chrono::time_point<std::chrono::steady_clock, Seconds> deadline_;
  std::uint64_t reads_left_ = kWallClock;
  bool expired_ = false;
};

// A placement with the order and fit rule that decode to it.
struct Construction {
  std::vector<std::size_t> order;
  Fit fit = Fit::Best;
  std::vector<std::int64_t> offsets;
  std::int64_t height = 0;
};

// The 7 orderings the construction tries (local_search.cpp).
std::vector<std::vector<std::size_t>> candidate_orders(const Problem& problem);

// The lowest of the 7 orderings x {best, first} fit, decoded with the conflict lists (or by
// place_by_scan without them) while `budget` work units last (the first decoding always runs;
// on small problems all 14 do) and the clock has not expired. `work` gets the units spent.
Construction best_construction(const Problem& problem, const Conflicts* conflicts, std::uint64_t budget, Clock& clock,
                               std::uint64_t& work);

// Improves `best` in place until `budget` work units are spent, its height reaches `stop_at`
// or the clock expires. Returns the iterations run.
std::uint64_t local_search(const Problem& problem, const Conflicts& conflicts, Construction& best, std::uint64_t budget,
                           std::int64_t stop_at, Clock& clock);

// plan() with the given clock instead of one set to options.time_limit_s (plan() calls this;
// tests pass Clock::after_reads to stop each phase deterministically).
PlanResult plan_with_clock(const Problem& problem, const PlanOptions& options, Clock& clock);

}  // namespace coopsim::plan::detail
