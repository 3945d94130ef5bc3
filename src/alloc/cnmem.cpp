// `cnmem`: NVIDIA cnmem, root manager, NULL stream, no stealing.
// Source: NVIDIA/cnmem @37896cc : src/cnmem.cpp, include/cnmem.h (docs/models/cnmem.md).
// Modelled rules (Manager::allocate / findBestBlockUnsafe / allocateBlockUnsafe /
// extractBlockUnsafe / releaseBlockUnsafe, cnmemInit, cnmemMalloc):
//  * cnmemMalloc rounds every size up to CNMEM_GRANULARITY = 512.
//  * cnmemInit reserves one cudaMalloc of ceil(size, 512) (param initial_reservation; cnmem's
//    size 0 means totalGlobalMem / 2, coopsim's 0 means no initial reservation).
//  * find: scan of the address-sorted free list for the smallest size >= request; strict '<'
//    keeps the lowest address among equal sizes.
//  * grow (unless CANNOT_GROW): cudaMalloc of exactly the rounded request; the new block is a
//    head (isHead) inserted into the free list at its address and used directly.
//  * split: the allocation keeps the block's start (and isHead); any remainder becomes a free
//    non-head block at data + size (no minimum remainder).
//  * free: merge into the free predecessor if contiguous and the freed block is not a head, then
//    with the free successor if contiguous and the successor is not a head: never across
//    separate cudaMalloc regions, even adjacent ones. Memory is never returned to CUDA.
// Departures: NULL stream only, no stealing between managers; the free-list scan and used-list
// search are an ordered index and a hash map that pick the same block; a reservation equal to
// the capacity is allowed (upstream: strictly below total memory); can_grow=false without an
// initial reservation, and a 0-byte request, are errors (upstream: a NULL result).
#include "cnmem.hpp"

#include <fmt/format.h>

#include "coopsim/base/error.hpp"
#include "coopsim/alloc/registry.hpp"

