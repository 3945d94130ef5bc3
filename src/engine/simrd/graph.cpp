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
//     incrementally, not recomputed). Same values, less work (docs/performance.md, "The simrd
//     profile"): walks over a storage graph kept per storage, pinned storages' regions (never
//     read) left alone, the frontier rebuilds deferred to the next read, msps without the
//     children direction's interiors, which it never reads.
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

// msps reads only the parents direction's compute; the children direction's interior feeds
// nothing but that direction's interiors (its frontier, which drives the absorbs and rebuilds of
// the parents direction, is kept either way).
bool State::keeps_interior(bool reverse) const { return reverse || config_.heuristic != EvictionScore::Msps; }

bool State::uses_eq_classes() const { return config_.heuristic == EvictionScore::DtrEq; }

void State::update_compute(std::uint32_t s) {
  std::vector<std::uint32_t>& seen = ops_seen_;
  seen.clear();
  Cost c = 0;
  for (std::uint32_t t : storages_[s].tensors) {
    const std::uint32_t op = tensors_[t].op;
    if (std::find(seen.begin(), seen.end(), op) != seen.end()) continue;
    seen.push_back(op);
    c += ops_[op].compute;
  }
  compute_[s] = c;
}

// A pinned storage (a constant, or an output pinned at the end) is locked for good: it never
// enters the pool, is never evicted and never rematerialized, so nothing ever reads its regions
// again (costs are read for pool members, regions as `e` of absorb for evicted storages, frontiers
// for storages just computed or evicted). Upstream keeps them up to date all the same; skipping
// them gives the same decisions and spares the rebuilds of every weight's region, whose children
// are all the ops that read it.
void State::rebuild(std::uint32_t base, bool reverse) {
  if (storages_[base].pinned) return;
  (reverse ? storages_[base].stale_rev : storages_[base].stale_fwd) = false;
  SRegion& r = reverse ? storages_[base].rev : storages_[base].fwd;
  r.frontier.clear();
  r.indexed = false;
  // A walk in breadth-first order over the list of storages it reached, which becomes the
  // interior when kept: a region's interior and frontier are sets, so the order of the walk
  // changes nothing. One set of marks serves both: the interior's storages are evicted, the
  // frontier's material. Each storage is reached at most once, so the list needs no more room
  // than there are storages.
  if (stack_.size() < storages_.size()) stack_.resize(storages_.size());
  std::uint32_t* const reached = stack_.data();
  std::size_t n = 0;
  marks_.reset(storages_.size());
  const Marks::Raw marks = marks_.raw();
  const Adjacency& next = reverse ? parents_ : children_;
  const std::uint8_t* material = material_.data();
  // The interior's compute is summed as the walk reaches it (the sum is exact: integers).
  const Cost* storage_compute = compute_.data();
  Cost compute = 0;
  auto visit = [&](std::uint32_t s) {
    for (std::uint32_t us : next[s]) {
      const std::uint8_t m = material[us];
      if (m == kPinned || !marks.mark(us)) continue;  // pinned: never on a frontier, see above
      if (m == kEvicted) {
        reached[n++] = us;
        compute += storage_compute[us];
      } else if (us != base) {
        r.frontier.push_back(us);
      }
    }
  };
  visit(base);
  for (std::size_t i = 0; i < n; ++i) visit(reached[i]);
  if (keeps_interior(reverse)) {
    r.interior.assign(reached, reached + n);
    r.compute = compute;
  } else {
    r.interior.clear();
    r.compute = 0;
  }
}

