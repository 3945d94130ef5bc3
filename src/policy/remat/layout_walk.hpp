// The walk of layout-aware eviction searches (Coop's window, DTE's adjacent free bytes) over
// only the ranges that matter to them: the allocator's free ranges and the blocks of the
// eviction candidates (RematGraph::candidates()), merged in address order. Every other range is
// a barrier to those searches (a used block that is not a candidate: unevictable, in flight, or
// not a value), so the walk reports where the full walk over ranges() would meet one: before an
// item when it does not start where the previous item ends, or starts a segment (ranges tile
// each segment, so something else lies between, or a segment boundary does), and after the last
// item when it does not end the last range. Allocators without free_ranges_by_address() get no
// walk (the searches then read ranges()). The walk ends at the allocator's reclaimable_end():
// what lies above it (OneFlow's small-piece area) is never evicted from.
#pragma once

#include <cstdint>
#include <vector>

#include "coopsim/alloc/allocator.hpp"
#include "coopsim/model/remat_graph.hpp"

namespace coopsim {

struct LayoutItem {
  std::uint64_t addr = 0;
  Bytes size;
  ValueId value = kNoValue;     // kNoValue: a free range
  bool barrier_before = false;  // the full walk meets a barrier just before this item
};

// Scratch of walk_layout, kept by the caller between searches.
struct LayoutScratch {
  std::vector<Range> free;
  std::vector<std::uint64_t> segment_starts;
};

// Calls visit(const LayoutItem&) for every item in address order and returns whether the full
// walk meets a barrier after the last one. Sets `walked` to false (and visits nothing) when the
// allocator keeps no free ranges by address.
template <class Visit>
bool walk_layout(const Allocator& a, const RematGraph& g, LayoutScratch& scratch, bool& walked, Visit&& visit) {
  walked = a.free_ranges_by_address(scratch.free);
  if (!walked) return false;
  a.segment_starts(scratch.segment_starts);
  const std::vector<Range>& free = scratch.free;
  const std::vector<std::uint64_t>& starts = scratch.segment_starts;
  std::size_t f = 0;
  std::size_t next_start = 0;  // first segment start not below the current item
  bool have_prev = false;
  std::uint64_t prev_end = 0;
  const std::uint64_t limit = a.reclaimable_end();
  auto emit = [&](const LayoutItem& item) {
    if (item.addr >= limit) return;
    while (next_start < starts.size() && starts[next_start] < item.addr) ++next_start;
    const bool starts_segment = next_start < starts.size() && starts[next_start] == item.addr;
    LayoutItem out = item;
    // Barriers before the first item change nothing.
    out.barrier_before = have_prev && (prev_end != item.addr || starts_segment);
    visit(out);
    have_prev = true;
    prev_end = item.addr + item.size.value;
  };
  constexpr std::size_t kAhead = 8;  // candidates prefetched ahead of the walk
  for (const auto& block : g.candidates().blocks()) {
    for (std::size_t i = 0; i < block.size(); ++i) {
      if (i + kAhead < block.size()) g.prefetch(block[i + kAhead].value);
      const std::uint64_t addr = block[i].key;
      const ValueId v = block[i].value;
      while (f < free.size() && free[f].addr < addr) {
        emit(LayoutItem{free[f].addr, free[f].size, kNoValue, false});
        ++f;
      }
      emit(LayoutItem{addr, g.value(v).block.size, v, false});
    }
  }
  for (; f < free.size(); ++f) emit(LayoutItem{free[f].addr, free[f].size, kNoValue, false});
  return have_prev && prev_end != a.ranges_end();
}

}  // namespace coopsim
