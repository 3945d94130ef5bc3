// The simrd profile's heuristic state and costs (include/coopsim/engine/simrd.hpp). Upstream
// references are to uwsampl/dtr-prototype@eff53cc4 simrd/simrd/.
//  C1 a storage's compute is the sum over the distinct ops of the tensors on it, its views' ops
//     included (tensor.py Storage.get_compute).
//  C2 costs (heuristic/dtr.py, heuristic/etc.py), with s = clock - last access (not floored: a
//     storage used at the current clock has s = 0) and m = its bytes:
//       dtr        (c + region.compute + region_rev.compute) / (m s)          DTR
//       dtr-eq     (c + sum over the distinct eq classes of its evicted
//                  neighbours of the class value) / (m s)                       DTREqClass
//       dtr-local  c / (m s)                                                    DTRLocal
//       msps       (c + region_rev.compute) / m                                 MSPS
//       lru        last access                                                  LRU
//       largest    1 / m                                                        LargestStorage
//     a denominator <= 0 (m s = 0) gives +infinity. Costs are doubles rounded from the exact
//     integer quotient, as Python's int / int (exactly so below 2^53, see quotient()).
//  C3 regions (optimization/region.py Region, RuntimeV2Optimized): rebuilt from scratch for the
//     storages an op makes material and for the material storages on their frontiers; on an
//     eviction, the regions that had the storage on their frontier absorb its region (as kept
//     incrementally, not recomputed).
//  C4 eq classes (optimization/eqclass.py, RuntimeV2Optimized._evict/_compute): an evicted storage
//     gets a new class node of value c, merged with the classes of its evicted neighbours (the
//     storages of its tensors' parents and children); when it becomes material again its class
//     loses c and it leaves the class (the members keep their links).
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "detail.hpp"

