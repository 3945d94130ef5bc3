// Address-ordered pieces tiling one or more reserved regions, plus a (size, address)-ordered index
// of the free ones: the shared core of the `bestfit` (Coop arena) and `cnmem` models.
//
//  * Pieces live in a slot vector (recycled, no per-operation heap allocation) and form one doubly
//    linked list in address order across all regions; a layout-aware policy walks it with
//    first()/at(i).next.
//  * A piece flagged `head` starts a separate reservation: it is never merged into its
//    predecessor (cnmem's isHead rule; the arena's single region has one head, its first piece).
//  * Free pieces are indexed by (size, address): best_fit() = smallest size >= request, lowest
//    address on ties, in O(log n). Used pieces are found by start address through a flat hash map.
//  * Byte counters are maintained incrementally; check() recomputes everything from scratch.
#pragma once

#include <cstdint>
#include <memory_resource>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "coopsim/alloc/allocator.hpp"
#include "coopsim/base/addr_map.hpp"

namespace coopsim::detail {

inline constexpr std::uint32_t kNoPiece = ~std::uint32_t{0};

// Free-index entry: ordered by (size, address); `index` is the piece it stands for.
struct FreeKey {
  std::uint64_t size;
  std::uint64_t addr;
  std::uint32_t index;
};
struct FreeLess {
  bool operator()(const FreeKey& a, const FreeKey& b) const {
    return a.size != b.size ? a.size < b.size : a.addr < b.addr;
  }
};
using FreeIndex = std::pmr::set<FreeKey, FreeLess>;

struct Piece {
  std::uint64_t addr = 0;
  std::uint64_t size = 0;
  std::uint64_t requested = 0;  // used pieces: bytes asked for; 0 when free
  std::uint32_t prev = kNoPiece;
  std::uint32_t next = kNoPiece;
  std::uint32_t segment = 0;  // id of the reservation (region) the piece lies in
  std::uint32_t stream = 0;   // used pieces: stream of the request
  bool free = true;
  bool head = false;              // starts a reservation: never merged into its predecessor
  FreeIndex::iterator free_it{};  // free pieces: their entry in the free index
  [[nodiscard]] std::uint64_t end() const { return addr + size; }
};

class PieceList {
 public:
  PieceList();
  PieceList(const PieceList&) = delete;
  PieceList& operator=(const PieceList&) = delete;
  PieceList(PieceList&&) = delete;
  PieceList& operator=(PieceList&&) = delete;
  ~PieceList() = default;

  // Adds a reservation [addr, addr + size) as one free head piece, linked in before piece
  // `before` (kNoPiece: at the end of the list). The caller keeps regions disjoint and ordered.
  std::uint32_t add_region(std::uint64_t addr, std::uint64_t size, std::uint32_t segment, std::uint32_t before);

  // Smallest free piece with size >= `size`, lowest address on ties; kNoPiece when none.
  [[nodiscard]] std::uint32_t best_fit(std::uint64_t size) const {
    auto it = free_.lower_bound(FreeKey{size, 0, kNoPiece});
    return it == free_.end() ? kNoPiece : it->index;
  }

  // Carves a used piece of `size` bytes out of free piece `index` (size <= its size): at the
  // piece's low end, or at its high end (piece end - size) when `align_right`. What is left
  // stays a free piece (the left part keeps the head flag). Returns the used piece.
  std::uint32_t place(std::uint32_t index, std::uint64_t size, std::uint64_t requested, std::uint32_t stream,
                      bool align_right);

  // Frees the used piece that starts at `addr`, checking that it has this size and requested
  // size; merges with a free predecessor (unless the piece is a head) and then with a free
  // successor (unless that one is a head). Returns the resulting free piece. Throws
  // InvariantError naming `who` when no such used piece exists.
  std::uint32_t release(std::uint64_t addr, std::uint64_t size, std::uint64_t requested, std::string_view who);

  [[nodiscard]] const Piece& at(std::uint32_t index) const { return pieces_[index]; }
  [[nodiscard]] std::uint32_t first() const { return first_; }
  [[nodiscard]] std::uint32_t last() const { return last_; }
  [[nodiscard]] bool empty() const { return first_ == kNoPiece; }

  [[nodiscard]] std::uint64_t allocated() const { return allocated_; }
  [[nodiscard]] std::uint64_t requested() const { return requested_; }
  [[nodiscard]] std::uint64_t free_bytes() const { return free_bytes_; }
  [[nodiscard]] std::uint64_t free_count() const { return free_.size(); }
  [[nodiscard]] std::uint64_t used_count() const { return used_.size(); }
  [[nodiscard]] std::uint64_t largest_free() const { return free_.empty() ? 0 : free_.rbegin()->size; }

  // Every piece in address order, addresses shifted down by `base`.
  [[nodiscard]] std::vector<Range> ranges(std::uint64_t base) const;
  // The free pieces in address order (O(f log f) in their number) and the end of the last
  // piece, shifted down by `base` (Allocator's free_ranges_by_address and ranges_end).
  void free_by_address(std::uint64_t base, std::vector<Range>& out) const;
  [[nodiscard]] std::uint64_t end(std::uint64_t base) const { return empty() ? 0 : pieces_[last_].end() - base; }

  // Recomputes every structure and counter; throws InvariantError("<who>: ...") on the first
  // inconsistency. Checks: link symmetry, strictly increasing addresses, exact tiling inside a
  // region (non-head pieces start where their predecessor ends, in the same segment), the first
  // piece is a head, no two mergeable free neighbours, every piece and used size a multiple of
  // `alignment` relative to `base`, free index == free pieces, address map == used pieces,
  // counters == sums, slot bookkeeping.
  void check(std::string_view who, std::uint64_t alignment, std::uint64_t base) const;

 private:
  std::uint32_t new_piece();
  void recycle(std::uint32_t index);
  // Free-index maintenance. Nodes are moved between pieces (extract / re-key / insert) rather
  // than freed and allocated again, and erased through the iterator each free piece keeps.
  void index_free(std::uint32_t index) {
    Piece& p = pieces_[index];
    p.free_it = free_.insert(FreeKey{p.size, p.addr, index}).first;
    free_bytes_ += p.size;
  }
  void unindex_free(std::uint32_t index) {
    free_bytes_ -= pieces_[index].size;
    free_.erase(pieces_[index].free_it);
  }
  // Takes the index node of free piece `from` (its bytes leave the free count).
  FreeIndex::node_type take_node(std::uint32_t from) {
    free_bytes_ -= pieces_[from].size;
    return free_.extract(pieces_[from].free_it);
  }
  // Re-keys `node` for free piece `to` and puts it back.
  void give_node(FreeIndex::node_type node, std::uint32_t to) {
    Piece& p = pieces_[to];
    node.value() = FreeKey{p.size, p.addr, to};
    p.free_it = free_.insert(std::move(node)).position;
    free_bytes_ += p.size;
  }
  // Absorbs free piece `right` (the successor of `left`) into free piece `left`; both unindexed.
  void absorb(std::uint32_t left, std::uint32_t right);

  std::vector<Piece> pieces_;
  std::vector<std::uint32_t> spare_;  // recycled slots
  std::uint32_t first_ = kNoPiece;
  std::uint32_t last_ = kNoPiece;
  std::pmr::unsynchronized_pool_resource pool_;  // before free_: set nodes come from it
  FreeIndex free_;
  AddrMap<std::uint32_t> used_;  // start address -> used piece
  std::uint64_t allocated_ = 0;
  std::uint64_t requested_ = 0;
  std::uint64_t free_bytes_ = 0;
};

}  // namespace coopsim::detail
