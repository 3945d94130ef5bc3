// Tensor identity and the allocator state at the start of a snapshot's history.
//
// `segments` is the state at dump time; the history (device_traces) says what changed. Undoing
// the history backwards from the end state (as MemoryViz.js's simulate_memory does) gives the
// start, with these rules (the caching allocator of pytorch/pytorch @001074d2
// c10/cuda/CUDACachingAllocator.cpp):
//  * A tensor is the address between its alloc and its free_completed. A free_requested /
//    free_completed of an address with no alloc before it is a block that was live when the
//    recording began; its requested size is the entry's size.
//  * Segments: a segment whose first segment event is segment_free existed at the start (its
//    size is the entry's); one whose first is segment_alloc did not; an end-state segment with no
//    segment events existed throughout. Pools: the end state says; otherwise a 2 MiB segment is a
//    small-pool one (kSmallBuffer; large-pool segments are never 2 MiB).
//  * Blocks live at the start: the pre-existing blocks above, plus end-state active blocks whose
//    address the history never touches (size and requested size from the end state).
//  * Block size of a pre-existing block that the history frees: round_size(requested) under the
//    recorded allocator settings, plus the unsplit remainder it may have absorbed when it was
//    allocated (should_split: small pool and expandable segments never leave one; large pool
//    keeps remainders of at most kSmallSize, or below max_non_split_rounding_size for oversize
//    requests). Two facts pin it:
//    (a) every block of a cudaMalloc'd large-pool segment is larger than kSmallSize (requests
//        there round to more than kSmallSize, split remainders are larger than kSmallSize, and a
//        freed block only grows by merging), so a gap of at most kSmallSize between the rounded
//        end of the block and the next live block (or the segment end) cannot be free: it is the
//        block's remainder;
//    (b) otherwise the remainder is visible going forward: the free block behind the block starts
//        where the block really ends, and the first recorded allocation into the gap (or at the
//        next block's address, after that block's free) while the block is still live takes the
//        low end of a free block (alloc_found_block), so its address is the block's end.
//    With neither, the remainder cannot be told from free space by any later allocation of the
//    recording, and none is assumed.
//  * Everything else in an initial segment is free (free neighbours are always merged).
//  * Expandable segments: see find_expandable_segments (torch_snapshot_expandable.cpp).
#include <fmt/format.h>

#include <algorithm>

#include "coopsim/base/error.hpp"
#include "torch_snapshot_state.hpp"

