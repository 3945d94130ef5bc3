// Per-tensor eviction scores and victim search (see include/coopsim/policy/remat/victim.hpp).
#include "coopsim/policy/remat/victim.hpp"

#include <array>
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
    case EvictionScore::Coop: return g.eq_class_cost(v) / s;
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

  // Called in address order for each evictable value: a strict '<' keeps the lowest address.
  void consider(ValueId v, Bytes free_adjacent) {
    const double h = eviction_score(g, v, score, free_adjacent, draws, &scanned);
    if (!best || h < best_score) {
      best = v;
      best_score = h;
    }
  }
  // dtr-eq and dte divide an eq-class cost >= the value's own compute c by the same positive
  // denominator, so c / denominator is a lower bound on the score: a value whose bound is
  // already >= the best score cannot replace it, and its eq-class cost is not needed.
  [[nodiscard]] bool cannot_win(ValueId v, Bytes free_adjacent) const {
    if (!best || (score != EvictionScore::DtrEq && score != EvictionScore::Dte)) return false;
    const RematValue& x = g.value(v);
    const double m = static_cast<double>(x.size.value);
    const double s = static_cast<double>(g.staleness(v).count());
    const double c = static_cast<double>(x.compute.count());
    const double bound =
        score == EvictionScore::DtrEq ? c / (m * s) : c / (s * (m + static_cast<double>(free_adjacent.value)));
    return bound >= best_score;
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
  constexpr std::size_t kAhead = 8;  // candidates prefetched ahead of the scan
  for (const auto& block : g.candidates().blocks()) {
    for (std::size_t i = 0; i < block.size(); ++i) {
      if (i + kAhead < block.size()) g.prefetch(block[i + kAhead].value);
      if (block[i].key >= limit) break;  // address order: the rest of the block lies above too
      const ValueId v = block[i].value;
      if (g.evictable(v) && !s.cannot_win(v, Bytes{0})) s.consider(v, Bytes{0});
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
