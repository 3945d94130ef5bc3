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
//  * Small-piece area (param small_area, 0 = off; upstream 1024 * kSmallPieceThreshold = 10 MiB,
//    on by default in master's remat::Env and in dtr2's ONEFLOW_DTR_SMALL_PIECE, off in libai's
//    train_remat.py): the top small_area bytes of the arena (allocator.cpp:375-380, 400-402)
//    take every request whose rounded size is <= small_threshold (kSmallPieceThreshold =
//    10240, allocator.cpp:47-52, 437), best fit there, low end; nothing else is placed there, and
//    a small request that finds no room there fails (FindPiece gives small requests one try,
//    465-469). Eviction never reclaims it (reclaimable_end(); both eviction scans stop at its
//    first piece, 511 and 547).
// Not modelled: group bands (ONEFLOW_REMAT_GROUP_NUM > 2: several regions).
// Departures: the arena is reserved at construction (upstream: on first use) and is the budget
// rounded down to `alignment`, so every piece stays aligned; a 0-byte request is an
// InvariantError (upstream returns nullptr); deallocate() also checks the block's sizes.
#include "bestfit.hpp"

#include <fmt/format.h>

#include <algorithm>

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
      ParamDoc{"small_area",
               ParamType::Bytes,
               "0",
               "OneFlow's small-piece area: the arena's top bytes, reserved for requests of at most "
               "small_threshold (0 = none; OneFlow: 10MiB) and never evicted from",
               {}},
      ParamDoc{"small_threshold",
               ParamType::Bytes,
               "10240",
               "with small_area: the largest rounded request placed there (OneFlow kSmallPieceThreshold)",
               {}},
  };
}

std::unique_ptr<Allocator> BestFitAllocator::create(const Params& p, Bytes capacity) {
  BestFitOptions o;
  o.alignment = p.get_bytes("alignment").value;
  o.small_area = p.get_bytes("small_area").value;
  o.small_threshold = p.get_bytes("small_threshold").value;
  if (o.alignment == 0) throw ConfigError(p.component() + ".alignment", "must be > 0");
  if (o.small_area % o.alignment != 0) {
    throw ConfigError(p.component() + ".small_area", fmt::format("must be a multiple of alignment ({} B)", o.alignment));
  }
  if (o.small_area > 0 && o.small_area >= capacity.value / o.alignment * o.alignment) {
    throw ConfigError(p.component() + ".small_area",
                      fmt::format("{} B leaves no room below it in an arena of {} B", o.small_area,
                                  capacity.value / o.alignment * o.alignment));
  }
  return std::make_unique<BestFitAllocator>(capacity, o);
}

BestFitAllocator::BestFitAllocator(Bytes capacity, BestFitOptions opts) : capacity_(capacity), opts_(opts) {
  if (opts_.alignment == 0) throw ConfigError("bestfit.alignment", "must be > 0");
  arena_ = capacity.value / opts_.alignment * opts_.alignment;
  if (opts_.small_area % opts_.alignment != 0 || (opts_.small_area > 0 && opts_.small_area >= arena_)) {
    throw ConfigError("bestfit.small_area", "must be a multiple of alignment below the arena size");
  }
  normal_end_ = arena_ - opts_.small_area;
  if (normal_end_ > 0) pieces_.add_region(0, normal_end_, 0, detail::kNoPiece);
  if (opts_.small_area > 0) small_.add_region(normal_end_, opts_.small_area, 1, detail::kNoPiece);
}

bool BestFitAllocator::is_small(std::uint64_t rounded) const {
  return opts_.small_area > 0 && rounded <= opts_.small_threshold;
}

Block BestFitAllocator::place(detail::PieceList& list, std::uint32_t piece, std::uint64_t size,
                              const AllocRequest& request, bool align_right) {
  const std::uint32_t used = list.place(piece, size, request.size.value, request.stream, align_right);
  const detail::Piece& u = list.at(used);
  return Block{u.addr, Bytes{u.size}, request.size, request.stream};
}

std::optional<Block> BestFitAllocator::allocate(const AllocRequest& request) {
  if (request.size.value == 0) throw InvariantError("bestfit: allocate of 0 bytes");
  const std::uint64_t size = round_up(request.size.value, opts_.alignment);
  if (size > arena_) return std::nullopt;
  // The small-piece area takes small requests from its low end, whatever the op (upstream's
  // FindProperPositionInGroup aligns left in it).
  const bool small = is_small(size);
  detail::PieceList& list = small ? small_ : pieces_;
  const std::uint32_t piece = list.best_fit(size);
  if (piece == detail::kNoPiece) return std::nullopt;
  return place(list, piece, size, request, /*align_right=*/!small && request.high_end);
}

