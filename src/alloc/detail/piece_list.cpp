// Address-ordered piece list with a (size, address) free index; see piece_list.hpp.
#include "piece_list.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "coopsim/base/error.hpp"

namespace coopsim::detail {

PieceList::PieceList() : free_(&pool_) {}

std::uint32_t PieceList::new_piece() {
  if (!spare_.empty()) {
    const std::uint32_t i = spare_.back();
    spare_.pop_back();
    pieces_[i] = Piece{};
    return i;
  }
  pieces_.emplace_back();
  return static_cast<std::uint32_t>(pieces_.size() - 1);
}

void PieceList::recycle(std::uint32_t index) {
  pieces_[index] = Piece{};  // size 0: not a listed piece
  spare_.push_back(index);
}

std::uint32_t PieceList::add_region(std::uint64_t addr, std::uint64_t size, std::uint32_t segment,
                                    std::uint32_t before) {
  const std::uint32_t i = new_piece();
  Piece& p = pieces_[i];
  p.addr = addr;
  p.size = size;
  p.segment = segment;
  p.head = true;
  p.free = true;
  p.next = before;
  p.prev = before == kNoPiece ? last_ : pieces_[before].prev;
  if (p.prev == kNoPiece)
    first_ = i;
  else
    pieces_[p.prev].next = i;
  if (before == kNoPiece)
    last_ = i;
  else
    pieces_[before].prev = i;
  index_free(i);
  return i;
}

std::uint32_t PieceList::place(std::uint32_t index, std::uint64_t size, std::uint64_t requested, std::uint32_t stream,
                               bool align_right) {
  std::uint32_t used = index;
  if (pieces_[index].size == size) {
    unindex_free(index);
  } else {
    FreeIndex::node_type node = take_node(index);
    const std::uint32_t rest = new_piece();  // may reallocate pieces_: index afterwards
    Piece& p = pieces_[index];
    Piece& q = pieces_[rest];
    // q goes right after p; p keeps its start (and head flag), q never is a head.
    q.prev = index;
    q.next = p.next;
    if (p.next == kNoPiece)
      last_ = rest;
    else
      pieces_[p.next].prev = rest;
    p.next = rest;
    q.segment = p.segment;
    q.head = false;
    if (align_right) {
      q.addr = p.end() - size;
      q.size = size;
      p.size -= size;
      used = rest;
      give_node(std::move(node), index);
    } else {
      q.addr = p.addr + size;
      q.size = p.size - size;
      p.size = size;
      give_node(std::move(node), rest);
    }
  }
  Piece& u = pieces_[used];
  u.free = false;
  u.free_it = FreeIndex::iterator{};
  u.requested = requested;
  u.stream = stream;
  used_.insert(u.addr, used);
  allocated_ += u.size;
  requested_ += requested;
  return used;
}

void PieceList::absorb(std::uint32_t left, std::uint32_t right) {
  Piece& l = pieces_[left];
  const Piece& r = pieces_[right];
  l.size += r.size;
  l.next = r.next;
  if (r.next == kNoPiece)
    last_ = left;
  else
    pieces_[r.next].prev = left;
  recycle(right);
}

std::uint32_t PieceList::release(std::uint64_t addr, std::uint64_t size, std::uint64_t requested,
                                 std::string_view who) {
  const std::uint32_t* found = used_.find(addr);
  if (found == nullptr) {
    throw InvariantError(fmt::format("{}: deallocate of unknown block at {:#x} ({} bytes)", who, addr, size));
  }
  std::uint32_t i = *found;
  {
    const Piece& p = pieces_[i];
    if (p.size != size || p.requested != requested) {
      throw InvariantError(
          fmt::format("{}: deallocate of block at {:#x} with size {} (requested {}), but the live block has "
                      "size {} (requested {})",
                      who, addr, size, requested, p.size, p.requested));
    }
  }
  used_.erase(addr);
  allocated_ -= size;
  requested_ -= requested;
  pieces_[i].free = true;
  pieces_[i].requested = 0;
  pieces_[i].stream = 0;

  // Merge rules; the surviving piece is the leftmost, and it reuses an index node of a merged
  // neighbour where there is one.
  const std::uint32_t prev = pieces_[i].prev;
  const std::uint32_t next = pieces_[i].next;
  const bool with_prev =
      prev != kNoPiece && pieces_[prev].free && !pieces_[i].head && pieces_[prev].end() == pieces_[i].addr;
  const bool with_next =
      next != kNoPiece && pieces_[next].free && !pieces_[next].head && pieces_[i].end() == pieces_[next].addr;
  if (!with_prev && !with_next) {
    index_free(i);
    return i;
  }
  FreeIndex::node_type node = take_node(with_prev ? prev : next);
  if (with_prev) {
    absorb(prev, i);
    i = prev;
  }
  if (with_next) {
    if (with_prev) unindex_free(next);
    absorb(i, next);
  }
  give_node(std::move(node), i);
  return i;
}

std::vector<Range> PieceList::ranges(std::uint64_t base) const {
  std::vector<Range> out;
  out.reserve(free_.size() + used_.size());
  for (std::uint32_t i = first_; i != kNoPiece; i = pieces_[i].next) {
    const Piece& p = pieces_[i];
    out.push_back(Range{p.addr - base, Bytes{p.size}, p.free, p.segment});
  }
  return out;
}

void PieceList::free_by_address(std::uint64_t base, std::vector<Range>& out) const {
  out.clear();
  out.reserve(free_.size());
  for (const FreeKey& k : free_) {
    const Piece& p = pieces_[k.index];
    out.push_back(Range{p.addr - base, Bytes{p.size}, true, p.segment});
  }
  std::sort(out.begin(), out.end(), [](const Range& a, const Range& b) { return a.addr < b.addr; });
}

void PieceList::check(std::string_view who, std::uint64_t alignment, std::uint64_t base) const {
  auto fail = [&](const std::string& what) { throw InvariantError(fmt::format("{}: {}", who, what)); };
  auto describe = [&](std::uint32_t i) {
    const Piece& p = pieces_[i];
    return fmt::format("piece #{} [{:#x}, {:#x}) {} B {}{} seg {}", i, p.addr, p.end(), p.size,
                       p.free ? "free" : "used", p.head ? " head" : "", p.segment);
  };

  std::uint64_t n = 0;
  std::uint64_t n_free = 0;
  std::uint64_t n_used = 0;
  std::uint64_t sum_alloc = 0;
  std::uint64_t sum_req = 0;
  std::uint64_t sum_free = 0;
  std::uint32_t prev = kNoPiece;
  for (std::uint32_t i = first_; i != kNoPiece; prev = i, i = pieces_[i].next) {
    if (i >= pieces_.size()) fail(fmt::format("link to slot {} out of range", i));
    if (++n > pieces_.size()) fail("the piece list has a cycle");
    const Piece& p = pieces_[i];
    if (p.prev != prev) fail(fmt::format("{} has a broken prev link", describe(i)));
    if (p.size == 0) fail(fmt::format("{} is empty", describe(i)));
    if (p.addr < base || (p.addr - base) % alignment != 0 || p.size % alignment != 0) {
      fail(fmt::format("{} is not aligned to {} B", describe(i), alignment));
    }
    if (p.end() < p.addr) fail(fmt::format("{} wraps around", describe(i)));
    if (prev == kNoPiece) {
      if (!p.head) fail(fmt::format("first {} is not a head", describe(i)));
    } else {
      const Piece& q = pieces_[prev];
      if (p.head) {
        if (p.addr < q.end()) fail(fmt::format("{} overlaps {}", describe(i), describe(prev)));
        if (p.segment == q.segment) {
          fail(fmt::format("{} starts a region but shares the segment of {}", describe(i), describe(prev)));
        }
      } else {
        if (p.addr != q.end()) {
          fail(fmt::format("{} does not start where {} ends", describe(i), describe(prev)));
        }
        if (p.segment != q.segment) {
          fail(fmt::format("{} continues {} but has another segment", describe(i), describe(prev)));
        }
        if (p.free && q.free) {
          fail(fmt::format("adjacent free pieces were not merged: {} and {}", describe(prev), describe(i)));
        }
      }
    }
    if (p.free) {
      ++n_free;
      sum_free += p.size;
      if (p.requested != 0) fail(fmt::format("{} has a requested size", describe(i)));
      auto it = free_.find(FreeKey{p.size, p.addr, i});
      if (it == free_.end() || it->index != i) {
        fail(fmt::format("{} is missing from the free index", describe(i)));
      }
      if (it != p.free_it) fail(fmt::format("{} holds a stale free-index iterator", describe(i)));
      if (used_.find(p.addr) != nullptr) fail(fmt::format("{} is in the used map", describe(i)));
    } else {
      ++n_used;
      sum_alloc += p.size;
      sum_req += p.requested;
      if (p.requested == 0 || p.requested > p.size) {
        fail(fmt::format("{} has requested size {}", describe(i), p.requested));
      }
      const std::uint32_t* u = used_.find(p.addr);
      if (u == nullptr || *u != i) fail(fmt::format("{} is missing from the used map", describe(i)));
    }
  }
  if (prev != last_) fail("the list tail does not match the last piece");
  if (n_free != free_.size()) {
    fail(fmt::format("free index holds {} entries for {} free pieces", free_.size(), n_free));
  }
  if (n_used != used_.size()) {
    fail(fmt::format("used map holds {} entries for {} used pieces", used_.size(), n_used));
  }
  if (n + spare_.size() != pieces_.size()) {
    fail(fmt::format("{} listed + {} spare != {} slots", n, spare_.size(), pieces_.size()));
  }
  if (sum_alloc != allocated_) {
    fail(fmt::format("allocated counter {} != sum of used pieces {}", allocated_, sum_alloc));
  }
  if (sum_req != requested_) {
    fail(fmt::format("requested counter {} != sum of requested sizes {}", requested_, sum_req));
  }
  if (sum_free != free_bytes_) {
    fail(fmt::format("free counter {} != sum of free pieces {}", free_bytes_, sum_free));
  }
}

}  // namespace coopsim::detail
