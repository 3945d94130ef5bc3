// `pytorch` allocator model: expandable segments (Note [Expandable Segments]), following
// find_expandable_block / map_block / try_allocate_expandable_block / unmap_block /
// release_expandable_segment and ExpandableSegment::map / unmap of pytorch/pytorch @001074d2
// c10/cuda/CUDACachingAllocator.cpp.
//
// A virtual segment per (stream, pool) is created on demand; its physical pages (2 MiB in the
// small pool, 20 MiB in the large one) are mapped as allocations need them and counted in
// reserved. Unmapped ranges are blocks with mapped == false, kept per pool in an address-ordered
// set; they are always page aligned. Free mapped blocks never merge with unmapped ones.
#include <algorithm>
#include <string>

#include "coopsim/error.hpp"
#include "src/alloc/pytorch_impl.hpp"

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
  for (auto it = pool.unmapped.lower_bound(AddrKey{stream, 0, 0});
       it != pool.unmapped.end() && it->stream == stream; ++it) {
    std::uint32_t c = it->node;
    if (allocatable(nodes[c].prev)) c = nodes[c].prev;  // a free block just before it helps too
    if (has_room(c)) return c;
  }

  const std::uint64_t page = pool.small ? kSmallBuffer : kLargeBuffer;
  const std::uint64_t total = capacity.value + capacity.value / 8;  // 1 1/8 x device memory
  const std::uint64_t pages = std::max<std::uint64_t>(1, (total + page - 1) / page);
  const std::uint64_t va_size = pages * page;
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

}  // namespace coopsim