namespace coopsim::torch_snapshot::detail {

void Reconstruction::find_initial_segments() {
  for (const SnapSegment& g : snap_.segments) {
    if (g.expandable) continue;  // find_expandable_segments
    const auto first = first_segment_event_.find(g.addr);
    if (first == first_segment_event_.end()) initial_.push_back({g.addr, g.size, g.stream, g.pool});
  }
  for (const auto& [addr, ev] : first_segment_event_) {
    if (ev.alloc) continue;
    // Freed by the history without being allocated by it: it existed at the start.
    const SnapSegment* g = end_segment_at(addr);
    const SegmentPool pool = g != nullptr && g->addr == addr && g->size == ev.size ? g->pool : pool_by_size(ev.size);
    initial_.push_back({addr, ev.size, ev.stream, pool});
  }
  find_expandable_segments();
  std::sort(initial_.begin(), initial_.end(), [](const InitialSeg& a, const InitialSeg& b) { return a.addr < b.addr; });
  for (std::size_t i = 1; i < initial_.size(); ++i) {
    if (initial_[i - 1].addr + initial_[i - 1].size > initial_[i].addr) {
      throw Error(fmt::format("{}: segments {:#x} and {:#x} of the initial state overlap", snap_.path,
                              initial_[i - 1].addr, initial_[i].addr));
    }
  }
}

const InitialSeg* Reconstruction::initial_at(std::uint64_t addr) const {
  auto it = std::upper_bound(initial_.begin(), initial_.end(), addr,
                             [](std::uint64_t a, const InitialSeg& g) { return a < g.addr; });
  if (it == initial_.begin()) return nullptr;
  --it;
  return addr < it->addr + it->size ? &*it : nullptr;
}

// End-state active blocks the history never touches were live all along.
void Reconstruction::add_untouched_end_blocks() {
  for (const SnapSegment& g : snap_.segments) {
    for (const SnapBlock& b : g.blocks) {
      if (!b.active()) continue;
      if (auto p = pre_live_.find(b.addr); p != pre_live_.end()) {
        // Pre-existing, free requested but not completed: live at the end, size recorded there.
        Preexisting& x = pre_[p->second];
        x.size = b.size;
        x.from_end_state = true;
        x.name = b.name;
        continue;
      }
      if (touched_.find(b.addr) != nullptr) continue;
      Preexisting x;
      x.addr = b.addr;
      x.requested = b.requested;
      x.stream = g.stream;
      x.size = b.size;
      x.from_end_state = true;
      x.name = b.name;
      pre_live_.emplace(b.addr, pre_.size());
      pre_.push_back(std::move(x));
    }
  }
  for (const auto& [addr, i] : pre_live_) {
    if (!pre_[i].from_end_state) {
      note(fmt::format("the block at {:#x} is freed (requested) by the history but the end state does not show it",
                       addr));
    }
  }
}

// Block sizes of the pre-existing blocks the history frees (see the file comment).
void Reconstruction::size_preexisting_blocks() {
  bool allocs_sorted = false;  // sorted when (b) first needs them: most histories have no pre-existing block
  std::vector<std::size_t> order(pre_.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return pre_[a].addr < pre_[b].addr; });
  for (std::size_t k = 0; k < order.size(); ++k) {
    Preexisting& b = pre_[order[k]];
    if (b.from_end_state) continue;
    const std::uint64_t rounded = PyTorchCachingAllocator::round_size(b.requested, opts_);
    const InitialSeg* seg = initial_at(b.addr);
    if (seg == nullptr) {
      b.size = rounded;
      continue;  // placed without an address (expandable or inconsistent); see build_initial_state
    }
    std::uint64_t limit = seg->addr + seg->size;
    if (k + 1 < order.size() && pre_[order[k + 1]].addr < limit) limit = pre_[order[k + 1]].addr;
    if (b.addr + rounded > limit) {
      note(fmt::format("the block at {:#x} ({} bytes requested, {} rounded) overlaps the next block or the segment end",
                       b.addr, b.requested, rounded));
      b.size = limit - b.addr;
      continue;
    }
    b.size = rounded;
    // Small-pool remainders are always split, and so are all remainders with expandable segments.
    if (seg->pool == SegmentPool::Small || seg->expandable || opts_.expandable_segments) continue;
    const std::uint64_t end = b.addr + rounded;
    if (const auto forced = sizes_.find(b.addr);
        forced != sizes_.end() && forced->second > rounded && b.addr + forced->second <= limit) {
      b.size = forced->second;  // found by simulating (see torch_snapshot.cpp)
      ++h_.absorbed_remainders;
      if (b.addr + b.size < limit) h_.ambiguous.push_back({b.addr, b.size, rounded, limit, b.free_entry});
      continue;
    }
    const bool oversize = rounded >= opts_.max_split_size.value;
    // (c) With max_split_size a multiple of 2 MiB, a block of at least max_split_size is a whole
    // segment: it is never split, and it was either a fresh segment or a cached block of at
    // least max_split_size, which only ever comes from such a segment (segments for smaller
    // requests are at most round_up(request, 2 MiB) <= max_split_size bytes).
    if (oversize && opts_.max_split_size.value % (2ULL << 20) == 0) {
      if (b.addr != seg->addr || limit != seg->addr + seg->size) {
        note(
            fmt::format("the pre-existing block at {:#x} ({} bytes rounded, at least max_split_size) does not fill "
                        "its segment {:#x}",
                        b.addr, rounded, seg->addr));
        continue;
      }
      if (limit > end) ++h_.absorbed_remainders;
      b.size = limit - b.addr;
      continue;
    }
    auto possible = [&](std::uint64_t remainder) {
      return oversize ? remainder < opts_.max_non_split_rounding_size.value : remainder <= kSmallSize;
    };
    // (a) A gap of at most kSmallSize cannot be free space: every large-pool block is larger.
    if (limit > end && limit - end <= kSmallSize) {
      if (!possible(limit - end)) {
        note(
            fmt::format("a free gap of {} bytes behind the pre-existing block at {:#x} can be neither free space "
                        "nor its unsplit remainder",
                        limit - end, b.addr));
        continue;
      }
      b.size = limit - b.addr;
      ++h_.absorbed_remainders;
      continue;
    }
    // (b) The first allocation into the gap behind the block (the next block's address
    // included: it can only be taken after that block's free) while the block is live.
    const bool next_is_block = limit < seg->addr + seg->size;
    std::size_t first = kNone;
    std::uint64_t first_addr = 0;
    if (!allocs_sorted) {
      std::sort(allocs_by_addr_.begin(), allocs_by_addr_.end());
      allocs_sorted = true;
    }
    for (auto it =
             std::lower_bound(allocs_by_addr_.begin(), allocs_by_addr_.end(), std::make_pair(end, std::size_t{0}));
         it != allocs_by_addr_.end() && (it->first < limit || (next_is_block && it->first == limit)); ++it) {
      if (it->second < b.free_entry && it->second < first) {
        first = it->second;
        first_addr = it->first;
      }
    }
    if (first == kNone && limit > end) h_.ambiguous.push_back({b.addr, rounded, rounded, limit, b.free_entry});
    if (first == kNone || first_addr == end) continue;
    const std::uint64_t remainder = first_addr - end;
    if (!possible(remainder)) {
      note(
          fmt::format("entry {} allocates at {:#x}, {} bytes behind the end of the pre-existing block at {:#x}: "
                      "more than an unsplit remainder can be",
                      first, first_addr, remainder, b.addr));
      continue;
    }
    b.size = first_addr - b.addr;
    ++h_.absorbed_remainders;
  }
}