// The rebuilds after a compute (the regions of the storages it made material, then those of the
// storages on their frontiers) are deferred until a region is next read or the graph changes: the
// first eviction (absorb reads regions and the eviction changes reachability), choose (costs),
// new op (new edges) or pin (pinned regions are skipped); flush_rebuilds then rebuilds each region
// once. The result is the one of the eager rebuilds: a rebuild is a function of the graph and of
// which storages are material, and between two flushes storages only become material. A region
// of base b that was requested and not requested again by a later compute reaches none of the
// storages that compute made material (the first of them on a path from b would have b on its
// rebuilt frontier, and b's region would have been requested again), so its interior and frontier
// are the same after that compute as before it. For the same reason the frontiers read at the
// flush name the regions the eager rebuilds would have requested: a base cut off from a storage
// by a storage made material later is on that one's frontier instead.
void State::request_rebuild(std::uint32_t base, bool reverse) {
  bool& stale = reverse ? storages_[base].stale_rev : storages_[base].stale_fwd;
  if (stale || storages_[base].pinned) return;
  stale = true;
  stale_.emplace_back(base, reverse);
}

void State::flush_rebuilds() {
  // First the storages made material (their own regions, which name the frontiers), then every
  // region requested.
  for (std::uint32_t s : made_material_) {
    if (!storages_[s].stale_made_material) continue;
    storages_[s].stale_made_material = false;
    rebuild(s, false);
    rebuild(s, true);
    for (std::uint32_t a : storages_[s].rev.frontier) request_rebuild(a, false);
    for (std::uint32_t a : storages_[s].fwd.frontier) request_rebuild(a, true);
  }
  made_material_.clear();
  for (const auto& [base, reverse] : stale_) {
    bool& stale = reverse ? storages_[base].stale_rev : storages_[base].stale_fwd;
    if (!stale) continue;  // rebuilt eagerly since
    stale = false;
    rebuild(base, reverse);
  }
  stale_.clear();
}

void State::index(SRegion& r) {
  if (r.indexed) return;
  r.members.clear(pages_);
  r.members.insert_many(r.interior, pages_);
  r.indexed = true;
}

void State::absorb(std::uint32_t base, bool reverse, std::uint32_t evicted) {
  if (storages_[base].pinned) return;  // see rebuild
  SRegion& r = reverse ? storages_[base].rev : storages_[base].fwd;
  SRegion& e = reverse ? storages_[evicted].rev : storages_[evicted].fwd;
  // r.frontier loses `evicted` (swapped with the last), then gains e.frontier's storages it lacks
  // (pinned ones left out, see rebuild). A few are looked up in r.frontier directly; more, by
  // marking r.frontier first.
  const std::uint32_t* const frontier_end = r.frontier.data() + r.frontier.size();
  if (const std::uint32_t* at = find_id(r.frontier.data(), frontier_end, evicted); at != frontier_end) {
    r.frontier[static_cast<std::size_t>(at - r.frontier.data())] = r.frontier.back();
    r.frontier.pop_back();
  }
  if (&r == &e) {  // a storage on its own frontier: the unions below add nothing
    r.compute += compute_[evicted];
    if (std::find(r.interior.begin(), r.interior.end(), evicted) == r.interior.end()) {
      r.interior.push_back(evicted);
      r.indexed = false;
    }
    return;
  }
  constexpr std::size_t kLookups = 4;
  if (e.frontier.size() <= kLookups) {
    const std::size_t before = r.frontier.size();  // e.frontier's storages are distinct
    for (std::uint32_t x : e.frontier) {
      // r.frontier's data is looked up again after each push_back, which may move it.
      if (material_[x] != kPinned &&
          find_id(r.frontier.data(), r.frontier.data() + before, x) == r.frontier.data() + before) {
        r.frontier.push_back(x);
      }
    }
  } else {
    marks2_.reset(storages_.size());
    for (std::uint32_t x : r.frontier) marks2_.mark(x);
    for (std::uint32_t x : e.frontier) {
      if (material_[x] != kPinned && marks2_.mark(x)) r.frontier.push_back(x);
    }
  }
  if (!keeps_interior(reverse)) return;
  // diff = e.interior - r.interior, plus `evicted` even if r already holds it (as upstream)
  index(r);
  index(e);  // once per eviction: every region on its frontier absorbs it
  const bool evicted_in_diff = e.members.contains(evicted, pages_) && !r.members.contains(evicted, pages_);
  r.members.insert_all(e.members, pages_, [&](std::uint32_t x) {
    r.interior.push_back(x);
    r.compute += compute_[x];
  });
  if (!evicted_in_diff) {
    r.compute += compute_[evicted];
    if (r.members.insert(evicted, pages_)) r.interior.push_back(evicted);
  }
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
    scratch_ = storages_[s].rev.frontier;  // absorb may change s's own regions (s on its frontier)
    for (std::uint32_t p : scratch_) absorb(p, /*reverse=*/false, s);
    scratch_ = storages_[s].fwd.frontier;
    for (std::uint32_t c : scratch_) absorb(c, /*reverse=*/true, s);
    for (SRegion* r : {&storages_[s].fwd, &storages_[s].rev}) {
      r->interior.clear();
      r->members.clear(pages_);
      r->frontier.clear();
      r->compute = 0;
      r->indexed = false;
    }
  }
  if (uses_eq_classes()) {
    const auto node = static_cast<std::uint32_t>(uf_parent_.size());
    uf_parent_.push_back(node);
    uf_value_.push_back(compute_[s]);
    storages_[s].ecn = node;
    // Merged with each distinct evicted neighbour's class; the classes and their values do not
    // depend on the order of the merges.
    marks_.reset(storages_.size());
    for (const Adjacency* adjacent : {&parents_, &children_}) {
      for (std::uint32_t n : (*adjacent)[s]) {
        if (material_[n] != 0 || n == s || !marks_.mark(n)) continue;
        if (storages_[n].ecn == kNone) throw std::logic_error("simrd profile: evicted storage without a class");
        const std::uint32_t l = find(storages_[n].ecn), r = find(node);
        if (l == r) continue;
        uf_parent_[l] = r;
        uf_value_[r] += uf_value_[l];
      }
    }
  }
}

