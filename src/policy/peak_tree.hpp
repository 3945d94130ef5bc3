// The peak of a load curve under subtractions, for the offline planners' greedy loops (AutoSwap's
// SelectBlock, PoocH's and Capuchin's choose): "lower the load over a gap, then find the new
// peak" was a pass over the whole iteration per chosen tensor, quadratic in the graph's width.
// A segment tree over [b, e) with lazy subtraction answers both in O(log n) and gives exactly
// what the passes gave: the same values (a subtraction clamps at 0, done element by element
// where a range's minimum is below the amount) and the first index of the maximum.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace coopsim::swap_detail {

class PeakTree {
 public:
  // The curve load[b .. e) (b < e).
  PeakTree(const std::vector<std::uint64_t>& load, std::size_t b, std::size_t e);
  // load[i] -= min(load[i], amount) for i in [from, to), indices of the whole curve.
  void lower(std::size_t from, std::size_t to, std::uint64_t amount);
  // The largest value and the first index holding it (an index of the whole curve).
  [[nodiscard]] std::pair<std::uint64_t, std::size_t> peak() const;
  // Writes the current values back into load[b .. e).
  void store(std::vector<std::uint64_t>& load);

 private:
  struct Node {
    std::uint64_t max = 0, min = 0;  // of the node's range, its own pending subtraction applied
    std::uint64_t pending = 0;       // still to subtract from both children
  };
  void build(std::size_t node, std::size_t lo, std::size_t hi, const std::vector<std::uint64_t>& load);
  void lower(std::size_t node, std::size_t lo, std::size_t hi, std::size_t from, std::size_t to, std::uint64_t amount);
  void push(std::size_t node);
  void pull(std::size_t node);
  void store(std::size_t node, std::size_t lo, std::size_t hi, std::vector<std::uint64_t>& load);

  std::size_t b_ = 0, n_ = 0;
  std::vector<Node> nodes_;
};

}  // namespace coopsim::swap_detail
