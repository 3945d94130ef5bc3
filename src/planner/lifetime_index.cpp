// Greedy placement in a given order without a pass over every placed buffer per buffer
// (place_by_scan's rule, and its offsets, at a fraction of its cost: the scan made SmartPool's
// planning quadratic, 25 s on a 768k-event trace, issue 18).
//
// Time: the distinct lower/upper values split the time axis into slots; a lifetime
// [lower, upper) is the slot range [slot(lower), slot(upper)), and two lifetimes overlap exactly
// when their slot ranges do. The placed buffers meeting a slot range are those that start inside
// it or are alive at its first slot; LifetimeIndex keeps the union of their address ranges for
// both questions.
//
// Address sets are kept merged (touching or overlapping ranges joined), the rule the scan
// applies to the ranges it yields, so the merged ranges, hence the offsets, are the scan's. The
// work per buffer grows with the disjoint runs it meets, not with the buffers placed (a stack
// of blocks alive together is one run).
#include <algorithm>
#include <bit>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "placement.hpp"

namespace coopsim::plan::detail {

namespace {

// Appends r to ranges sorted by begin, joined to the last one when touching or overlapping it
// (the scan's merge rule).
void push_merged(std::vector<Range>& out, const Range& r) {
  if (!out.empty() && r.first <= out.back().second)
    out.back().second = std::max(out.back().second, r.second);
  else
    out.push_back(r);
}

// Disjoint address ranges, touching ones merged.
class RangeSet {
 public:
  void add(std::int64_t begin, std::int64_t end) {
    auto it = runs_.upper_bound(begin);
    if (it != runs_.begin()) {
      const auto before = std::prev(it);
      if (before->second >= begin) {
        begin = before->first;
        end = std::max(end, before->second);
        it = runs_.erase(before);
      }
    }
    while (it != runs_.end() && it->first <= end) {
      end = std::max(end, it->second);
      it = runs_.erase(it);
    }
    runs_.emplace_hint(it, begin, end);
  }
  void append_to(std::vector<Range>& out) const { out.insert(out.end(), runs_.begin(), runs_.end()); }
  [[nodiscard]] const std::map<std::int64_t, std::int64_t>& runs() const { return runs_; }
  [[nodiscard]] std::size_t size() const { return runs_.size(); }

 private:
  std::map<std::int64_t, std::int64_t> runs_;  // begin -> end
};

// Placed buffers by lifetime, for the question "which address ranges are used by a buffer alive
// at some time in slots [first, last)?". A buffer meets that range when it starts inside it or
// is alive at `first`, so two indexes answer it:
//  * by start slot, a segment tree whose node holds the union of the buffers starting in its
//    slots (a query reads O(log n) nodes);
//  * by time block (kBlock slots), the union of the buffers alive through the whole block, plus
//    the few buffers that start or end inside it (at most kBlock when no two endpoints share a
//    slot). The first is a segment tree over the blocks: a buffer alive through blocks [p, q)
//    is kept at the O(log) nodes that tile [p, q) (a sorted array each, new ranges merged in
//    batches), and block b's union is that of the nodes on b's path to the root. A buffer alive
//    through most of the iteration (parameters, optimizer state, the saved activations of a long
//    forward pass) so costs O(log) entries, not one per block: one per block made a trace of
//    tensors all alive together quadratic.
class LifetimeIndex {
 public:
  explicit LifetimeIndex(std::size_t slots)
      : leaves_(std::bit_ceil(slots)),
        starts_(2 * leaves_),
        block_leaves_(std::bit_ceil(slots / kBlock + 1)),
        through_(2 * block_leaves_),
        pending_(2 * block_leaves_),
        partial_(slots / kBlock + 1) {}

  void insert(std::size_t first, std::size_t last, const Range& r) {
    for (std::size_t node = leaves_ + first; node >= 1; node /= 2) add(starts_[node], r);
    // Blocks [whole_first, whole_last) lie inside [first, last); at most the two at its ends
    // meet it in part.
    const std::size_t whole_first = (first + kBlock - 1) / kBlock, whole_last = last / kBlock;
    for (std::size_t b = first / kBlock; b * kBlock < last; b = b < whole_first || whole_last <= b ? b + 1 : whole_last)
      if (b < whole_first || whole_last <= b) add_partial(b, {first, last, r});
    for (std::size_t lo = block_leaves_ + whole_first, hi = block_leaves_ + whole_last; lo < hi; lo /= 2, hi /= 2) {
      if (lo & 1U) add_through(lo++, r);
      if (hi & 1U) add_through(--hi, r);
    }
  }

