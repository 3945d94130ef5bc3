// Expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) in a snapshot: the
// mapped ranges at the start of the history and the virtual address reservations.
//
// Upstream (pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp, find_expandable_block / map_block
// / unmap_block / snapshot): one reservation (cuMemAddressReserve of 1 1/8 x totalGlobalMem) per
// (stream, pool), created on demand; physical memory is mapped in pages of kSmallBuffer (2 MiB,
// small pool) or kLargeBuffer (20 MiB, large pool) from the low end of the lowest unmapped range
// that fits. No trace entry records the reservation; `segment_map` / `segment_unmap` record each
// mapped / unmapped range (address, bytes, stream), and the end state lists each contiguous mapped
// range as one segment with is_expandable.
//
// Rules here:
//  * Pool of a map / unmap entry: the end-state expandable segment containing it says; else a map
//    of exactly one small page is small-pool (a small request never needs two) and any other map
//    is large-pool (whole 20 MiB pages); an unmap that is not whole 20 MiB pages is small-pool;
//    any other unmap takes the pool of the nearest known range of its stream.
//  * Mapped at the start: the end state's ranges with the history undone backwards (a map was
//    unmapped before it, an unmap mapped).
//  * One reservation per (stream, pool); its base is the lowest address the recording shows it
//    using (exact whenever the reservation's first page is mapped at some point of the record,
//    which its first allocation always does), and every range must be whole pages from it
//    (else the state is marked approximate). It goes to the trace as a `segment_address` with
//    `expandable`; the simulation's model reserves there.
#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <utility>
#include <vector>

#include "torch_snapshot_state.hpp"

namespace coopsim::torch_snapshot::detail {
namespace {

constexpr std::uint64_t kLargePage = 20ULL << 20;  // kLargeBuffer

using Ranges = std::map<std::uint64_t, std::uint64_t>;  // start -> end, disjoint, merged

void add_range(Ranges& r, std::uint64_t lo, std::uint64_t hi) {
  auto it = r.upper_bound(lo);
  if (it != r.begin() && std::prev(it)->second >= lo) {
    --it;
    lo = it->first;
    hi = std::max(hi, it->second);
    it = r.erase(it);
  }
  while (it != r.end() && it->first <= hi) {
    hi = std::max(hi, it->second);
    it = r.erase(it);
  }
  r.emplace(lo, hi);
}

void remove_range(Ranges& r, std::uint64_t lo, std::uint64_t hi) {
  auto it = r.upper_bound(lo);
  if (it != r.begin()) --it;
  while (it != r.end() && it->first < hi) {
    const std::uint64_t a = it->first, b = it->second;
    if (b <= lo) {
      ++it;
      continue;
    }
    it = r.erase(it);
    if (a < lo) r.emplace(a, lo);
    if (b > hi) {
      r.emplace(hi, b);
      break;
    }
  }
}

struct Key {
  std::uint64_t stream = 0;
  SegmentPool pool = SegmentPool::Large;
  bool operator<(const Key& o) const { return stream != o.stream ? stream < o.stream : pool < o.pool; }
};

}  // namespace

void Reconstruction::find_expandable_segments() {
  std::map<Key, Ranges> mapped;  // per reservation: mapped now (end state, then undone)
  std::map<Key, std::pair<std::uint64_t, std::uint64_t>> extent;  // lowest address, highest end
  auto see = [&](const Key& k, std::uint64_t lo, std::uint64_t hi) {
    auto [it, fresh] = extent.try_emplace(k, lo, hi);
    if (!fresh) it->second = {std::min(it->second.first, lo), std::max(it->second.second, hi)};
  };
  for (const SnapSegment& g : snap_.segments) {
    if (!g.expandable) continue;
    expandable_end_ = true;
    const Key k{g.stream, g.pool};
    add_range(mapped[k], g.addr, g.addr + g.size);
    see(k, g.addr, g.addr + g.size);
  }
  // Pools of the history's map / unmap entries.
  std::vector<std::pair<const Entry*, Key>> events;
  std::vector<const Entry*> ambiguous;
  for (const Entry& e : snap_.entries) {
    if (e.action != Action::SegmentMap && e.action != Action::SegmentUnmap) continue;
    expandable_history_ = true;
    const SnapSegment* g = end_segment_at(e.addr);
    SegmentPool pool = SegmentPool::Large;
    if (g != nullptr && g->expandable) {
      pool = g->pool;
    } else if (e.action == Action::SegmentMap) {
      pool = e.size == kSmallBuffer ? SegmentPool::Small : SegmentPool::Large;
    } else if (e.size % kLargePage != 0) {
      pool = SegmentPool::Small;
    } else {
      ambiguous.push_back(&e);
      continue;
    }
    events.emplace_back(&e, Key{e.stream, pool});
    see(Key{e.stream, pool}, e.addr, e.addr + e.size);
  }
  for (const Entry* e : ambiguous) {
    Key best{e->stream, SegmentPool::Large};
    std::uint64_t best_distance = ~std::uint64_t{0};
    for (const auto& [k, x] : extent) {
      if (k.stream != e->stream) continue;
      const std::uint64_t d = e->addr < x.first ? x.first - e->addr : e->addr >= x.second ? e->addr - x.second + 1 : 0;
      if (d < best_distance) {
        best_distance = d;
        best = k;
      }
    }
    events.emplace_back(e, best);
    see(best, e->addr, e->addr + e->size);
  }
  if (extent.empty()) return;
  std::sort(events.begin(), events.end(), [](const auto& a, const auto& b) { return a.first->index < b.first->index; });
  // Undo the history, last entry first.
  for (auto it = events.rbegin(); it != events.rend(); ++it) {
    Ranges& r = mapped[it->second];
    const Entry& e = *it->first;
    if (e.action == Action::SegmentMap) {
      remove_range(r, e.addr, e.addr + e.size);
    } else {
      add_range(r, e.addr, e.addr + e.size);
    }
  }
  for (const auto& [k, x] : extent) {
    const std::uint64_t page = k.pool == SegmentPool::Small ? kSmallBuffer : kLargePage;
    const auto [base, end] = x;
    bool aligned = true;
    for (const auto& [lo, hi] : mapped[k]) aligned = aligned && (lo - base) % page == 0 && (hi - base) % page == 0;
    for (const auto& [e, ek] : events) {
      if (!(ek < k) && !(k < ek)) aligned = aligned && (e->addr - base) % page == 0 && e->size % page == 0;
    }
    if (!aligned) {
      note(
          fmt::format("the expandable ranges of stream {} ({} pool) are not whole {}-byte pages from their lowest "
                      "address {:#x}: more than one reservation, or a damaged file",
                      k.stream, to_string(k.pool), page, base));
    }
    SegmentAddress a;
    a.addr = base;
    a.size = Bytes{end - base};
    a.stream = dense_stream(h_, k.stream);
    a.pool = k.pool;
    a.expandable = true;
    h_.segment_addresses.push_back(a);
    for (const auto& [lo, hi] : mapped[k]) {
      InitialSeg s;
      s.addr = lo;
      s.size = hi - lo;
      s.stream = k.stream;
      s.pool = k.pool;
      s.expandable = true;
      initial_.push_back(s);
    }
  }
}

}  // namespace coopsim::torch_snapshot::detail