void BestFitAllocator::deallocate(const Block& block) {
  (block.addr >= normal_end_ && opts_.small_area > 0 ? small_ : pieces_)
      .release(block.addr, block.size.value, block.requested.value, kWho);
}

bool BestFitAllocator::free_ranges_by_address(std::vector<Range>& out) const {
  pieces_.free_by_address(0, out);
  if (!small_.empty()) {
    std::vector<Range> small;
    small_.free_by_address(0, small);
    out.insert(out.end(), small.begin(), small.end());
  }
  return true;
}

AllocatorStats BestFitAllocator::stats() const {
  AllocatorStats s;
  s.capacity = capacity_;
  s.reserved = Bytes{arena_};
  s.allocated = Bytes{pieces_.allocated() + small_.allocated()};
  s.requested = Bytes{pieces_.requested() + small_.requested()};
  s.active = s.allocated;
  s.largest_free = Bytes{std::max(pieces_.largest_free(), small_.largest_free())};
  // Highest end of a used piece: the last piece if used; else (free) its predecessor, which is
  // used because free neighbours are merged, ends where it starts (its region's start when the
  // region is empty). The small-piece area, when something is placed there, lies above.
  for (const detail::PieceList* list : {&pieces_, &small_}) {
    if (list->empty() || list->allocated() == 0) continue;
    const detail::Piece& last = list->at(list->last());
    s.footprint = Bytes{last.free ? last.addr : last.end()};
  }
  s.free_ranges = pieces_.free_count() + small_.free_count();
  s.segments = arena_ > 0 ? 1 : 0;
  s.device_mallocs = s.segments;
  return s;
}

std::vector<Range> BestFitAllocator::ranges() const {
  std::vector<Range> out = pieces_.ranges(0);
  const std::vector<Range> small = small_.ranges(0);
  out.insert(out.end(), small.begin(), small.end());
  return out;
}

void BestFitAllocator::segment_starts(std::vector<std::uint64_t>& out) const {
  out.clear();
  if (normal_end_ > 0) out.push_back(0);                     // the arena
  if (opts_.small_area > 0) out.push_back(normal_end_);  // its small-piece area: a barrier to windows
}

void BestFitAllocator::check_invariants() const {
  pieces_.check(kWho, opts_.alignment, 0);
  small_.check(kWho, opts_.alignment, 0);
  auto fail = [](const std::string& what) { throw InvariantError("bestfit: " + what); };
  if (arena_ % opts_.alignment != 0 || arena_ > capacity_.value) {
    fail(fmt::format("arena of {} B does not fit the capacity {} B at alignment {}", arena_, capacity_.value,
                     opts_.alignment));
  }
  if (arena_ == 0) {
    if (!pieces_.empty() || !small_.empty()) fail("an empty arena has pieces");
    return;
  }
  if (normal_end_ + opts_.small_area != arena_) fail("the small-piece area does not end the arena");
  std::uint64_t footprint = 0;
  // Each list tiles its region [start, end) in segment `segment`.
  auto check_region = [&](const detail::PieceList& list, std::uint64_t start, std::uint64_t end,
                          std::uint32_t segment) {
    if (start == end) {
      if (!list.empty()) fail(fmt::format("an empty region at {} has pieces", start));
      return;
    }
    const detail::Piece& first = list.at(list.first());
    const detail::Piece& last = list.at(list.last());
    if (first.addr != start) fail(fmt::format("the first piece starts at {} instead of {}", first.addr, start));
    if (last.end() != end) fail(fmt::format("the pieces end at {} instead of {}", last.end(), end));
    for (std::uint32_t i = list.first(); i != detail::kNoPiece; i = list.at(i).next) {
      const detail::Piece& p = list.at(i);
      if (p.head != (i == list.first())) fail(fmt::format("piece at {} has a wrong head flag", p.addr));
      if (p.segment != segment) fail(fmt::format("piece at {} is in segment {}", p.addr, p.segment));
      if (!p.free) footprint = p.end();
      if (segment == 1 && !p.free && p.size > opts_.small_threshold) {
        fail(fmt::format("a piece of {} B lies in the small-piece area", p.size));
      }
    }
  };
  check_region(pieces_, 0, normal_end_, 0);
  check_region(small_, normal_end_, arena_, 1);
  const std::uint64_t allocated = pieces_.allocated() + small_.allocated();
  const std::uint64_t free = pieces_.free_bytes() + small_.free_bytes();
  if (allocated + free != arena_) fail(fmt::format("allocated {} + free {} != arena {}", allocated, free, arena_));
  if (stats().footprint.value != footprint) {
    fail(fmt::format("footprint {} != highest used end {}", stats().footprint.value, footprint));
  }
}

// Its line in the registry (src/alloc/registry.cpp).
AllocatorRegistry::Entry bestfit_allocator_entry() { return AllocatorRegistry::entry_for<BestFitAllocator>(); }

}  // namespace coopsim
