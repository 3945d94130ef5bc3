// `pytorch` allocator model: expandable segments (Note [Expandable Segments]), following
// find_expandable_block / map_block / try_allocate_expandable_block / unmap_block /
// release_expandable_segment and ExpandableSegment::map / unmap of pytorch/pytorch @001074d2
// c10/cuda/CUDACachingAllocator.cpp.
//
// A virtual segment per (stream, pool) is created on demand; its physical pages (2 MiB in the
// small pool, 20 MiB in the large one) are mapped as allocations need them and counted in
// reserved. Unmapped ranges are blocks with mapped == false, kept per pool in an address-ordered
// set; they are always page aligned. Free mapped blocks never merge with unmapped ones.
//
// Simulations of recordings (additions): a reservation's base comes from the recording when the plan
// has one for the stream and pool (upstream's cuMemAddressReserve result, which the model cannot
// predict), and seed() rebuilds reservations around the recorded mapped ranges.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "coopsim/base/error.hpp"
#include "pytorch_impl.hpp"

namespace coopsim {

using namespace pytorch_detail;
using Impl = PyTorchCachingAllocator::Impl;

// Lowest address (over this stream's segments of the pool) where free and unmapped blocks give
// `size` contiguous bytes; creates a new virtual segment when there is none.
std::uint32_t Impl::find_expandable_block(Pool& pool, std::uint32_t stream, std::uint64_t size) {
  auto allocatable = [&](std::uint32_t b) { return b != kNil && !nodes[b].allocated; };
  auto has_room = [&](std::uint32_t b) {
    std::uint64_t bytes = 0;
    while (bytes < size && allocatable(b)) {
      bytes += nodes[b].size;
      b = nodes[b].next;
    }
    return bytes >= size;
  };
  for (auto it = pool.unmapped.lower_bound(AddrKey{stream, 0, 0}); it != pool.unmapped.end() && it->stream == stream;
       ++it) {
    std::uint32_t c = it->node;
    if (allocatable(nodes[c].prev)) c = nodes[c].prev;  // a free block just before it helps too
    if (has_room(c)) return c;
  }

  const std::uint64_t page = pool.small ? kSmallBuffer : kLargeBuffer;
  std::uint64_t va_size = reservation_size(pool.small);
  const std::uint64_t addr = reserve_address_space(va_size, stream, pool.small);
  const std::uint32_t s = new_segment(addr, va_size, stream, pool.small, true, false);
  segs[s].page_size = page;
  const std::uint32_t n = new_node(s);
  Node& b = nodes[n];
  b.addr = addr;
  b.size = va_size;
  b.mapped = false;
  segs[s].head = n;
  insert_unmapped(n);
  return n;
}

// Maps the pages covering the first `size` bytes of unmapped block n (all or nothing); the rest
// stays an unmapped block behind it. The mapped part merges with free mapped neighbours.
bool Impl::map_block(std::uint32_t n, std::uint64_t size) {
  const std::uint32_t s = nodes[n].seg;
  const std::uint64_t page = segs[s].page_size;
  const std::uint64_t base = segs[s].addr;
  const std::uint64_t begin = nodes[n].addr;
  const std::uint64_t end = base + round_up(begin + size - base, page);
  const std::uint64_t mapped = end - begin;
  if (mapped == 0) return false;
  if (mapped > capacity.value || reserved > capacity.value - mapped) return false;  // cuMemCreate OOM

  erase_unmapped(n);
  nodes[n].mapped = true;
  if (mapped < nodes[n].size) {
    const std::uint32_t r = new_node(s);
    Node& rem = nodes[r];
    Node& b = nodes[n];
    rem.addr = b.addr + mapped;
    rem.size = b.size - mapped;
    rem.mapped = false;
    b.size = mapped;
    link_after(r, n);
    insert_unmapped(r);
  }
  try_merge_blocks(n, nodes[n].prev);
  try_merge_blocks(n, nodes[n].next);
  insert_into_blocks(n);
  reserved += mapped;
  segs[s].mapped_bytes += mapped;
  ++device_mallocs;
  report(SegmentAction::Map, begin, mapped, segs[s].stream, segs[s].small, true);
  return true;
}

// alloc_block for expandable segments: map what the lowest fitting candidate lacks. A failure
// part-way leaves the pages mapped so far as cached free memory, as upstream.
std::uint32_t Impl::try_allocate_expandable_block(Pool& pool, std::uint32_t stream, std::uint64_t size) {
  std::uint32_t c = find_expandable_block(pool, stream, size);
  if (!nodes[c].mapped && !map_block(c, std::min(nodes[c].size, size))) return kNil;
  while (nodes[c].size < size) {
    const std::uint32_t nc = nodes[c].next;
    if (nc == kNil || nodes[nc].mapped || nodes[nc].allocated) {
      throw InvariantError("pytorch: expandable candidate at " + std::to_string(nodes[c].addr) +
                           " is not followed by unmapped space");
    }
    const std::uint64_t remaining = size - nodes[c].size;
    if (!map_block(nc, std::min(remaining, nodes[nc].size))) return kNil;
    c = nc;  // map_block merged c into nc
  }
  erase_from_blocks(c);
  return c;
}

// Unmaps the whole pages inside free mapped block n; partial pages at either end stay mapped
// free blocks. The unmapped range merges with unmapped neighbours.
void Impl::unmap_block(std::uint32_t n) {
  const std::uint32_t s = nodes[n].seg;
  const std::uint64_t page = segs[s].page_size;
  const std::uint64_t base = segs[s].addr;
  const std::uint64_t lo = nodes[n].addr;
  const std::uint64_t hi = lo + nodes[n].size;
  const std::uint64_t begin = base + round_up(lo - base, page);
  const std::uint64_t end = base + (hi - base) / page * page;
  if (begin >= end) return;

  erase_from_blocks(n);
  if (begin > lo) {
    const std::uint32_t bf = new_node(s);
    nodes[bf].addr = lo;
    nodes[bf].size = begin - lo;
    link_before(bf, n);
    insert_into_blocks(bf);
  }
  if (hi > end) {
    const std::uint32_t af = new_node(s);
    nodes[af].addr = end;
    nodes[af].size = hi - end;
    link_after(af, n);
    insert_into_blocks(af);
  }
  Node& b = nodes[n];
  b.addr = begin;
  b.size = end - begin;
  b.mapped = false;
  try_merge_blocks(n, nodes[n].prev);
  try_merge_blocks(n, nodes[n].next);
  insert_unmapped(n);
  reserved -= end - begin;
  segs[s].mapped_bytes -= end - begin;
  ++device_frees;
  report(SegmentAction::Unmap, begin, end - begin, segs[s].stream, segs[s].small, true);
}

// Drops a virtual segment whose single block is entirely unmapped.
void Impl::release_expandable_segment(std::uint32_t n) {
  const Node& b = nodes[n];
  const std::uint32_t s = b.seg;
  if (b.mapped || b.size != segs[s].size || is_split(b)) {
    throw InvariantError("pytorch: releasing expandable segment at " + std::to_string(segs[s].addr) +
                         " that still has mapped or split blocks");
  }
  erase_unmapped(n);
  release_address_space(segs[s].addr, segs[s].size);
  delete_node(n);
  delete_segment(s);
}

std::uint64_t Impl::reservation_size(bool small_pool) const {
  const std::uint64_t page = small_pool ? kSmallBuffer : kLargeBuffer;
  const std::uint64_t max = ~std::uint64_t{0} / page * page;
  if (capacity.value > max - capacity.value / 8) return max;
  const std::uint64_t total = capacity.value + capacity.value / 8;  // 1 1/8 x device memory
  const std::uint64_t pages = std::max<std::uint64_t>(1, total / page + (total % page != 0 ? 1 : 0));
  return pages > max / page ? max : pages * page;
}

// A reservation at `base` stops below the next segment and the next recorded reservation above it
// (and at the end of the address space), in whole pages.
std::uint64_t Impl::clamp_reservation(std::uint64_t base, std::uint64_t size, std::uint64_t page,
                                      std::uint64_t other_base) const {
  std::uint64_t limit = ~std::uint64_t{0};
  if (const auto next = seg_by_addr.upper_bound(base); next != seg_by_addr.end()) limit = next->first;
  for (const SegmentAddress& p : planned) {
    if (p.expandable && p.addr > base) limit = std::min(limit, p.addr);
  }
  if (other_base > base) limit = std::min(limit, other_base);
  return std::min(size, (limit - base) / page * page);
}

std::optional<std::uint64_t> Impl::take_planned_reservation(std::uint32_t stream, bool small_pool, std::uint64_t& size,
                                                            std::uint64_t below) {
  const std::uint64_t page = small_pool ? kSmallBuffer : kLargeBuffer;
  for (std::size_t i = 0; i < planned.size(); ++i) {
    const SegmentAddress& p = planned[i];
    if (!p.expandable || planned_used[i] || p.stream != stream || (p.pool == SegmentPool::Small) != small_pool ||
        p.addr > below) {
      continue;
    }
    planned_used[i] = true;
    if (p.addr > ~std::uint64_t{0} - page || overlaps_segment(p.addr, page)) continue;  // diverged: not free here
    const std::uint64_t want = std::max(size, p.size.value / page * page + (p.size.value % page != 0 ? page : 0));
    size = clamp_reservation(p.addr, want, page);
    return p.addr;
  }
  return std::nullopt;
}

void Impl::seed_expandable(std::span<const SeedSegment> seeds, std::vector<std::vector<Block>>& per_seed) {
  const std::string key = "pytorch.seed";
  // (stream, small) -> seed indices in address order.
  std::map<std::pair<std::uint32_t, bool>, std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    if (!seeds[i].expandable) continue;
    if (!opts.expandable_segments) {
      throw ConfigError(key, fmt::format("segment {:#x} is a mapped range of an expandable segment: replay with "
                                         "pytorch.expandable_segments=true",
                                         seeds[i].addr));
    }
    groups[{seeds[i].stream, seeds[i].pool == SegmentPool::Small}].push_back(i);
  }
  for (auto& [group, idx] : groups) {
    const auto [stream, small_pool] = group;
    std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return seeds[a].addr < seeds[b].addr; });
    const std::uint64_t page = small_pool ? kSmallBuffer : kLargeBuffer;
    const std::uint64_t lo = seeds[idx.front()].addr;
    const std::uint64_t hi = seeds[idx.back()].addr + seeds[idx.back()].size().value;
    std::uint64_t size = reservation_size(small_pool);
    std::uint64_t base = lo;
    if (const auto at = take_planned_reservation(stream, small_pool, size, lo)) base = *at;
    if (overlaps_segment(base, hi - base)) {
      throw ConfigError(key, fmt::format("expandable segment {:#x}+{} overlaps an existing segment", base, hi - base));
    }
    size = std::max(size, round_up(hi - base, page));
    // Also below the other groups' ranges above it (seeded after this one).
    std::uint64_t other = 0;
    for (const auto& [g2, idx2] : groups) {
      if (g2 == group) continue;
      for (const std::size_t j : idx2) {
        if (seeds[j].addr > base && (other == 0 || seeds[j].addr < other)) other = seeds[j].addr;
      }
    }
    size = clamp_reservation(base, size, page, other);
    if (size < hi - base) {
      throw ConfigError(key, fmt::format("expandable segment {:#x}+{} overlaps another reservation", base, hi - base));
    }
    std::uint64_t mapped = 0;
    std::uint64_t prev_end = base;
    for (const std::size_t i : idx) {
      const SeedSegment& g = seeds[i];
      const std::uint64_t bytes = g.size().value;
      if (g.addr < prev_end) throw ConfigError(key, fmt::format("expandable ranges overlap at {:#x}", g.addr));
      if ((g.addr - base) % page != 0 || bytes % page != 0 || bytes == 0) {
        throw ConfigError(key, fmt::format("expandable range {:#x}+{} is not whole {}-byte pages of the reservation "
                                           "at {:#x}",
                                           g.addr, bytes, page, base));
      }
      mapped += bytes;
      prev_end = g.addr + bytes;
    }
    if (mapped > capacity.value || reserved > capacity.value - mapped) {
      throw ConfigError(key,
                        fmt::format("expandable segment {:#x}: {} mapped bytes exceed the capacity", base, mapped));
    }
    const std::uint32_t s = new_segment(base, size, stream, small_pool, true, false);
    segs[s].page_size = page;
    segs[s].mapped_bytes = mapped;
    reserved += mapped;
    std::uint32_t last = kNil;
    auto append = [&](std::uint64_t addr, std::uint64_t bytes, bool is_mapped) {
      const std::uint32_t n = new_node(s);
      nodes[n].addr = addr;
      nodes[n].size = bytes;
      nodes[n].mapped = is_mapped;
      if (last == kNil) {
        segs[s].head = n;
      } else {
        link_after(n, last);
      }
      last = n;
      return n;
    };
    std::uint64_t at = base;
    for (const std::size_t i : idx) {
      const SeedSegment& g = seeds[i];
      if (g.addr > at) append(at, g.addr - at, false);
      at = g.addr;
      for (const SeedBlock& sb : g.blocks) {
        if (!sb.allocated && last != kNil && nodes[last].mapped && !nodes[last].allocated) {
          nodes[last].size += sb.size.value;  // free mapped neighbours are merged
        } else {
          const std::uint32_t n = append(at, sb.size.value, true);
          if (sb.allocated) {
            Node& b = nodes[n];
            b.allocated = true;
            b.requested = sb.requested.value;
            live.insert(at, n);
            allocated += b.size;
            requested += b.requested;
            per_seed[i].push_back(Block{at, sb.size, sb.requested, stream});
          }
        }
        at += sb.size.value;
      }
    }
    if (at < base + size) append(at, base + size - at, false);
    for (std::uint32_t n = segs[s].head; n != kNil; n = nodes[n].next) {
      if (!nodes[n].mapped) {
        insert_unmapped(n);
      } else if (!nodes[n].allocated) {
        insert_into_blocks(n);
      }
    }
  }
}

}  // namespace coopsim
