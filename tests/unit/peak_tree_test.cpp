// swap_detail::PeakTree against the passes it replaces in the offline planners: lowering a range
// element by element (clamping at 0) and scanning for the first index of the maximum, on random
// curves and ranges with fixed seeds, clamping included.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "policy/peak_tree.hpp"

using coopsim::swap_detail::PeakTree;

TEST_CASE("peak tree: the same values and first peak as element-by-element passes", "[swap][peak]") {
  for (const unsigned seed : {1U, 2U, 3U, 4U, 5U, 6U, 7U, 8U}) {
    std::mt19937_64 rng(seed);
    const std::size_t total = 1 + rng() % 300;
    std::vector<std::uint64_t> plain(total);
    for (auto& v : plain) v = rng() % 1000;  // many ties, and amounts above some values: clamping
    const std::size_t b = rng() % total, e = b + 1 + rng() % (total - b);
    std::vector<std::uint64_t> kept = plain;
    PeakTree tree(plain, b, e);
    for (int step = 0; step < 200; ++step) {
      const std::size_t from = b + rng() % (e - b), to = from + rng() % (e - from + 1);
      const std::uint64_t amount = rng() % 400;
      for (std::size_t i = from; i < to; ++i) plain[i] -= std::min(plain[i], amount);
      tree.lower(from, to, amount);
      std::size_t first = b;
      for (std::size_t i = b; i < e; ++i) {
        if (plain[i] > plain[first]) first = i;
      }
      INFO("seed " << seed << " step " << step);
      REQUIRE(tree.peak() == std::make_pair(plain[first], first));
    }
    tree.store(kept);
    for (std::size_t i = b; i < e; ++i) CHECK(kept[i] == plain[i]);
  }
}