  // Runs and buffers stored: memory, a few words each.
  [[nodiscard]] std::size_t stored() const { return stored_; }

  // The entries collect() would read for [first, last): its work, up to a log factor.
  [[nodiscard]] std::size_t to_read(std::size_t first, std::size_t last) const {
    std::size_t n = 0;
    for (std::size_t lo = leaves_ + first, hi = leaves_ + last; lo < hi; lo /= 2, hi /= 2) {
      if (lo & 1U) n += size(starts_[lo++]);
      if (hi & 1U) n += size(starts_[--hi]);
    }
    const std::size_t b = first / kBlock;
    for (std::size_t node = block_leaves_ + b; node >= 1; node /= 2) n += through_[node].size() + pending_[node].size();
    return n + partial_[b].size();
  }

  // The merged ranges (sorted, touching ones joined) of every stored buffer alive in some slot
  // of [first, last). The buffers alive through the whole time block hold most of them and are
  // already merged (in the largest of the path's arrays), so only the others are sorted, then
  // the two sorted lists are merged. Returns `out`, or that array itself when nothing else is
  // alive then.
  const std::vector<Range>& collect(std::size_t first, std::size_t last, std::vector<Range>& others,
                                    std::vector<Range>& out) const {
    others.clear();
    for (std::size_t lo = leaves_ + first, hi = leaves_ + last; lo < hi; lo /= 2, hi /= 2) {
      if (lo & 1U) append(starts_[lo++], others);
      if (hi & 1U) append(starts_[--hi], others);
    }
    const std::size_t b = first / kBlock;
    for (const Stored& s : partial_[b])
      if (s.first < first && first < s.last) others.push_back(s.range);  // started earlier, alive at first
    const std::vector<Range>* base = &through(block_leaves_ + b);
    for (std::size_t node = (block_leaves_ + b) / 2; node >= 1; node /= 2) {
      const std::vector<Range>* set = &through(node);
      if (set->size() > base->size()) std::swap(set, base);
      others.insert(others.end(), set->begin(), set->end());
    }
    if (others.empty()) return *base;
    std::sort(others.begin(), others.end());
    out.clear();
    auto other = others.begin();
    for (const Range& r : *base) {
      for (; other != others.end() && *other < r; ++other) push_merged(out, *other);
      push_merged(out, r);
    }
    for (; other != others.end(); ++other) push_merged(out, *other);
    return out;
  }

 private:
  static constexpr std::size_t kBlock = 512;
  struct Stored {
    std::size_t first, last;
    Range range;
  };

  void add(std::unique_ptr<RangeSet>& set, const Range& r) {
    if (!set) set = std::make_unique<RangeSet>();
    stored_ -= set->size();
    set->add(r.first, r.second);
    stored_ += set->size();
  }
  void add_partial(std::size_t b, const Stored& s) {
    partial_[b].push_back(s);
    ++stored_;
  }
  void add_through(std::size_t node, const Range& r) {
    pending_[node].push_back(r);
    ++stored_;
    // Merged once they are a quarter of the merged ones: amortized O(log) per range, and the
    // memory and the reads stay those of merged ranges.
    if (pending_[node].size() > 16 + through_[node].size() / 4) through(node);
  }
  // Node's merged ranges, with the ones added since the last read merged in (a sort of the new
  // ones and one pass): the smaller buffers, placed last and most of the work, rarely live
  // through a whole block, so most reads find nothing new.
  const std::vector<Range>& through(std::size_t node) const {
    std::vector<Range>& added = pending_[node];
    if (added.empty()) return through_[node];
    std::sort(added.begin(), added.end());
    std::vector<Range>& merged = scratch_;
    merged.clear();
    auto next = added.begin();
    for (const Range& r : through_[node]) {
      for (; next != added.end() && *next < r; ++next) push_merged(merged, *next);
      push_merged(merged, r);
    }
    for (; next != added.end(); ++next) push_merged(merged, *next);
    stored_ = stored_ - through_[node].size() - added.size() + merged.size();
    through_[node].swap(merged);
    added.clear();
    return through_[node];
  }