void State::after_compute(const std::vector<std::uint32_t>& remat_storages) {
  if (uses_regions()) {
    // The storage's regions and the regions that border it (the parents direction of each
    // storage on its children frontier, and the children direction of each on its parents
    // frontier), at the next flush.
    for (std::uint32_t s : remat_storages) {
      if (storages_[s].stale_made_material) continue;
      storages_[s].stale_made_material = true;
      made_material_.push_back(s);
    }
  }
  if (uses_eq_classes()) {
    for (std::uint32_t s : remat_storages) {
      if (storages_[s].ecn == kNone) throw std::logic_error("simrd profile: computed storage without a class");
      uf_value_[find(storages_[s].ecn)] -= compute_[s];
      storages_[s].ecn = kNone;
    }
  }
}

double State::cost(std::uint32_t s) {
  const SStorage& st = storages_[s];
  switch (config_.heuristic) {
    case EvictionScore::Dtr:
      return ratio(compute_[s] + st.fwd.compute + st.rev.compute, st.size, st.last_access, clock_);
    case EvictionScore::DtrEq: {
      Cost c = compute_[s];
      marks_.reset(uf_parent_.size());  // the distinct class roots
      for (const Adjacency* adjacent : {&parents_, &children_}) {
        for (std::uint32_t us : (*adjacent)[s]) {
          if (material_[us] != 0 || us == s) continue;
          const std::uint32_t r = find(storages_[us].ecn);
          if (marks_.mark(r)) c += uf_value_[r];
        }
      }
      return ratio(c, st.size, st.last_access, clock_);
    }
    case EvictionScore::DtrLocal: return ratio(compute_[s], st.size, st.last_access, clock_);
    case EvictionScore::Msps: return st.size > 0 ? quotient(compute_[s] + st.rev.compute, st.size) : kInf;
    case EvictionScore::Lru: return st.last_access;
    case EvictionScore::Largest: return st.size > 0 ? 1.0 / static_cast<double>(st.size) : kInf;
    default: throw std::logic_error("simrd profile: unsupported heuristic");
  }
}

std::uint32_t State::choose() {
  flush_rebuilds();
  double best = kInf;
  std::uint32_t victim = kNone;
  for (std::uint32_t s = pool_head_; s != kNone; s = storages_[s].pool_next) {
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
