// Segment tree with lazy subtraction over a load curve (see peak_tree.hpp).
#include "peak_tree.hpp"

#include <algorithm>

namespace coopsim::swap_detail {

PeakTree::PeakTree(const std::vector<std::uint64_t>& load, std::size_t b, std::size_t e)
    : b_(b), n_(e - b), nodes_(4 * (e - b)) {
  build(1, 0, n_, load);
}

void PeakTree::build(std::size_t node, std::size_t lo, std::size_t hi, const std::vector<std::uint64_t>& load) {
  if (hi - lo == 1) {
    nodes_[node].max = nodes_[node].min = load[b_ + lo];
    return;
  }
  const std::size_t mid = lo + (hi - lo) / 2;
  build(2 * node, lo, mid, load);
  build(2 * node + 1, mid, hi, load);
  pull(node);
}

void PeakTree::pull(std::size_t node) {
  nodes_[node].max = std::max(nodes_[2 * node].max, nodes_[2 * node + 1].max);
  nodes_[node].min = std::min(nodes_[2 * node].min, nodes_[2 * node + 1].min);
}

void PeakTree::push(std::size_t node) {
  const std::uint64_t p = nodes_[node].pending;
  if (p == 0) return;
  for (const std::size_t child : {2 * node, 2 * node + 1}) {
    nodes_[child].max -= p;  // the children's minimum was at least p when it was pended
    nodes_[child].min -= p;
    nodes_[child].pending += p;
  }
  nodes_[node].pending = 0;
}

void PeakTree::lower(std::size_t from, std::size_t to, std::uint64_t amount) {
  const std::size_t lo = std::max(from, b_) - b_, hi = std::min(to, b_ + n_) - b_;
  if (amount == 0 || lo >= hi) return;
  lower(1, 0, n_, lo, hi, amount);
}

void PeakTree::lower(std::size_t node, std::size_t lo, std::size_t hi, std::size_t from, std::size_t to,
                     std::uint64_t amount) {
  if (to <= lo || hi <= from) return;
  Node& x = nodes_[node];
  if (from <= lo && hi <= to && x.min >= amount) {  // no clamping anywhere below: one subtraction
    x.max -= amount;
    x.min -= amount;
    if (hi - lo > 1) x.pending += amount;
    return;
  }
  if (hi - lo == 1) {  // a leaf that clamps at 0
    x.max = x.min = x.max - std::min(x.max, amount);
    return;
  }
  push(node);
  const std::size_t mid = lo + (hi - lo) / 2;
  lower(2 * node, lo, mid, from, to, amount);
  lower(2 * node + 1, mid, hi, from, to, amount);
  pull(node);
}

std::pair<std::uint64_t, std::size_t> PeakTree::peak() const {
  // Children share their ancestors' pending subtractions, so their stored maxima compare as the
  // true ones do: go left on ties, which finds the first index of the maximum.
  std::size_t node = 1, lo = 0, hi = n_;
  while (hi - lo > 1) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (nodes_[2 * node].max >= nodes_[2 * node + 1].max) {
      node = 2 * node;
      hi = mid;
    } else {
      node = 2 * node + 1;
      lo = mid;
    }
  }
  return {nodes_[1].max, b_ + lo};
}

void PeakTree::store(std::vector<std::uint64_t>& load) { store(1, 0, n_, load); }

void PeakTree::store(std::size_t node, std::size_t lo, std::size_t hi, std::vector<std::uint64_t>& load) {
  if (hi - lo == 1) {
    load[b_ + lo] = nodes_[node].max;
    return;
  }
  push(node);
  const std::size_t mid = lo + (hi - lo) / 2;
  store(2 * node, lo, mid, load);
  store(2 * node + 1, mid, hi, load);
}

}  // namespace coopsim::swap_detail
