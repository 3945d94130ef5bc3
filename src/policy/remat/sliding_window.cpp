// See src/policy/remat/sliding_window.hpp for the rule and its source.
#include "sliding_window.hpp"

#include <limits>

namespace coopsim {

std::optional<WindowChoice> find_min_cost_window(std::span<const WindowPiece> pieces, Bytes required,
                                                 WindowSearchStats* stats) {
  std::size_t lo = 0, hi = 0;
  std::uint64_t window_bytes = 0;
  double window_cost = 0.0;
  std::optional<WindowChoice> best;
  double best_cost = std::numeric_limits<double>::infinity();
  while (hi < pieces.size()) {
    if (window_bytes < required.value) {
      const WindowPiece& p = pieces[hi];
      if (p.barrier) {
        ++hi;
        lo = hi;
        window_bytes = 0;
        window_cost = 0.0;
        continue;
      }
      window_bytes += p.size.value;
      window_cost += p.cost;
      ++hi;
      if (stats != nullptr) ++stats->pieces_examined;
    } else {
      window_bytes -= pieces[lo].size.value;
      window_cost -= pieces[lo].cost;
      ++lo;
    }
    if (window_bytes >= required.value && window_cost < best_cost) {
      best_cost = window_cost;
      best = WindowChoice{lo, hi, window_cost, Bytes{window_bytes}};
    }
  }
  return best;
}

}  // namespace coopsim
