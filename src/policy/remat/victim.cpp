// Per-tensor eviction scores and victim search (see include/coopsim/policy/remat/victim.hpp).
#include "coopsim/policy/remat/victim.hpp"

#include <array>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

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

std::optional<ValueId> find_victim(const MemoryView& view, EvictionScore score, SeededDraws& draws) {
  const RematGraph* g = view.remat();
  if (g == nullptr) throw std::logic_error("find_victim: the engine keeps no remat graph");
  std::optional<ValueId> best;
  double best_score = std::numeric_limits<double>::infinity();
  std::uint64_t scanned = 0;
  auto consider = [&](ValueId v, Bytes free_adjacent) {
    ++scanned;
    if (!g->evictable(v)) return;
    const double h = eviction_score(*g, v, score, free_adjacent, draws, &scanned);
    if (!best || h < best_score) {
      best = v;
      best_score = h;
    }
  };
  if (score == EvictionScore::Dte && view.allocator().address_aware()) {
    // The allocator's ranges give each block's free neighbours in its own segment.
    const std::vector<Range> r = view.allocator().ranges();
    for (std::size_t i = 0; i < r.size(); ++i) {
      if (r[i].free) continue;
      const auto v = g->resident_at(r[i].addr);
      if (!v) continue;
      Bytes adjacent;
      if (i > 0 && r[i - 1].free && r[i - 1].segment == r[i].segment) adjacent += r[i - 1].size;
      if (i + 1 < r.size() && r[i + 1].free && r[i + 1].segment == r[i].segment) adjacent += r[i + 1].size;
      consider(*v, adjacent);
    }
  } else {
    for (const auto& [addr, v] : g->resident_by_address()) consider(v, Bytes{0});
  }
  view.count_scanned(scanned);
  return best;
}

}  // namespace coopsim
