// Coop's layout-aware eviction search (Zhang et al., "Coop: Memory is not a Commodity",
// NeurIPS 2023; code: Oneflow-Inc/oneflow @25c8978c1c oneflow/core/vm/remat/allocator.cpp,
// RematEpAllocator::EvictAndFindPieceOnce, restated in docs/models/coop.md).
//
// Over the arena's pieces in address order, a two-pointer scan finds the contiguous range of
// minimum summed eviction cost whose bytes reach `required`:
//  * free pieces cost 0; pieces holding pinned or unevictable tensors are barriers that no
//    window may contain (the window restarts after them, with no comparison at the barrier);
//  * the window grows to the right while it is too small and drops its leftmost piece once it
//    is large enough; after every step a large-enough window with a strictly lower cost
//    becomes the best, so ties go to the first window found (lowest address; for one right
//    edge, the larger window);
//  * each cost is read once per call; costs are not updated while the window slides;
//  * the scan ends when the right edge passes the last piece (as upstream: windows that would
//    only shrink from the left after that point are not examined).
// O(N) in the number of pieces.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "coopsim/base/units.hpp"

namespace coopsim {

struct WindowPiece {
  Bytes size;
  bool barrier = false;  // holds a pinned or unevictable tensor
  double cost = 0.0;     // 0 for a free piece (or a tensor whose h is 0)
};

struct WindowChoice {
  std::size_t first = 0, last = 0;  // pieces [first, last)
  double cost = 0.0;
  Bytes bytes;
};

struct WindowSearchStats {
  std::uint64_t pieces_examined = 0;  // pieces that entered the window (search-latency proxy)
};

std::optional<WindowChoice> find_min_cost_window(std::span<const WindowPiece> pieces, Bytes required,
                                                 WindowSearchStats* stats = nullptr);

}  // namespace coopsim