  static std::size_t size(const std::unique_ptr<RangeSet>& set) { return set ? set->size() : 0; }
  static void append(const std::unique_ptr<RangeSet>& set, std::vector<Range>& out) {
    if (set) set->append_to(out);
  }

  std::size_t leaves_;
  std::vector<std::unique_ptr<RangeSet>> starts_;  // segment tree by start slot, node 1 the root
  // Segment tree over the time blocks: the ranges of the buffers alive through a node's blocks
  // (stored at the nodes tiling their whole blocks), merged, and those added since.
  std::size_t block_leaves_;
  mutable std::vector<std::vector<Range>> through_, pending_;
  mutable std::vector<Range> scratch_;
  std::vector<std::vector<Stored>> partial_;  // by time block: buffers with an endpoint inside
  mutable std::size_t stored_ = 0;
};

// A run read from the index costs about this many buffers visited by the scan (a map step, the
// sort of those outside the time block's set, and the upkeep: measured 13 ns against 1.2 ns).
constexpr std::size_t kRunCost = 8;
// Buffers placed before the index may be dropped for costing more than the scan would have so
// far (on SmartPool's traces the first buffers, the largest, are scattered: the index pays off
// later; on random sizes and lifetimes it never does, and its upkeep is then saved).
constexpr std::size_t kTrial = 8192;

}  // namespace

bool place_by_lifetime_index(const Problem& problem, const std::vector<std::size_t>& order, Fit fit,
                             std::vector<std::int64_t>& offsets) {
  const auto& bs = problem.buffers;
  // Empty lifetimes and empty buffers change what the scan sees (an empty range between two
  // others splits a gap; an empty lifetime inside another counts as overlapping it); such
  // problems (never SmartPool's, nor a parsed CSV's) keep the scan.
  for (const Buffer& b : bs)
    if (b.size <= 0 || b.lower >= b.upper) return false;
  std::vector<std::int64_t> times;
  times.reserve(2 * bs.size());
  for (const Buffer& b : bs) {
    times.push_back(b.lower);
    times.push_back(b.upper);
  }
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  auto slot = [&](std::int64_t t) {
    return static_cast<std::size_t>(std::lower_bound(times.begin(), times.end(), t) - times.begin());
  };
  // The scan's address order is kept too: a buffer whose ranges are scattered in the index
  // (random sizes and lifetimes, where few ranges touch) is placed by one pass over it, as is
  // every buffer after the index outgrows its memory cap (it holds a run per time block a
  // buffer lives through, at worst n^2 / 512 of them); both yield the same ranges.
  AddressOrder placed;
  std::optional<LifetimeIndex> index(std::in_place, times.size());
  const std::size_t cap = 16 * bs.size() + (std::size_t{1} << 20);
  std::uint64_t read = 0, scanned = 0;  // entries the index and the scan would have read so far
  std::vector<Range> others, ranges;
  for (const std::size_t i : order) {
    const Buffer& x = bs[i];
    const std::size_t first = slot(x.lower), last = slot(x.upper);
    const std::size_t to_read = index ? index->to_read(first, last) : 0;
    read += to_read;
    scanned += placed.size();
    const std::vector<Range>* found = &ranges;
    if (index && to_read * kRunCost <= placed.size())
      found = &index->collect(first, last, others, ranges);
    else
      placed.overlapping(x.lower, x.upper, ranges);
    const std::int64_t o = choose_offset(*found, x.size, fit);
    offsets[i] = o;
    placed.insert({o, end_of(o, x.size), x.lower, x.upper});
    if (index) {
      index->insert(first, last, {o, end_of(o, x.size)});
      // Kept only while it pays for its upkeep.
      if (index->stored() > cap || (placed.size() >= kTrial && read * kRunCost > scanned)) index.reset();
    }
  }
  return true;
}

}  // namespace coopsim::plan::detail
