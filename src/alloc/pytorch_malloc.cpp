// `pytorch` allocator model: malloc, free and the release paths, following
// DeviceCachingAllocator::malloc / free / get_free_block / alloc_block / alloc_found_block /
// free_block / try_merge_blocks / release_* / garbage_collect_cached_blocks of
// pytorch/pytorch @001074d2 c10/cuda/CUDACachingAllocator.cpp.
#include <algorithm>
#include <iterator>
#include <string>

#include "coopsim/base/error.hpp"
#include "pytorch_impl.hpp"

namespace coopsim {

using namespace pytorch_detail;
using Impl = PyTorchCachingAllocator::Impl;

std::optional<Block> Impl::malloc(std::uint64_t orig_size, std::uint32_t stream) {
  const std::uint64_t size = PyTorchCachingAllocator::round_size(orig_size, opts);
  Pool& pool = size <= kSmallSize ? small : large;
  const std::uint64_t alloc_size = PyTorchCachingAllocator::allocation_size(size);

  std::uint32_t n = get_free_block(pool, stream, size);
  if (n == kNil) {
    if (gc_enabled()) garbage_collect_cached_blocks();
    n = alloc_block(pool, stream, size, alloc_size, false);
    if (n == kNil && release_available_cached_blocks(pool, stream, size)) {
      n = alloc_block(pool, stream, size, alloc_size, false);
    }
    if (n == kNil) {
      release_cached_blocks();
      n = alloc_block(pool, stream, size, alloc_size, true);
    }
  }
  if (n == kNil) {
    ++oom_count;
    return std::nullopt;
  }
  return alloc_found_block(n, size, orig_size);
}

// Best fit among the cached blocks of the same stream: lower_bound on (stream, size, address).
std::uint32_t Impl::get_free_block(Pool& pool, std::uint32_t stream, std::uint64_t size) {
  if (gc_enabled()) ++pool.get_free_blocks_call_count;
  auto it = pool.blocks.lower_bound(SizeKey{stream, size, 0, 0});
  if (it == pool.blocks.end() || it->stream != stream) return kNil;

  if (opts.expandable_segments && in_expandable(nodes[it->node])) {
    // In an expandable segment a block can grow into the unmapped range behind it, so best fit
    // compares "expandable sizes": move on while the next candidate would expand less.
    auto expandable_size = [&](std::uint32_t b) {
      const Node& x = nodes[b];
      return x.size + (x.next != kNil && !nodes[x.next].mapped ? nodes[x.next].size : 0);
    };
    auto next = std::next(it);
    while (in_expandable(nodes[it->node]) && next != pool.blocks.end() && next->stream == stream &&
           expandable_size(next->node) < expandable_size(it->node)) {
      it = next++;
    }
  }

  const std::uint64_t mss = opts.max_split_size.value;
  // Do not hand an oversize block to a small request, nor round a large one up too far.
  if (size < mss && it->size >= mss) return kNil;
  if (size >= mss && it->size >= size + opts.max_non_split_rounding_size.value) return kNil;
  const std::uint32_t n = it->node;
  if (it->size >= largest_free) largest_dirty = true;
  pool.blocks.erase(it);
  pool.releasable -= nodes[n].releasable;
  nodes[n].releasable = false;
  nodes[n].pos = {};
  return n;
}

std::uint32_t Impl::alloc_block(Pool& pool, std::uint32_t stream, std::uint64_t size, std::uint64_t alloc_size,
                                bool is_retry) {
  if (is_retry) ++alloc_retries;
  // Memory-fraction check (the capacity is the allowed maximum).
  if (alloc_size > capacity.value || reserved > capacity.value - alloc_size) return kNil;
  if (opts.expandable_segments) return try_allocate_expandable_block(pool, stream, size);

  bool from_device = true;
  const auto addr = acquire_segment(alloc_size, stream, pool.small, from_device);
  if (!addr) return kNil;
  const std::uint32_t s = new_segment(*addr, alloc_size, stream, pool.small, false, from_device);
  const std::uint32_t n = new_node(s);
  Node& b = nodes[n];
  b.addr = *addr;
  b.size = alloc_size;
  segs[s].head = n;
  reserved += alloc_size;
  ++device_mallocs;
  return n;
}

bool Impl::should_split(std::uint32_t n, std::uint64_t size) const {
  const std::uint64_t remaining = nodes[n].size - size;
  if (nodes[n].small || opts.expandable_segments) return remaining >= kMinBlockSize;
  return size < opts.max_split_size.value && remaining > kSmallSize;
}

// Hands out block n (not in any pool set): the low `size` bytes when split, the whole block
// (unsplit remainder included) otherwise.
Block Impl::alloc_found_block(std::uint32_t n, std::uint64_t size, std::uint64_t orig_size) {
  const bool split = should_split(n, size);
  const bool already_split = is_split(nodes[n]);
  const bool expandable = in_expandable(nodes[n]);
  if (split) {
    const std::uint32_t r = new_node(nodes[n].seg);  // may reallocate `nodes`
    Node& b = nodes[n];
    Node& rem = nodes[r];
    rem.addr = b.addr + size;
    rem.size = b.size - size;
    b.size = size;
    link_after(r, n);
    insert_into_blocks(r);
    if (!expandable) {
      if (already_split) {
        inactive_split -= size;  // an inactive split block shrinks by `size`
      } else {
        inactive_split += nodes[r].size;  // a new inactive split block appears
      }
    }
  } else if (already_split && !expandable) {
    inactive_split -= nodes[n].size;
  }
  Node& b = nodes[n];
  b.allocated = true;
  b.requested = orig_size;
  live.insert(b.addr, n);
  allocated += b.size;
  requested += orig_size;
  return Block{b.addr, Bytes{b.size}, Bytes{orig_size}, b.stream};
}

void Impl::free(const Block& blk) {
  const std::uint32_t* found = live.find(blk.addr);
  if (found == nullptr) {
    throw InvariantError("pytorch: deallocate of address " + std::to_string(blk.addr) + " that is not a live block");
  }
  const std::uint32_t n = *found;
  const Node& b = nodes[n];
  if (b.size != blk.size.value || b.stream != blk.stream || b.requested != blk.requested.value) {
    throw InvariantError("pytorch: deallocate of block at " + std::to_string(blk.addr) +
                         " with size/requested/stream " + std::to_string(blk.size.value) + "/" +
                         std::to_string(blk.requested.value) + "/" + std::to_string(blk.stream) + ", live block has " +
                         std::to_string(b.size) + "/" + std::to_string(b.requested) + "/" + std::to_string(b.stream));
  }
  live.erase(blk.addr);
  allocated -= b.size;
  free_block(n);
}

void Impl::free_block(std::uint32_t n) {
  Node& b0 = nodes[n];
  b0.allocated = false;
  requested -= b0.requested;
  b0.requested = 0;
  std::int64_t net_inactive = 0;
  const std::uint32_t prev = b0.prev;
  const std::uint32_t next = b0.next;
  net_inactive -= static_cast<std::int64_t>(try_merge_blocks(n, prev));
  net_inactive -= static_cast<std::int64_t>(try_merge_blocks(n, next));
  insert_into_blocks(n);
  const Node& b = nodes[n];
  if (is_split(b)) net_inactive += static_cast<std::int64_t>(b.size);
  if (!in_expandable(b)) {
    inactive_split = static_cast<std::uint64_t>(static_cast<std::int64_t>(inactive_split) + net_inactive);
  }
}

// Merges free neighbour `src` into `dst` (same segment by construction); returns the bytes
// subsumed, 0 when src is absent, allocated or of another mapping state. dst is in no pool set.
std::uint64_t Impl::try_merge_blocks(std::uint32_t dst, std::uint32_t src) {
  if (src == kNil) return 0;
  Node& s = nodes[src];
  Node& d = nodes[dst];
  if (s.allocated || s.mapped != d.mapped) return 0;
  if (s.mapped) {
    erase_from_blocks(src);
  } else {
    erase_unmapped(src);
  }
  if (d.prev == src) {  // [src dst]
    d.addr = s.addr;
    d.prev = s.prev;
    if (d.prev != kNil) {
      nodes[d.prev].next = dst;
    } else {
      segs[d.seg].head = dst;
    }
  } else {  // [dst src]
    d.next = s.next;
    if (d.next != kNil) nodes[d.next].prev = dst;
  }
  const std::uint64_t subsumed = s.size;
  d.size += subsumed;
  delete_node(src);
  return subsumed;
}

// cudaFree of a whole cached, unsplit, non-expandable segment.
void Impl::release_block(std::uint32_t n) {
  const Node& b = nodes[n];
  if (is_split(b) || in_expandable(b) || b.allocated) {
    throw InvariantError("pytorch: release of block at " + std::to_string(b.addr) +
                         " that is not a whole cached segment (upstream would fail in cudaFree)");
  }
  erase_from_blocks(n);
  const std::uint32_t s = b.seg;
  release_segment(segs[s]);
  reserved -= segs[s].size;
  ++device_frees;
  delete_node(n);
  delete_segment(s);
}

// Frees cached oversize (>= max_split_size) blocks of the request's stream and pool: the smallest
// one that covers the (rounded-up) request, else the largest ones until their sum does.
bool Impl::release_available_cached_blocks(Pool& pool, std::uint32_t stream, std::uint64_t size) {
  const std::uint64_t mss = opts.max_split_size.value;
  if (mss == PyTorchOptions::kOff) return false;
  const std::uint64_t key_size = std::max(size, mss);
  auto it = pool.blocks.lower_bound(SizeKey{stream, key_size, 0, 0});
  auto releasable = [&](const SizeKey& k) { return !in_expandable(nodes[k.node]); };
  if (it == pool.blocks.end() || it->stream != stream) {
    if (it == pool.blocks.begin()) return false;
    std::uint64_t total = 0;
    --it;  // the largest block of this stream, if any
    while (total < key_size && it->size >= mss && it->stream == stream && releasable(*it)) {
      const std::uint32_t cur = it->node;
      total += it->size;
      if (it != pool.blocks.begin()) {
        --it;
        release_block(cur);
      } else {
        release_block(cur);
        break;
      }
    }
    return total >= key_size;
  }
  if (!releasable(*it)) return false;
  release_block(it->node);
  return true;
}

// emptyCache(): cudaFree every cached unsplit segment, unmap every free page of expandable
// segments and drop expandable segments left with nothing mapped. Large pool first.
void Impl::release_cached_blocks() {
  release_blocks(large);
  release_blocks(small);
}

void Impl::release_blocks(Pool& pool) {
  if (pool.releasable == 0) return;  // no whole segment and no expandable block cached
  scratch.clear();
  auto it = pool.blocks.begin();
  while (it != pool.blocks.end()) {
    const std::uint32_t n = it->node;
    ++it;
    const Node& b = nodes[n];
    if (in_expandable(b)) {
      scratch.push_back(n);
    } else if (!is_split(b)) {
      release_block(n);
    }
  }
  for (const std::uint32_t n : scratch) {
    unmap_block(n);
    if (!is_split(nodes[n])) release_expandable_segment(n);
  }
}

// Frees cached unsplit large blocks whose age (get_free_block calls on the pool since they were
// cached) is at least the average, until reserved is back under threshold x capacity.
void Impl::garbage_collect_cached_blocks() {
  const auto gc_threshold =
      static_cast<std::uint64_t>(opts.garbage_collection_threshold * static_cast<double>(capacity.value));
  if (reserved <= gc_threshold) return;
  const std::uint64_t target = reserved - gc_threshold;
  std::uint64_t reclaimed = 0;
  std::uint64_t total_age = 0;
  std::uint64_t freeable = 0;
  auto candidate = [&](const Node& b) { return !is_split(b) && !in_expandable(b); };
  for (const SizeKey& k : large.blocks) {
    if (candidate(nodes[k.node])) {
      total_age += gc_count(nodes[k.node]);
      ++freeable;
    }
  }
  if (freeable == 0) return;
  bool freed = true;
  while (reclaimed < target && freed && freeable > 0) {
    const double age_threshold = static_cast<double>(total_age) / static_cast<double>(freeable);
    freed = false;
    auto it = large.blocks.begin();
    while (it != large.blocks.end()) {
      const std::uint32_t n = it->node;
      ++it;
      const Node& b = nodes[n];
      if (candidate(b) && static_cast<double>(gc_count(b)) >= age_threshold) {
        freed = true;
        reclaimed += b.size;
        total_age -= gc_count(b);
        --freeable;
        release_block(n);
      }
    }
  }
}

}  // namespace coopsim
