// Per-tensor eviction scores and the per-tensor victim search shared by the recompute policies
// (docs/models/dtr-dte.md, docs/models/coop.md). The smallest score is
// evicted; candidates are the evictable resident values, scanned in address order, and a strict
// '<' keeps the lowest address on ties (EvictAndFindPieceLoop).
//
// s = staleness (logical clock - last access, >= 1 ns), m = the value's bytes, c = compute:
//   dtr        (c(t) + c(evicted ancestors) + c(evicted descendants)) / (m s)   h_DTR, full e*
//   dtr-eq     eq-class cost / (m s)                                          h_DTR^eq
//   dtr-local  c(t) / (m s)                                                   h_DTR^local
//   lru        last access (oldest first)
//   largest    1 / m (largest first)
//   msps       (c(t) + c(evicted ancestors)) / m                              Capuchin's MSPS;
//              simrd writes c(region_rev): read here as the evicted ancestors, the values a
//              rematerialization of t would have to recompute too
//   random     a seeded uniform draw per candidate and search
//   dte        eq-class cost / (s (m + free bytes adjacent left and right))   Coop's DTE baseline
//   coop       eq-class cost / s (no size term: Coop sums it over a window)
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "coopsim/policy/policy.hpp"
#include "coopsim/policy/remat/eviction_score.hpp"

namespace coopsim {

// Deterministic draws for the random heuristic (splitmix64; same seed -> same run anywhere).
class SeededDraws {
 public:
  explicit SeededDraws(std::uint64_t seed) : state_(seed) {}
  double next();  // uniform in [0, 1)

 private:
  std::uint64_t state_;
};

// The score of one evictable value. `free_adjacent` is only read by dte.
double eviction_score(const RematGraph& g, ValueId v, EvictionScore score, Bytes free_adjacent, SeededDraws& draws,
                      std::uint64_t* scanned);

// coop's score, eq-class cost / s: inline, as Coop's window scores every candidate per search.
inline double coop_score(const RematGraph& g, ValueId v) {
  return g.eq_class_cost(v) / static_cast<double>(g.staleness(v).count());
}

// The evictable value with the smallest score (lowest address on ties), or nullopt when none.
// Counts the values examined through view.count_scanned().
std::optional<ValueId> find_victim(const MemoryView& view, EvictionScore score, SeededDraws& draws);

}  // namespace coopsim
