// PagedIdSet (src/engine/simrd/id_set.hpp), the simrd profile's region interiors: inserts,
// membership, page-wise unions reporting exactly the ids that were absent, and clears that give
// their pages back zeroed, checked against std::set over random operations; bulk inserts; and
// find_id against std::find.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "engine/simrd/id_set.hpp"

using coopsim::simrd::detail::BitPages;
using coopsim::simrd::detail::find_id;
using coopsim::simrd::detail::PagedIdSet;

TEST_CASE("simrd id set: insert, contains and page boundaries", "[simrd][id_set]") {
  BitPages pool;
  PagedIdSet s;
  CHECK_FALSE(s.contains(0, pool));
  CHECK(s.insert(511, pool));    // last id of page 0
  CHECK(s.insert(512, pool));    // first id of page 1
  CHECK(s.insert(70000, pool));  // a far page: the table grows
  CHECK_FALSE(s.insert(512, pool));
  CHECK(s.contains(511, pool));
  CHECK(s.contains(512, pool));
  CHECK(s.contains(70000, pool));
  CHECK_FALSE(s.contains(510, pool));
  CHECK_FALSE(s.contains(513, pool));
  CHECK_FALSE(s.contains(69999, pool));
  CHECK_FALSE(s.contains(1u << 30, pool));  // beyond the table
  s.clear(pool);
  CHECK_FALSE(s.contains(511, pool));
  CHECK_FALSE(s.contains(70000, pool));
  // The pages given back are zeroed: a new set drawing them holds nothing.
  PagedIdSet t;
  CHECK(t.insert(5, pool));
  CHECK_FALSE(t.contains(511, pool));
  CHECK_FALSE(t.contains(0, pool));
}

TEST_CASE("simrd id set: random unions and clears agree with std::set", "[simrd][id_set]") {
  BitPages pool;
  std::mt19937 rng(34);
  constexpr int kSets = 6;
  std::vector<PagedIdSet> sets(kSets);
  std::vector<std::set<std::uint32_t>> model(kSets);
  for (int step = 0; step < 4000; ++step) {
    const int a = static_cast<int>(rng() % kSets);
    const int b = static_cast<int>(rng() % kSets);
    switch (rng() % 8) {
      case 0: {  // union: exactly the absent ids are reported, each once
        if (a == b) break;
        std::set<std::uint32_t> reported;
        sets[a].insert_all(sets[b], pool, [&](std::uint32_t id) { REQUIRE(reported.insert(id).second); });
        std::set<std::uint32_t> expected;
        for (std::uint32_t id : model[b]) {
          if (model[a].insert(id).second) expected.insert(id);
        }
        REQUIRE(reported == expected);
        break;
      }
      case 1:
        if (rng() % 4 == 0) {
          sets[a].clear(pool);
          model[a].clear();
        }
        break;
      case 2: {  // a bulk insert of ids in pages seen and unseen, repeats included
        std::vector<std::uint32_t> ids;
        for (int k = static_cast<int>(rng() % 40); k > 0; --k) {
          ids.push_back(rng() % 3 == 0 ? rng() % 200000 : static_cast<std::uint32_t>(step) * 7 + rng() % 1500);
        }
        if (!ids.empty() && rng() % 2 == 0) ids.push_back(ids.front());
        sets[a].insert_many(ids, pool);
        model[a].insert(ids.begin(), ids.end());
        break;
      }
      default: {  // ids clustered near a moving point, with some far ones
        const std::uint32_t id =
            rng() % 16 == 0 ? rng() % 200000 : (static_cast<std::uint32_t>(step) * 7 + rng() % 900);
        REQUIRE(sets[a].insert(id, pool) == model[a].insert(id).second);
        break;
      }
    }
    for (int probe = 0; probe < 4; ++probe) {
      const std::uint32_t id = rng() % 2 == 0 ? rng() % 200000 : static_cast<std::uint32_t>(step) * 7 + rng() % 900;
      REQUIRE(sets[a].contains(id, pool) == (model[a].count(id) != 0));
    }
  }
}

TEST_CASE("simrd id set: find_id finds what std::find finds", "[simrd][id_set]") {
  std::mt19937 rng(35);
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<std::uint32_t> ids(rng() % 40);
    for (auto& id : ids) id = rng() % 24;  // repeats: the first one counts
    const std::uint32_t wanted = rng() % 30;
    const std::size_t from = ids.empty() ? 0 : rng() % (ids.size() + 1);
    const std::uint32_t* first = ids.data() + from;
    const std::uint32_t* last = ids.data() + ids.size();
    REQUIRE(find_id(first, last, wanted) == std::find(first, last, wanted));
  }
  const std::vector<std::uint32_t> edge{0, 0xffffffffU, 7, 0xffffffffU};
  CHECK(find_id(edge.data(), edge.data() + edge.size(), 0xffffffffU) == edge.data() + 1);
  CHECK(find_id(edge.data(), edge.data(), 0) == edge.data());  // empty
}