namespace coopsim::simrd::detail {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Python's int / int, correctly rounded: exact when both fit in a double's 53 bits (IEEE division
// of exact operands); otherwise through long double (64 bits), which can differ in the last bit.
double quotient(Cost c, Cost d) {
  constexpr Cost kExact = Cost{1} << 53;
  if (d < kExact && c < kExact && c > -kExact) {
    return static_cast<double>(static_cast<std::int64_t>(c)) / static_cast<double>(static_cast<std::int64_t>(d));
  }
  return static_cast<double>(static_cast<long double>(c) / static_cast<long double>(d));
}

// Python's `c / (m * s) if m * s > 0 else inf` over integers (s may be -inf before a first use).
double ratio(Cost c, std::int64_t m, double last_access, std::int64_t clock) {
  if (std::isinf(last_access)) return m > 0 ? 0.0 : kInf;  // c / inf = 0; 0 * inf = nan, not > 0
  const auto stale = static_cast<Cost>(clock - static_cast<std::int64_t>(last_access));
  const Cost denom = static_cast<Cost>(m) * stale;
  if (denom <= 0) return kInf;
  return quotient(c, denom);
}

}  // namespace

bool State::uses_regions() const {
  return config_.heuristic == EvictionScore::Dtr || config_.heuristic == EvictionScore::Msps;
}

bool State::uses_eq_classes() const { return config_.heuristic == EvictionScore::DtrEq; }

void State::update_compute(std::uint32_t s) {
  std::vector<std::uint32_t> seen;
  Cost c = 0;
  for (std::uint32_t t : storages_[s].tensors) {
    const std::uint32_t op = tensors_[t].op;
    if (std::find(seen.begin(), seen.end(), op) != seen.end()) continue;
    seen.push_back(op);
    c += ops_[op].compute;
  }
  storages_[s].compute = c;
}

void State::rebuild(std::uint32_t base, bool reverse) {
  SRegion& r = reverse ? storages_[base].rev : storages_[base].fwd;
  r.interior.clear();
  r.frontier.clear();
  r.compute = 0;
  std::vector<std::uint32_t> stack{base};
  while (!stack.empty()) {
    const std::uint32_t s = stack.back();
    stack.pop_back();
    for (std::uint32_t t : storages_[s].tensors) {
      const auto& next = reverse ? ops_[tensors_[t].op].inputs : tensors_[t].children;
      for (std::uint32_t u : next) {
        const std::uint32_t us = tensors_[u].storage;
        if (storages_[us].material) {
          if (us != base) r.frontier.insert(us);
          continue;
        }
        if (r.interior.insert(us).second) {
          r.compute += storages_[us].compute;
          stack.push_back(us);
        }
      }
    }
  }
}

void State::absorb(std::uint32_t base, bool reverse, std::uint32_t evicted) {
  SRegion& r = reverse ? storages_[base].rev : storages_[base].fwd;
  const SRegion& e = reverse ? storages_[evicted].rev : storages_[evicted].fwd;
  r.frontier.erase(evicted);
  r.frontier.insert(e.frontier.begin(), e.frontier.end());
  std::unordered_set<std::uint32_t> diff;
  for (std::uint32_t x : e.interior) {
    if (r.interior.count(x) == 0) diff.insert(x);
  }
  diff.insert(evicted);  // added even if already inside, as upstream does
  for (std::uint32_t x : diff) r.compute += storages_[x].compute;
  r.interior.insert(diff.begin(), diff.end());
}

std::uint32_t State::find(std::uint32_t n) const {
  while (uf_parent_[n] != n) {
    uf_parent_[n] = uf_parent_[uf_parent_[n]];
    n = uf_parent_[n];
  }
  return n;
}

void State::after_evict(std::uint32_t s) {
  if (uses_regions()) {
    const std::vector<std::uint32_t> up(storages_[s].rev.frontier.begin(), storages_[s].rev.frontier.end());
    for (std::uint32_t p : up) absorb(p, /*reverse=*/false, s);
    const std::vector<std::uint32_t> down(storages_[s].fwd.frontier.begin(), storages_[s].fwd.frontier.end());
    for (std::uint32_t c : down) absorb(c, /*reverse=*/true, s);
    for (SRegion* r : {&storages_[s].fwd, &storages_[s].rev}) {
      r->interior.clear();
      r->frontier.clear();
      r->compute = 0;
    }
  }
  if (uses_eq_classes()) {
    const auto node = static_cast<std::uint32_t>(uf_parent_.size());
    uf_parent_.push_back(node);
    uf_value_.push_back(storages_[s].compute);
    storages_[s].ecn = node;
    std::unordered_set<std::uint32_t> neighbours;
    for (std::uint32_t t : storages_[s].tensors) {
      for (const auto* list : {&ops_[tensors_[t].op].inputs, &tensors_[t].children}) {
        for (std::uint32_t u : *list) {
          const std::uint32_t us = tensors_[u].storage;
          if (!storages_[us].material && us != s) neighbours.insert(us);
        }
      }
    }
    for (std::uint32_t n : neighbours) {
      if (storages_[n].ecn == kNone) throw std::logic_error("simrd profile: evicted storage without a class");
      const std::uint32_t l = find(storages_[n].ecn), r = find(node);
      if (l == r) continue;
      uf_parent_[l] = r;
      uf_value_[r] += uf_value_[l];
    }
  }
}

void State::after_compute(const std::vector<std::uint32_t>& remat_storages) {
  if (uses_regions()) {
    std::unordered_set<std::uint32_t> affected, affected_rev;
    for (std::uint32_t s : remat_storages) {
      rebuild(s, false);
      rebuild(s, true);
      affected.insert(storages_[s].rev.frontier.begin(), storages_[s].rev.frontier.end());
      affected_rev.insert(storages_[s].fwd.frontier.begin(), storages_[s].fwd.frontier.end());
    }
    for (std::uint32_t s : affected) rebuild(s, false);
    for (std::uint32_t s : affected_rev) rebuild(s, true);
  }
  if (uses_eq_classes()) {
    for (std::uint32_t s : remat_storages) {
      if (storages_[s].ecn == kNone) throw std::logic_error("simrd profile: computed storage without a class");
      uf_value_[find(storages_[s].ecn)] -= storages_[s].compute;
      storages_[s].ecn = kNone;
    }
  }
}

double State::cost(std::uint32_t s) const {
  const SStorage& st = storages_[s];
  switch (config_.heuristic) {
    case EvictionScore::Dtr:
      return ratio(st.compute + st.fwd.compute + st.rev.compute, st.size, st.last_access, clock_);
    case EvictionScore::DtrEq: {
      Cost c = st.compute;
      std::vector<std::uint32_t> roots;
      for (std::uint32_t t : st.tensors) {
        for (const auto* list : {&ops_[tensors_[t].op].inputs, &tensors_[t].children}) {
          for (std::uint32_t u : *list) {
            const std::uint32_t us = tensors_[u].storage;
            if (storages_[us].material || us == s) continue;
            const std::uint32_t r = find(storages_[us].ecn);
            if (std::find(roots.begin(), roots.end(), r) != roots.end()) continue;
            roots.push_back(r);
            c += uf_value_[r];
          }
        }
      }
      return ratio(c, st.size, st.last_access, clock_);
    }
    case EvictionScore::DtrLocal: return ratio(st.compute, st.size, st.last_access, clock_);
    case EvictionScore::Msps: return st.size > 0 ? quotient(st.compute + st.rev.compute, st.size) : kInf;
    case EvictionScore::Lru: return st.last_access;
    case EvictionScore::Largest: return st.size > 0 ? 1.0 / static_cast<double>(st.size) : kInf;
    default: throw std::logic_error("simrd profile: unsupported heuristic");
  }
}

std::uint32_t State::choose() const {
  double best = kInf;
  std::uint32_t victim = kNone;
  for (std::uint32_t s : pool_) {
    const double c = cost(s);
    if (c <= best) {  // R6: the last of equal costs wins
      best = c;
      victim = s;
    }
    if (c == 0.0) break;  // R6: nothing is cheaper than free
  }
  if (victim == kNone) throw std::logic_error("simrd profile: no candidate has a comparable cost");
  return victim;
}

}  // namespace coopsim::simrd::detail