namespace coopsim {

namespace {
constexpr std::string_view kCnmemWho = "cnmem";
}

std::vector<ParamDoc> CnMemAllocator::param_docs() {
  return {
      ParamDoc{"initial_reservation",
               ParamType::Bytes,
               "0",
               "bytes reserved by one device allocation at start (cnmemInit; rounded up to "
               "512 B). 0 = none, grow on demand (cnmem's own size 0 would mean "
               "totalGlobalMem/2)",
               {}},
      ParamDoc{"can_grow",
               ParamType::Bool,
               "true",
               "allow further device allocations of exactly the rounded request when no free "
               "block fits; false = CNMEM_FLAGS_CANNOT_GROW (needs initial_reservation > 0)",
               {}},
  };
}

std::unique_ptr<Allocator> CnMemAllocator::create(const Params& p, Bytes capacity) {
  CnMemOptions o;
  o.initial_reservation = p.get_bytes("initial_reservation");
  o.can_grow = p.get_bool("can_grow");
  if (round_up(o.initial_reservation.value, kGranularity) > capacity.value) {
    throw ConfigError(
        p.component() + ".initial_reservation",
        fmt::format("{} exceeds the device capacity {}", format_bytes(o.initial_reservation), format_bytes(capacity)));
  }
  if (!o.can_grow && o.initial_reservation.value == 0) {
    throw ConfigError(p.component() + ".can_grow",
                      "false needs an initial_reservation > 0 (nothing could be allocated)");
  }
  return std::make_unique<CnMemAllocator>(capacity, o);
}

CnMemAllocator::CnMemAllocator(Bytes capacity, CnMemOptions opts) : opts_(opts), device_(capacity, kGranularity) {
  const std::uint64_t initial = round_up(opts_.initial_reservation.value, kGranularity);
  if (initial > capacity.value) {
    throw ConfigError("cnmem.initial_reservation",
                      fmt::format("{} exceeds the device capacity {}", format_bytes(opts_.initial_reservation),
                                  format_bytes(capacity)));
  }
  if (!opts_.can_grow && initial == 0) {
    throw ConfigError("cnmem.can_grow", "false needs an initial_reservation > 0 (nothing could be allocated)");
  }
  if (initial > 0 && grow(initial) == detail::kNoPiece) {
    throw ConfigError("cnmem.initial_reservation", "the device refused the initial reservation");
  }
}

std::uint32_t CnMemAllocator::grow(std::uint64_t size) {
  const std::optional<std::uint64_t> addr = device_.malloc(Bytes{size});
  if (!addr) return detail::kNoPiece;
  // Link the region in before the region that follows it in address order (DeviceMemory's bump
  // pointer makes that "at the end", but nothing here relies on it).
  auto after = regions_.upper_bound(*addr);
  const std::uint32_t before = after == regions_.end() ? detail::kNoPiece : after->second.head;
  const auto segment = static_cast<std::uint32_t>(device_.mallocs() - 1);
  const std::uint32_t head = pieces_.add_region(*addr, size, segment, before);
  regions_.emplace(*addr, Region{size, head, segment});
  return head;
}

std::optional<Block> CnMemAllocator::allocate(const AllocRequest& request) {
  if (request.size.value == 0) throw InvariantError("cnmem: allocate of 0 bytes");
  const std::uint64_t size = round_up(request.size.value, kGranularity);
  std::uint32_t piece = pieces_.best_fit(size);
  if (piece == detail::kNoPiece) {
    if (!opts_.can_grow) return std::nullopt;
    piece = grow(size);
    if (piece == detail::kNoPiece) return std::nullopt;
  }
  const std::uint32_t used = pieces_.place(piece, size, request.size.value, request.stream, /*align_right=*/false);
  const detail::Piece& u = pieces_.at(used);
  return Block{u.addr, Bytes{u.size}, request.size, request.stream};
}

void CnMemAllocator::deallocate(const Block& block) {
  pieces_.release(block.addr, block.size.value, block.requested.value, kCnmemWho);
}

AllocatorStats CnMemAllocator::stats() const {
  AllocatorStats s;
  s.capacity = device_.capacity();
  s.reserved = device_.used();
  s.allocated = Bytes{pieces_.allocated()};
  s.requested = Bytes{pieces_.requested()};
  s.active = s.allocated;
  s.largest_free = Bytes{pieces_.largest_free()};
  s.footprint = s.reserved;
  s.free_ranges = pieces_.free_count();
  s.segments = regions_.size();
  s.device_mallocs = device_.mallocs();
  s.device_frees = device_.frees();
  return s;
}

std::vector<Range> CnMemAllocator::ranges() const { return pieces_.ranges(0); }

void CnMemAllocator::segment_starts(std::vector<std::uint64_t>& out) const {
  out.clear();
  for (const auto& [start, region] : regions_) out.push_back(start);  // regions are never given back
}

void CnMemAllocator::check_invariants() const {
  pieces_.check(kCnmemWho, kGranularity, 0);
  auto fail = [](const std::string& what) { throw InvariantError("cnmem: " + what); };
  // Walk the list region by region: each region starts with its head piece and its pieces tile
  // it exactly up to the next head.
  std::uint32_t i = pieces_.first();
  std::uint64_t total = 0;
  for (const auto& [start, region] : regions_) {
    if (i != region.head) {
      fail(fmt::format("region at {:#x} does not start at the next listed piece", start));
    }
    const detail::Piece& h = pieces_.at(i);
    if (!h.head || h.addr != start || h.segment != region.segment) {
      fail(fmt::format("region at {:#x}: its first piece [{:#x}, +{}) is not its head", start, h.addr, h.size));
    }
    std::uint64_t covered = 0;
    do {
      const detail::Piece& p = pieces_.at(i);
      if (p.segment != region.segment) {
        fail(fmt::format("piece at {:#x} lies in region {:#x} but has segment {}", p.addr, start, p.segment));
      }
      covered += p.size;
      i = p.next;
    } while (i != detail::kNoPiece && !pieces_.at(i).head);
    if (covered != region.size) {
      fail(fmt::format("region at {:#x} of {} B is covered by {} B of pieces", start, region.size, covered));
    }
    total += region.size;
  }
  if (i != detail::kNoPiece) fail("pieces follow the last region");
  if (total != device_.used().value) {
    fail(fmt::format("regions total {} B but the device holds {} B", total, device_.used().value));
  }
  if (regions_.size() != device_.mallocs() || device_.frees() != 0) {
    fail(fmt::format("{} regions for {} device mallocs and {} frees", regions_.size(), device_.mallocs(),
                     device_.frees()));
  }
  if (pieces_.allocated() + pieces_.free_bytes() != total) {
    fail(fmt::format("allocated {} + free {} != reserved {}", pieces_.allocated(), pieces_.free_bytes(), total));
  }
  if (!opts_.can_grow && regions_.size() > 1) fail("grew although can_grow is false");
}

// Its line in the registry (src/alloc/registry.cpp).
AllocatorRegistry::Entry cnmem_allocator_entry() { return AllocatorRegistry::entry_for<CnMemAllocator>(); }

}  // namespace coopsim
