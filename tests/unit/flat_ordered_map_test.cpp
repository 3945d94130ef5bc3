// FlatOrderedMap against std::map under random inserts and erases: the same entries in the same
// order, blocks sorted and never empty, through splits and merges.
#include <catch2/catch.hpp>

#include <algorithm>
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

namespace {
// The least value absorbed: a lower bound over the block's entries.
struct MinSummary {
  std::uint32_t least = UINT32_MAX;
  void absorb(const MinSummary& o) { least = std::min(least, o.least); }
};
}  // namespace

TEST_CASE("flat ordered map block summaries bound every entry through splits, merges and refines",
          "[base][flat_ordered_map]") {
  std::mt19937_64 rng(34);
  FlatOrderedMap<std::uint32_t, MinSummary> m;
  std::map<std::uint64_t, std::uint32_t> ref;
  std::uint64_t refined = 0;
  for (int step = 0; step < 40000; ++step) {
    const std::uint64_t key = rng() % 5000;
    const bool insert = (step < 20000) ? (rng() % 4 != 0) : (rng() % 3 == 0);
    if (insert) {
      const auto value = static_cast<std::uint32_t>(rng() % 1000000);
      REQUIRE(m.insert(key, value, MinSummary{value}) == ref.emplace(key, value).second);
    } else {
      REQUIRE(m.erase(key) == (ref.erase(key) == 1));
    }
    if (step % 7 == 0 && !ref.empty()) {
      // An entry changes and its block absorbs the new value (RematGraph::set_producer's case).
      auto it = ref.lower_bound(rng() % 5000);
      if (it == ref.end()) it = ref.begin();
      it->second = static_cast<std::uint32_t>(rng() % 1000000);
      m.absorb_at(it->first, MinSummary{it->second});
    }
    if (step % 13 == 0 && !m.blocks().empty()) {
      // A walker that read a whole block replaces its summary by the exact one.
      const std::size_t b = rng() % m.blocks().size();
      MinSummary exact;
      for (const auto& e : m.blocks()[b]) exact.absorb(MinSummary{ref.at(e.key)});
      m.refine(b, exact);
      ++refined;
    }
    if (step % 17 == 0) {
      std::size_t over = 0;  // entries below their block's summary
      for (std::size_t b = 0; b < m.blocks().size(); ++b) {
        for (const auto& e : m.blocks()[b]) over += m.summary(b).least > ref.at(e.key) ? 1 : 0;
      }
      REQUIRE(over == 0);
    }
  }
  CHECK(refined > 1000);
  CHECK(m.size() == ref.size());
}
