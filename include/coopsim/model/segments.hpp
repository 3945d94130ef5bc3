// Device segments as a recording saw them (a PyTorch memory snapshot): the state a simulation may
// start from (Trace::initial_segments, Allocator::seed) and the addresses its new segments got;
// and the changes a model makes to its segments during a run (SegmentChange, for the run log).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "coopsim/base/units.hpp"

namespace coopsim {

// Which pool a caching allocator's segment serves (PyTorch: small <= 1 MiB requests, large).
enum class SegmentPool : std::uint8_t { Small, Large };
constexpr std::string_view to_string(SegmentPool p) { return p == SegmentPool::Small ? "small" : "large"; }

// One block of a recorded segment, in address order.
struct SeedBlock {
  Bytes size;       // block size as the allocator rounded it
  Bytes requested;  // allocated blocks: the request it serves; free blocks: 0
  bool allocated = false;
  friend bool operator==(const SeedBlock&, const SeedBlock&) = default;
};

// A device segment (one cudaMalloc) with its block layout; blocks tile [addr, addr + size()).
struct SeedSegment {
  std::uint64_t addr = 0;
  std::uint32_t stream = 0;
  SegmentPool pool = SegmentPool::Large;
  bool expandable = false;  // snapshot(): a mapped range of an expandable segment
  std::vector<SeedBlock> blocks;
  [[nodiscard]] Bytes size() const {
    Bytes total;
    for (const auto& b : blocks) total += b.size;
    return total;
  }
  friend bool operator==(const SeedSegment&, const SeedSegment&) = default;
};

// A new segment the recording obtained from the device, in recording order.
struct SegmentAddress {
  std::uint64_t addr = 0;
  Bytes size;
  std::uint32_t stream = 0;
  SegmentPool pool = SegmentPool::Large;
  // An expandable segment's virtual address reservation (PyTorch expandable_segments): `addr`
  // is its base, `size` the extent the recording is known to have used; matched by stream and
  // pool, not by order.
  bool expandable = false;
  friend bool operator==(const SegmentAddress&, const SegmentAddress&) = default;
};

// A change a caching allocator model made to the device memory it holds, as a PyTorch memory
// snapshot's history names them: a segment taken from the device (cudaMalloc) or given back
// (cudaFree), or pages of an expandable segment mapped or unmapped (`addr`, `size`: the pages).
enum class SegmentAction : std::uint8_t { Alloc, Free, Map, Unmap };
constexpr std::string_view to_string(SegmentAction a) {
  switch (a) {
    case SegmentAction::Alloc: return "segment_alloc";
    case SegmentAction::Free: return "segment_free";
    case SegmentAction::Map: return "segment_map";
    case SegmentAction::Unmap: return "segment_unmap";
  }
  return "?";
}

struct SegmentChange {
  SegmentAction action = SegmentAction::Alloc;
  std::uint64_t addr = 0;
  Bytes size;
  std::uint32_t stream = 0;
  SegmentPool pool = SegmentPool::Large;
  bool expandable = false;
  friend bool operator==(const SegmentChange&, const SegmentChange&) = default;
};

}  // namespace coopsim
