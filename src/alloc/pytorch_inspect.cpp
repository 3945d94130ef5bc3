// `pytorch` allocator model: stats, ranges, invariant checks and seeding of pre-existing
// segments (for simulating memory snapshots).
#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "coopsim/base/error.hpp"
#include "pytorch_impl.hpp"

namespace coopsim {

using namespace pytorch_detail;
using Impl = PyTorchCachingAllocator::Impl;

namespace {

// Largest block of a (stream, size, address)-ordered set: the last block of each stream, found
// from the top down (O(1) with one stream, one lower_bound per further stream).
std::uint64_t largest_in(const Impl::SizeSet& set) {
  std::uint64_t best = 0;
  auto end_of_stream = set.end();
  while (end_of_stream != set.begin()) {
    const Impl::SizeKey& last = *std::prev(end_of_stream);
    best = std::max(best, last.size);
    end_of_stream = set.lower_bound(Impl::SizeKey{last.stream, 0, 0, 0});
  }
  return best;
}

}  // namespace

AllocatorStats Impl::stats() const {
  AllocatorStats st;
  st.capacity = capacity;
  st.reserved = Bytes{reserved};
  st.allocated = Bytes{allocated};
  st.requested = Bytes{requested};
  st.active = Bytes{allocated};
  if (largest_dirty) {
    largest_free = std::max(largest_in(small.blocks), largest_in(large.blocks));
    largest_dirty = false;
  }
  st.largest_free = Bytes{largest_free};
  st.footprint = Bytes{reserved};
  st.free_ranges = small.blocks.size() + large.blocks.size();
  st.segments = segment_count;
  st.device_mallocs = device_mallocs;
  st.device_frees = device_frees;
  st.alloc_retries = alloc_retries;
  return st;
}

std::vector<Range> Impl::ranges() const {
  std::vector<Range> out;
  out.reserve(nodes.size() - free_nodes.size());
  for (const auto& [addr, s] : seg_by_addr) {
    for (std::uint32_t n = segs[s].head; n != kNil; n = nodes[n].next) {
      const Node& b = nodes[n];
      if (b.mapped) out.push_back(Range{b.addr, Bytes{b.size}, !b.allocated, segs[s].id});
    }
  }
  return out;
}

bool Impl::free_ranges_by_address(std::vector<Range>& out) const {
  out.clear();
  if (expandable_count > 0) return false;  // unmapped pages break the tiling the walk relies on
  // Every free block of a non-expandable segment is cached in its pool (free_block()).
  for (const Pool* pool : {&small, &large}) {
    for (const SizeKey& k : pool->blocks) {
      const Node& b = nodes[k.node];
      out.push_back(Range{b.addr, Bytes{b.size}, true, segs[b.seg].id});
    }
  }
  std::sort(out.begin(), out.end(), [](const Range& a, const Range& b) { return a.addr < b.addr; });
  return true;
}

void Impl::segment_starts(std::vector<std::uint64_t>& out) const {
  if (starts_stale) {
    starts.clear();
    for (const auto& [addr, s] : seg_by_addr) starts.push_back(addr);
    starts_stale = false;
  }
  out = starts;
}

std::uint64_t Impl::ranges_end() const {
  if (seg_by_addr.empty()) return 0;
  const Segment& last = segs[seg_by_addr.rbegin()->second];
  return last.addr + last.size;  // not expandable: its blocks tile [addr, addr + size)
}

void Impl::check_invariants() const {
  auto fail = [](const std::string& what) { throw InvariantError("pytorch: " + what); };
  std::uint64_t sum_reserved = 0, sum_allocated = 0, sum_requested = 0, sum_inactive = 0;
  std::uint64_t n_free = 0, n_unmapped = 0, n_live = 0, n_nodes = 0, n_segs = 0, n_expandable = 0;
  std::uint64_t prev_end = 0;

  for (const auto& [addr, s] : seg_by_addr) {
    const Segment& g = segs[s];
    ++n_segs;
    if (g.expandable) ++n_expandable;
    if (!g.used || g.addr != addr) fail(fmt::format("segment index entry {:#x} is stale", addr));
    if (addr < prev_end) fail(fmt::format("segment {:#x} overlaps the previous one", addr));
    prev_end = addr + g.size;
    if (g.head == kNil || nodes[g.head].prev != kNil) {
      fail(fmt::format("segment {:#x} has no proper head block", addr));
    }
    const Pool& pool = g.small ? small : large;
    std::uint64_t at = g.addr, mapped = 0;
    std::uint32_t prev = kNil;
    for (std::uint32_t n = g.head; n != kNil; prev = n, n = nodes[n].next) {
      const Node& b = nodes[n];
      ++n_nodes;
      const std::string where = fmt::format("block {:#x}+{} of segment {:#x}", b.addr, b.size, addr);
      if (!b.used) fail(where + " is a deleted node");
      if (n_nodes > nodes.size()) fail(fmt::format("segment {:#x} block chain loops", addr));
      if (b.seg != s) fail(where + " names another segment");
      if (b.prev != prev) fail(where + " has a wrong prev link");
      if (b.addr != at) fail(where + fmt::format(" does not start where its predecessor ends ({:#x})", at));
      if (b.size == 0) fail(where + " is empty");
      if (b.stream != g.stream || b.small != g.small || b.expandable != g.expandable) {
        fail(where + " disagrees with its segment on stream, pool or kind");
      }
      at += b.size;
      if (prev != kNil) {
        const Node& p = nodes[prev];
        if (!p.allocated && !b.allocated && p.mapped == b.mapped) {
          fail(where + " and its free predecessor were not merged");
        }
      }
      if (!g.expandable && !b.mapped) fail(where + " is unmapped in a cudaMalloc segment");
      if (b.allocated) {
        const std::uint32_t* lv = live.find(b.addr);
        if (lv == nullptr || *lv != n) fail(where + " is allocated but not in the live index");
        if (!b.mapped) fail(where + " is allocated but unmapped");
        ++n_live;
        sum_allocated += b.size;
        sum_requested += b.requested;
      } else if (b.mapped) {
        auto it = pool.blocks.find(SizeKey{b.stream, b.size, b.addr, n});
        if (it == pool.blocks.end() || it->node != n || it != b.pos) fail(where + " is free but not in its pool");
        ++n_free;
        if (!g.expandable && (b.prev != kNil || b.next != kNil)) sum_inactive += b.size;
      } else {
        auto it = pool.unmapped.find(AddrKey{b.stream, b.addr, n});
        if (it == pool.unmapped.end() || it->node != n) fail(where + " is unmapped but not in its pool");
        if ((b.addr - g.addr) % g.page_size != 0 || b.size % g.page_size != 0) {
          fail(where + " is an unmapped range not aligned to the page size");
        }
        ++n_unmapped;
      }
      if (b.mapped) mapped += b.size;
    }
    if (at != g.addr + g.size) {
      fail(fmt::format("blocks of segment {:#x} cover {} bytes, segment has {}", addr, at - g.addr, g.size));
    }
    if (g.expandable) {
      if (mapped != g.mapped_bytes) {
        fail(fmt::format("expandable segment {:#x} maps {} bytes, counter says {}", addr, mapped, g.mapped_bytes));
      }
      sum_reserved += mapped;
    } else {
      sum_reserved += g.size;
    }
  }

  auto check_count = [&](const char* what, std::uint64_t counter, std::uint64_t actual) {
    if (counter != actual) fail(fmt::format("{} is {}, recomputed {}", what, counter, actual));
  };
  check_count("segment count", segment_count, n_segs);
  check_count("expandable segment count", expandable_count, n_expandable);
  check_count("reserved", reserved, sum_reserved);
  check_count("allocated", allocated, sum_allocated);
  check_count("requested", requested, sum_requested);
  check_count("inactive_split_bytes", inactive_split, sum_inactive);
  check_count("live index size", live.size(), n_live);
  check_count("cached free blocks", small.blocks.size() + large.blocks.size(), n_free);
  check_count("unmapped blocks", small.unmapped.size() + large.unmapped.size(), n_unmapped);
  check_count("nodes in use", nodes.size() - free_nodes.size(), n_nodes);
  check_count("segments in use", segs.size() - free_segs.size(), n_segs);
  const std::uint64_t largest = std::max(largest_in(small.blocks), largest_in(large.blocks));
  if (largest_dirty ? largest > largest_free : largest != largest_free) {
    fail(fmt::format("largest free block is {}, cached value {}", largest, largest_free));
  }
  if (reserved > capacity.value) fail(fmt::format("reserved {} exceeds the capacity {}", reserved, capacity.value));
  for (const Pool* p : {&small, &large}) {
    std::uint64_t releasable = 0;
    for (const SizeKey& k : p->blocks) {
      const Node& b = nodes[k.node];
      if (b.releasable != (in_expandable(b) || !is_split(b))) {
        fail(fmt::format("pool entry {:#x}+{}: releasable flag {} is stale", k.addr, k.size, b.releasable));
      }
      releasable += b.releasable;
      if (!b.used || b.allocated || !b.mapped || b.size != k.size || b.addr != k.addr || b.stream != k.stream ||
          b.small != p->small) {
        fail(fmt::format("pool entry {:#x}+{} does not match its block", k.addr, k.size));
      }
    }
    check_count(p->small ? "releasable small blocks" : "releasable large blocks", p->releasable, releasable);
    for (const AddrKey& k : p->unmapped) {
      const Node& b = nodes[k.node];
      if (!b.used || b.mapped || b.addr != k.addr || b.stream != k.stream || b.small != p->small) {
        fail(fmt::format("unmapped entry {:#x} does not match its block", k.addr));
      }
    }
  }
}

std::vector<Block> Impl::seed_segment(std::uint64_t addr, std::uint32_t stream, bool small_pool,
                                      std::span<const PyTorchSeedBlock> blocks) {
  const std::string key = "pytorch.seed_segment";
  if (blocks.empty()) throw ConfigError(key, "a segment needs at least one block");
  std::uint64_t total = 0;
  for (const auto& b : blocks) {
    if (b.size.value == 0) throw ConfigError(key, fmt::format("empty block in segment {:#x}", addr));
    total += b.size.value;
  }
  if (overlaps_segment(addr, total)) {
    throw ConfigError(key, fmt::format("segment {:#x}+{} overlaps an existing segment", addr, total));
  }
  if (total > capacity.value || reserved > capacity.value - total) {
    throw ConfigError(key, fmt::format("segment {:#x}+{} exceeds the capacity", addr, total));
  }
  const std::uint32_t s = new_segment(addr, total, stream, small_pool, false, false);
  reserved += total;

  std::vector<Block> out;
  std::uint64_t at = addr;
  std::uint32_t last = kNil;
  for (const auto& sb : blocks) {
    if (!sb.allocated && last != kNil && !nodes[last].allocated) {
      nodes[last].size += sb.size.value;  // merge adjacent free blocks
    } else {
      const std::uint32_t n = new_node(s);
      Node& b = nodes[n];
      b.addr = at;
      b.size = sb.size.value;
      if (last == kNil) {
        segs[s].head = n;
      } else {
        link_after(n, last);
      }
      last = n;
      if (sb.allocated) {
        b.allocated = true;
        b.requested = sb.requested.value;
        live.insert(at, n);
        allocated += b.size;
        requested += b.requested;
        out.push_back(Block{at, sb.size, sb.requested, stream});
      }
    }
    at += sb.size.value;
  }
  for (std::uint32_t n = segs[s].head; n != kNil; n = nodes[n].next) {
    if (!nodes[n].allocated) {
      insert_into_blocks(n);
      if (is_split(nodes[n])) inactive_split += nodes[n].size;
    }
  }
  return out;
}

// One SeedSegment per cudaMalloc segment; an expandable segment gives one per contiguous run of
// mapped blocks (what upstream's snapshot() reports), flagged `expandable`.
std::vector<SeedSegment> Impl::snapshot() const {
  std::vector<SeedSegment> out;
  for (const auto& [addr, s] : seg_by_addr) {
    const Segment& g = segs[s];
    bool open = false;
    for (std::uint32_t n = g.head; n != kNil; n = nodes[n].next) {
      const Node& b = nodes[n];
      if (!b.mapped) {
        open = false;
        continue;
      }
      if (!open) {
        SeedSegment seg;
        seg.addr = b.addr;
        seg.stream = g.stream;
        seg.pool = g.small ? SegmentPool::Small : SegmentPool::Large;
        seg.expandable = g.expandable;
        out.push_back(std::move(seg));
        open = true;
      }
      out.back().blocks.push_back(SeedBlock{Bytes{b.size}, Bytes{b.allocated ? b.requested : 0}, b.allocated});
    }
  }
  return out;
}

}  // namespace coopsim
