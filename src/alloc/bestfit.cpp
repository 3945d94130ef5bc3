// `bestfit`: Coop's arena allocator, placement rules only (no eviction, no groups).
// Source: Oneflow-Inc/oneflow @25c8978c1c : oneflow/core/vm/remat/allocator.{h,cpp}
// (RematEpAllocator; see also docs/models/bestfit-fungible.md). Modelled rules:
//  * InitMemory() takes ONE block of the whole budget; it is cut into pieces that tile it, kept
//    in address order (ptr2piece_, prev/next links).
//  * Every request is rounded up to 512 B (kCudaMemAllocAlignSize; here param `alignment`).
//  * FindPiece walks the free set ordered by (size, address) smallest first: best fit, lowest
//    address on ties. The tensor takes the piece's low end (left-aligned); the remainder stays a
//    free piece. With ONEFLOW_REMAT_GROUP_NUM=2 (Coop's op-guided allocation) cheap tensors go
//    right-aligned, at piece_end - size, in the same best-fit piece: AllocRequest::high_end.
//  * Deallocate marks the piece free and merges it with a free next and a free prev piece
//    (MergeNeighbourFreePiece).
//  * No piece fits => the allocation fails here (upstream would then evict; that is policy).
// Not modelled: the small-piece area (off in libai's train_remat.py) and group bands.
// Departures: the arena is reserved at construction (upstream: on first use) and is the budget
// rounded down to `alignment`, so every piece stays aligned; a 0-byte request is an
// InvariantError (upstream returns nullptr); deallocate() also checks the block's sizes.
#include "bestfit.hpp"

#include <fmt/format.h>

#include "coopsim/base/error.hpp"
#include "coopsim/alloc/registry.hpp"

namespace coopsim {

namespace {
constexpr std::string_view kWho = "bestfit";
}

std::vector<ParamDoc> BestFitAllocator::param_docs() {
  return {
      ParamDoc{"alignment",
               ParamType::Bytes,
               "512",
               "every request is rounded up to a multiple of this (OneFlow kCudaMemAllocAlignSize "
               "= 512); the arena is the capacity rounded down to it",
               {}},
  };
}

std::unique_ptr<Allocator> BestFitAllocator::create(const Params& p, Bytes capacity) {
  BestFitOptions o;
  o.alignment = p.get_bytes("alignment").value;
  if (o.alignment == 0) throw ConfigError(p.component() + ".alignment", "must be > 0");
  return std::make_unique<BestFitAllocator>(capacity, o);
}

BestFitAllocator::BestFitAllocator(Bytes capacity, BestFitOptions opts) : capacity_(capacity), opts_(opts) {
  if (opts_.alignment == 0) throw ConfigError("bestfit.alignment", "must be > 0");
  arena_ = capacity.value / opts_.alignment * opts_.alignment;
  if (arena_ > 0) pieces_.add_region(0, arena_, 0, detail::kNoPiece);
}

Block BestFitAllocator::place(std::uint32_t piece, std::uint64_t size, const AllocRequest& request, bool align_right) {
  const std::uint32_t used = pieces_.place(piece, size, request.size.value, request.stream, align_right);
  const detail::Piece& u = pieces_.at(used);
  return Block{u.addr, Bytes{u.size}, request.size, request.stream};
}

std::optional<Block> BestFitAllocator::allocate(const AllocRequest& request) {
  if (request.size.value == 0) throw InvariantError("bestfit: allocate of 0 bytes");
  const std::uint64_t size = round_up(request.size.value, opts_.alignment);
  if (size > arena_) return std::nullopt;
  const std::uint32_t piece = pieces_.best_fit(size);
  if (piece == detail::kNoPiece) return std::nullopt;
  return place(piece, size, request, /*align_right=*/request.high_end);
}

void BestFitAllocator::deallocate(const Block& block) {
  pieces_.release(block.addr, block.size.value, block.requested.value, kWho);
}

AllocatorStats BestFitAllocator::stats() const {
  AllocatorStats s;
  s.capacity = capacity_;
  s.reserved = Bytes{arena_};
  s.allocated = Bytes{pieces_.allocated()};
  s.requested = Bytes{pieces_.requested()};
  s.active = s.allocated;
  s.largest_free = Bytes{pieces_.largest_free()};
  // Highest end of a used piece: the last piece if used; else (free) its predecessor, which is
  // used because free neighbours are merged, ends where it starts (0 when the arena is empty).
  if (!pieces_.empty()) {
    const detail::Piece& last = pieces_.at(pieces_.last());
    s.footprint = Bytes{last.free ? last.addr : last.end()};
  }
  s.free_ranges = pieces_.free_count();
  s.segments = arena_ > 0 ? 1 : 0;
  s.device_mallocs = s.segments;
  return s;
}

std::vector<Range> BestFitAllocator::ranges() const { return pieces_.ranges(0); }

void BestFitAllocator::segment_starts(std::vector<std::uint64_t>& out) const {
  out.clear();
  if (arena_ > 0) out.push_back(0);  // the one arena
}

void BestFitAllocator::check_invariants() const {
  pieces_.check(kWho, opts_.alignment, 0);
  auto fail = [](const std::string& what) { throw InvariantError("bestfit: " + what); };
  if (arena_ % opts_.alignment != 0 || arena_ > capacity_.value) {
    fail(fmt::format("arena of {} B does not fit the capacity {} B at alignment {}", arena_, capacity_.value,
                     opts_.alignment));
  }
  if (arena_ == 0) {
    if (!pieces_.empty()) fail("an empty arena has pieces");
    return;
  }
  const detail::Piece& first = pieces_.at(pieces_.first());
  const detail::Piece& last = pieces_.at(pieces_.last());
  if (first.addr != 0) fail(fmt::format("the first piece starts at {} instead of 0", first.addr));
  if (last.end() != arena_) {
    fail(fmt::format("the pieces end at {} instead of the arena end {}", last.end(), arena_));
  }
  std::uint64_t footprint = 0;
  for (std::uint32_t i = pieces_.first(); i != detail::kNoPiece; i = pieces_.at(i).next) {
    const detail::Piece& p = pieces_.at(i);
    if (p.head != (i == pieces_.first())) fail(fmt::format("piece at {} has a wrong head flag", p.addr));
    if (p.segment != 0) fail(fmt::format("piece at {} is in segment {}", p.addr, p.segment));
    if (!p.free) footprint = p.end();
  }
  if (pieces_.allocated() + pieces_.free_bytes() != arena_) {
    fail(fmt::format("allocated {} + free {} != arena {}", pieces_.allocated(), pieces_.free_bytes(), arena_));
  }
  if (stats().footprint.value != footprint) {
    fail(fmt::format("footprint {} != highest used end {}", stats().footprint.value, footprint));
  }
}

// Its line in the registry (src/alloc/registry.cpp).
AllocatorRegistry::Entry bestfit_allocator_entry() { return AllocatorRegistry::entry_for<BestFitAllocator>(); }

}  // namespace coopsim
