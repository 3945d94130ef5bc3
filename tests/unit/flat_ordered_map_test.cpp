// FlatOrderedMap against std::map under random inserts and erases: the same entries in the same
// order, blocks sorted and never empty, through splits and merges.
#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "coopsim/base/flat_ordered_map.hpp"

using coopsim::FlatOrderedMap;

TEST_CASE("flat ordered map matches std::map", "[base][flat_ordered_map]") {
  for (const std::uint64_t key_range : {50ULL, 3000ULL, 1000000ULL}) {
    std::mt19937_64 rng(key_range);
    FlatOrderedMap<std::uint32_t> m;
    std::map<std::uint64_t, std::uint32_t> ref;
    for (int step = 0; step < 20000; ++step) {
      const std::uint64_t key = rng() % key_range;
      // Grow for the first half, then mostly shrink, so blocks split and merge.
      const bool insert = (step < 10000) ? (rng() % 4 != 0) : (rng() % 4 == 0);
      if (insert) {
        const auto value = static_cast<std::uint32_t>(step);
        REQUIRE(m.insert(key, value) == ref.emplace(key, value).second);
      } else {
        REQUIRE(m.erase(key) == (ref.erase(key) == 1));
      }
      if (step % 997 == 0 || step == 19999) {
        REQUIRE(m.size() == ref.size());
        std::vector<std::pair<std::uint64_t, std::uint32_t>> got;
        m.for_each([&](std::uint64_t k, std::uint32_t v) { got.emplace_back(k, v); });
        const std::vector<std::pair<std::uint64_t, std::uint32_t>> want(ref.begin(), ref.end());
        REQUIRE(got == want);
        for (const auto& block : m.blocks()) {
          REQUIRE_FALSE(block.empty());
          for (std::size_t i = 1; i < block.size(); ++i) REQUIRE(block[i - 1].key < block[i].key);
        }
      }
    }
  }
}