void Reconstruction::build_initial_state() {
  // Pre-existing blocks by segment, address order.
  std::vector<std::size_t> order(pre_.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return pre_[a].addr < pre_[b].addr; });
  std::size_t k = 0;
  for (const InitialSeg& seg : initial_) {
    InitialSegment out;
    out.addr = seg.addr;
    out.stream = dense_stream(h_, seg.stream);
    out.pool = seg.pool;
    out.expandable = seg.expandable;
    std::uint64_t at = seg.addr;
    const std::uint64_t end = seg.addr + seg.size;
    for (; k < order.size() && pre_[order[k]].addr < seg.addr; ++k) orphan(order[k]);
    for (; k < order.size() && pre_[order[k]].addr < end; ++k) {
      Preexisting& b = pre_[order[k]];
      if (b.addr < at || b.addr + b.size > end) {
        note(fmt::format("the pre-existing block at {:#x} does not fit the initial segment {:#x}", b.addr, seg.addr));
        orphan(order[k]);
        continue;
      }
      if (b.requested > b.size) {
        // An inconsistent file (the history frees more bytes than the end state's block, or the
        // block was cut at its neighbour): a tensor cannot be larger than its block.
        note(fmt::format("the pre-existing block at {:#x} has {} bytes, fewer than the {} requested of it", b.addr,
                         b.size, b.requested));
        b.requested = b.size;
      }
      if (b.addr > at) out.blocks.push_back(InitialBlock{Bytes{b.addr - at}, coopsim::kNoTensor});
      b.tensor = new_initial_tensor(b);
      out.blocks.push_back(InitialBlock{Bytes{b.size}, TensorId{b.tensor}});
      at = b.addr + b.size;
    }
    if (at < end) out.blocks.push_back(InitialBlock{Bytes{end - at}, coopsim::kNoTensor});
    h_.initial.push_back(std::move(out));
  }
  for (; k < order.size(); ++k) orphan(order[k]);
}

// A pre-existing block outside every reconstructed segment: live from the start all the same.
void Reconstruction::orphan(std::size_t i) {
  Preexisting& b = pre_[i];
  const SnapSegment* g = end_segment_at(b.addr);
  if (g == nullptr || !g->expandable) {
    note(fmt::format("the pre-existing block at {:#x} lies in no segment of the initial state", b.addr));
  }
  b.tensor = new_initial_tensor(b);
  h_.start_allocs.push_back(b.tensor);
}

std::uint32_t Reconstruction::new_initial_tensor(const Preexisting& b) {
  const auto t = static_cast<std::uint32_t>(h_.tensors.size());
  // Without frames the block can only be named by when it was made: OOM reports list it as such.
  h_.tensors.push_back({b.requested, b.name.empty() ? std::string("allocated before recording") : b.name});
  if (b.free_entry == kNone) {
    ++h_.preexisting_kept;
  } else {
    ++h_.preexisting_freed;
  }
  return t;
}

}  // namespace coopsim::torch_snapshot::detail
