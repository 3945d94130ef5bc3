// Per-tensor eviction scores and victim search (see include/coopsim/policy/remat/victim.hpp).
#include "coopsim/policy/remat/victim.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>
#include <string>
#include <vector>

#include "coopsim/base/error.hpp"
#include "layout_walk.hpp"

namespace coopsim {

namespace {
constexpr std::array<std::pair<EvictionScore, std::string_view>, 9> kNames{{
    {EvictionScore::Dtr, "dtr"},
    {EvictionScore::DtrEq, "dtr-eq"},
    {EvictionScore::DtrLocal, "dtr-local"},
    {EvictionScore::Lru, "lru"},
    {EvictionScore::Largest, "largest"},
    {EvictionScore::Msps, "msps"},
    {EvictionScore::Random, "random"},
    {EvictionScore::Dte, "dte"},
    {EvictionScore::Coop, "coop"},
}};
}  // namespace

std::optional<EvictionScore> parse_eviction_score(std::string_view name) {
  for (const auto& [s, n] : kNames) {
    if (n == name) return s;
  }
  return std::nullopt;
}

std::string_view to_string(EvictionScore s) {
  for (const auto& [k, n] : kNames) {
    if (k == s) return n;
  }
  return "?";
}

double SeededDraws::next() {
  state_ += 0x9e3779b97f4a7c15ULL;
  std::uint64_t z = state_;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

double eviction_score(const RematGraph& g, ValueId v, EvictionScore score, Bytes free_adjacent, SeededDraws& draws,
                      std::uint64_t* scanned) {
  const RematValue& x = g.value(v);
  const double m = static_cast<double>(x.size.value);
  const double s = static_cast<double>(g.staleness(v).count());
  switch (score) {
    case EvictionScore::Dtr: return g.neighbourhood_cost(v, scanned) / (m * s);
    case EvictionScore::DtrEq: return g.eq_class_cost(v) / (m * s);
    case EvictionScore::DtrLocal: return static_cast<double>(x.compute.count()) / (m * s);
    case EvictionScore::Lru: return static_cast<double>(x.last_access.count());
    case EvictionScore::Largest: return 1.0 / m;
    case EvictionScore::Msps: return g.ancestor_cost(v, scanned) / m;
    case EvictionScore::Random: return draws.next();
    case EvictionScore::Dte: return g.eq_class_cost(v) / (s * (m + static_cast<double>(free_adjacent.value)));
    case EvictionScore::Coop: return coop_score(g, v);
  }
  throw std::logic_error("unknown eviction score");
}

namespace {

struct Search {
  Search(const RematGraph& graph, EvictionScore sc, SeededDraws& d) : g(graph), score(sc), draws(d) {}
  const RematGraph& g;
  EvictionScore score;
  SeededDraws& draws;
  std::uint64_t scanned = 0;
  std::optional<ValueId> best;
  double best_score = std::numeric_limits<double>::infinity();
  std::uint64_t best_key = 0;  // best's block address

  // Called in address order for each evictable value: a strict '<' keeps the lowest address.
  void consider(ValueId v, Bytes free_adjacent) {
    const double h = eviction_score(g, v, score, free_adjacent, draws, &scanned);
    if (!best || h < best_score) {
      best = v;
      best_score = h;
    }
  }
  // The same choice when values come in any order: the least score, and of equal scores the
  // lowest address (what the walk in address order keeps). The first value offered must be the
  // walk's first (see search_bounded), so that a NaN score is handled as the walk handles it.
  void consider_at(ValueId v, std::uint64_t key) {
    const double h = eviction_score(g, v, score, Bytes{0}, draws, &scanned);
    if (!best || h < best_score || (h == best_score && key < best_key)) {
      best = v;
      best_score = h;
      best_key = key;
    }
  }
  [[nodiscard]] bool has_bound() const { return score == EvictionScore::DtrEq || score == EvictionScore::Dte; }
  // dtr-eq and dte divide an eq-class cost >= the value's own compute c by the same positive
  // denominator, so c / denominator is a lower bound on the score (rounding keeps the order of
  // two quotients with one denominator): a value whose bound already loses to the best cannot
  // replace it, and its eq-class cost is not needed.
  [[nodiscard]] double value_bound(ValueId v, Bytes free_adjacent) const {
    const RematValue& x = g.value(v);
    const double m = static_cast<double>(x.size.value);
    const double s = static_cast<double>(g.staleness(v).count());
    const double c = static_cast<double>(x.compute.count());
    return score == EvictionScore::DtrEq ? c / (m * s) : c / (s * (m + static_cast<double>(free_adjacent.value)));
  }
  [[nodiscard]] bool cannot_win(ValueId v, Bytes free_adjacent) const {
    return best && has_bound() && value_bound(v, free_adjacent) >= best_score;
  }
  // dtr-eq's bound without a division (consider_at's order): compute / size, within a few ulps,
  // times `margin` (just under 1) over the staleness exceeds the best score, so the value's own
  // score does too. A value that might tie is considered.
  [[nodiscard]] bool beaten(ValueId v, double margin) const {
    const RematValue& x = g.value(v);
    return x.compute_per_byte * margin > best_score * static_cast<double>(g.staleness(v).count());
  }
  // The same for values in any order (consider_at): a bound equal to the best still wins at a
  // lower address.
  [[nodiscard]] bool loses(double bound, std::uint64_t key) const {
    return best && (bound > best_score || (bound >= best_score && key > best_key));
  }
};

// The plain searches, over every resident value or every range in address order.
void search_all(const MemoryView& view, Search& s) {
  const RematGraph& g = s.g;
  // Values above the allocator's reclaimable end (the small-piece area) are examined, not chosen.
  const std::uint64_t limit = view.allocator().reclaimable_end();
  auto consider = [&](ValueId v, Bytes free_adjacent) {
    ++s.scanned;
    if (g.evictable(v) && g.value(v).block.addr < limit) s.consider(v, free_adjacent);
  };
  if (s.score == EvictionScore::Dte && view.allocator().address_aware()) {
    // The allocator's ranges give each block's free neighbours in its own segment.
    const std::vector<Range> r = view.allocator().ranges();
    for (std::size_t i = 0; i < r.size(); ++i) {
      if (r[i].free) continue;
      const auto v = g.resident_at(r[i].addr);
      if (!v) continue;
      Bytes adjacent;
      if (i > 0 && r[i - 1].free && r[i - 1].segment == r[i].segment) adjacent += r[i - 1].size;
      if (i + 1 < r.size() && r[i + 1].free && r[i + 1].segment == r[i].segment) adjacent += r[i + 1].size;
      consider(*v, adjacent);
    }
  } else {
    for (const auto& [addr, v] : g.holders_by_address()) consider(v, Bytes{0});
  }
}

// dtr-eq and dte (no free neighbours) over the candidates, block by block from the least block
// bound: a block's summary (CandidateBound) bounds every score in it from below by
// min(compute / size) / (now - oldest access), since an eq-class cost is at least the value's own
// compute and its staleness at most now - oldest access. Once that bound loses to the best score
// found, so does every value of the block, and the block is not read. The answer is the walk in
// address order's: the least score, the lowest address among equal ones.
void search_bounded(const RematGraph& g, std::uint64_t limit, Search& s) {
  const auto& candidates = g.candidates();
  const auto& blocks = candidates.blocks();
  // The walk's first evictable value comes first: the walk keeps it even with a NaN score (a
  // zero-byte value of no compute), as no later score compares below NaN.
  bool seeded = false;
  for (std::size_t b = 0; b < blocks.size() && !seeded; ++b) {
    for (const auto& e : blocks[b]) {
      if (e.key >= limit) break;
      if (g.evictable(e.value)) {
        s.consider_at(e.value, e.key);
        seeded = true;
        break;
      }
    }
  }
  if (!seeded || std::isnan(s.best_score)) return;
  const SimTime now = g.clock();
  // The bound computed in floating point may exceed the exact one by a few ulps: a relative
  // margin keeps it below every score of the block.
  constexpr double kMargin = 1.0 - 1e-9;
  thread_local std::vector<std::pair<double, std::size_t>> order;
  order.clear();
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    if (blocks[b].front().key >= limit) break;
    const CandidateBound& sum = candidates.summary(b);
    const SimTime stale = sum.oldest_access >= now ? SimTime{1} : now - sum.oldest_access;
    order.emplace_back(sum.min_compute_per_byte / static_cast<double>(stale.count()) * kMargin, b);
  }
  std::sort(order.begin(), order.end());
  constexpr std::size_t kAhead = 8;  // candidates prefetched ahead of the scan
  for (const auto& [bound, b] : order) {
    if (bound > s.best_score) break;  // and so does every later block
    const auto& block = blocks[b];
    if (s.loses(bound, block.front().key)) continue;
    CandidateBound exact;
    bool whole = true;
    for (std::size_t i = 0; i < block.size(); ++i) {
      if (i + kAhead < block.size()) g.prefetch(block[i + kAhead].value);
      if (block[i].key >= limit) {
        whole = false;
        break;
      }
      const ValueId v = block[i].value;
      exact.absorb(CandidateBound{g.candidate_cost_per_byte(v), g.value(v).last_access});
      if (g.evictable(v) && !s.beaten(v, kMargin)) s.consider_at(v, block[i].key);
    }
    // Read whole, the block's summary becomes exact again (values that left it, newer accesses).
    if (whole) candidates.refine(b, exact);
  }
}

// The same searches over the eviction candidates only (plus, for dte, the free ranges next to
// them): every other resident value is counted as examined, as the plain search counts it.
// False when dte's allocator keeps no free ranges by address.
bool search_candidates(const MemoryView& view, Search& s) {
  const RematGraph& g = s.g;
  if (s.score == EvictionScore::Dte && view.allocator().address_aware()) {
    thread_local LayoutScratch scratch;
    thread_local std::vector<LayoutItem> items;
    items.clear();
    bool walked = false;
    walk_layout(view.allocator(), g, scratch, walked, [&](const LayoutItem& it) { items.push_back(it); });
    if (!walked) return false;
    s.scanned += g.holder_count();
    for (std::size_t i = 0; i < items.size(); ++i) {
      const LayoutItem& it = items[i];
      if (it.value == kNoValue || !g.evictable(it.value)) continue;
      Bytes adjacent;
      if (i > 0 && items[i - 1].value == kNoValue && !it.barrier_before) adjacent += items[i - 1].size;
      if (i + 1 < items.size() && items[i + 1].value == kNoValue && !items[i + 1].barrier_before) {
        adjacent += items[i + 1].size;
      }
      if (!s.cannot_win(it.value, adjacent)) s.consider(it.value, adjacent);
    }
    return true;
  }
  s.scanned += g.holder_count();
  const std::uint64_t limit = view.allocator().reclaimable_end();
  if (s.has_bound()) {
    search_bounded(g, limit, s);
    return true;
  }
  constexpr std::size_t kAhead = 8;  // candidates prefetched ahead of the scan
  for (const auto& block : g.candidates().blocks()) {
    for (std::size_t i = 0; i < block.size(); ++i) {
      if (i + kAhead < block.size()) g.prefetch(block[i + kAhead].value);
      if (block[i].key >= limit) break;  // address order: the rest of the block lies above too
      const ValueId v = block[i].value;
      if (g.evictable(v)) s.consider(v, Bytes{0});
    }
  }
  return true;
}

}  // namespace

std::optional<ValueId> find_victim(const MemoryView& view, EvictionScore score, SeededDraws& draws) {
  const RematGraph* g = view.remat();
  if (g == nullptr) throw std::logic_error("find_victim: the engine keeps no remat graph");
  const SeededDraws draws_before = draws;
  Search s(*g, score, draws);
  const bool fast = search_candidates(view, s);
  if (!fast) search_all(view, s);
  if (fast && view.cross_check()) {
    // Cross-check against the plain search (with the random draws it would have made).
    SeededDraws copy = draws_before;
    Search all(*g, score, copy);
    search_all(view, all);
    if (all.best != s.best || all.scanned != s.scanned) {
      throw InvariantError(std::string("find_victim: the search over candidates and the search over every value "
                                       "disagree (") +
                           std::string(to_string(score)) + ", scanned " + std::to_string(s.scanned) + " vs " +
                           std::to_string(all.scanned) + ")");
    }
  }
  view.count_scanned(s.scanned);
  return s.best;
}

}  // namespace coopsim
