// `fungible` (DTR's address-blind counter): counter semantics, fake addresses, parameters,
// misuse, and a seeded random stress.
#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "alloc/fungible.hpp"
#include "coopsim/base/error.hpp"
#include "alloc_steps.hpp"

using namespace coopsim;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace fungible_test {

namespace {

using test::must_alloc;
using test::must_free;

}  // namespace

TEST_CASE("fungible: an empty model has the whole capacity free", "[fungible]") {
  FungibleAllocator a(Bytes{10000});
  a.check_invariants();
  const auto s = a.stats();
  CHECK(s.capacity == Bytes{10000});
  CHECK(s.reserved == 0_B);
  CHECK(s.allocated == 0_B);
  CHECK(s.largest_free == Bytes{10000});
  CHECK(s.footprint == 0_B);
  CHECK(s.free_ranges == 1);
  CHECK(s.segments == 0);
  CHECK(s.device_mallocs == 0);
  CHECK(a.ranges().empty());
}

TEST_CASE("fungible: a byte counter that fails only when allocated + size exceeds capacity", "[fungible]") {
  FungibleAllocator a(Bytes{10000});
  const Block b1 = must_alloc(a, 3000);
  CHECK(b1.addr == 0);
  CHECK(b1.size == Bytes{3000});
  CHECK(b1.requested == Bytes{3000});
  const Block b2 = must_alloc(a, 5000);
  CHECK(b2.addr == 3000);
  auto s = a.stats();
  CHECK(s.allocated == Bytes{8000});
  CHECK(s.requested == Bytes{8000});
  CHECK(s.reserved == Bytes{8000});
  CHECK(s.footprint == Bytes{8000});
  CHECK(s.largest_free == Bytes{2000});
  CHECK(s.free_ranges == 1);

  CHECK_FALSE(a.allocate(AllocRequest{Bytes{2001}}).has_value());
  a.check_invariants();
  CHECK(a.stats().allocated == Bytes{8000});

  const Block b3 = must_alloc(a, 2000);  // exactly fills the budget
  CHECK(b3.addr == 8000);
  s = a.stats();
  CHECK(s.allocated == Bytes{10000});
  CHECK(s.largest_free == 0_B);
  CHECK(s.free_ranges == 0);
  CHECK_FALSE(a.allocate(AllocRequest{1_B}).has_value());

  // Freed bytes serve any request at once: no placement, no fragmentation. The freed block's
  // fake address is not reused.
  must_free(a, b1);
  CHECK(a.stats().largest_free == Bytes{3000});
  CHECK(a.stats().free_ranges == 1);
  must_free(a, b3);
  CHECK(a.stats().largest_free == Bytes{5000});
  const Block b4 = must_alloc(a, 5000);  // spans "both holes" in an address-aware model
  CHECK(b4.addr == 10000);
  CHECK(a.stats().allocated == Bytes{10000});

  const auto r = a.ranges();
  REQUIRE(r.size() == 2);
  CHECK(r[0].addr == 3000);
  CHECK(r[0].size == Bytes{5000});
  CHECK_FALSE(r[0].free);
  CHECK(r[1].addr == 10000);

  must_free(a, b2);
  must_free(a, b4);
  CHECK(a.stats().allocated == 0_B);
  CHECK(a.stats().requested == 0_B);
}

TEST_CASE("fungible: alignment rounds sizes before counting them", "[fungible]") {
  const auto docs = FungibleAllocator::param_docs();
  REQUIRE(docs.size() == 1);
  CHECK(docs[0].key == "alignment");
  CHECK(docs[0].default_value == "1");
  CHECK_FALSE(docs[0].help.empty());

  SECTION("default: exact bytes") {
    auto a = FungibleAllocator::create(Params("fungible", docs), 4_KiB);
    const auto b = a->allocate(AllocRequest{Bytes{100}});
    REQUIRE(b);
    CHECK(b->size == Bytes{100});
    a->check_invariants();
  }
  SECTION("alignment 512") {
    auto a = FungibleAllocator::create(Params("fungible", {{"alignment", 512}}, docs), 4_KiB);
    const auto b1 = a->allocate(AllocRequest{Bytes{100}});
    REQUIRE(b1);
    CHECK(b1->size == 512_B);
    CHECK(b1->requested == Bytes{100});
    const auto b2 = a->allocate(AllocRequest{Bytes{513}});
    REQUIRE(b2);
    CHECK(b2->addr == 512);
    CHECK(b2->size == 1024_B);
    const auto s = a->stats();
    CHECK(s.allocated == 1536_B);
    CHECK(s.requested == Bytes{613});
    CHECK(s.largest_free == Bytes{4096 - 1536});
    // 2560 B left: 2561 rounds to 3072 and fails.
    CHECK_FALSE(a->allocate(AllocRequest{Bytes{2561}}).has_value());
    CHECK(a->allocate(AllocRequest{Bytes{2560}}).has_value());
    a->check_invariants();
  }
  SECTION("unknown key") { CHECK_THROWS_AS(Params("fungible", {{"granularity", 512}}, docs), ConfigError); }
  SECTION("zero alignment") {
    CHECK_THROWS_AS(FungibleAllocator::create(Params("fungible", {{"alignment", 0}}, docs), 4_KiB), ConfigError);
  }
}

TEST_CASE("fungible: deallocating an unknown or mismatched block throws InvariantError", "[fungible]") {
  FungibleAllocator a(4_KiB);
  const Block b = must_alloc(a, 1000);
  CHECK_THROWS_AS(a.deallocate(Block{1000, 10_B, 10_B, 0}), InvariantError);
  CHECK_THROWS_AS(a.deallocate(Block{b.addr, 999_B, 999_B, 0}), InvariantError);
  a.check_invariants();
  must_free(a, b);
  CHECK_THROWS_AS(a.deallocate(b), InvariantError);
  CHECK_THROWS_AS(a.allocate(AllocRequest{0_B}), InvariantError);
}

TEST_CASE("fungible: seeded random alloc/free keeps every invariant", "[fungible]") {
  constexpr std::uint64_t kCapacity = 4ULL << 20;
  FungibleAllocator a(Bytes{kCapacity});
  std::mt19937_64 rng(0xF0F0F0ULL);
  std::vector<Block> live;
  std::map<std::uint64_t, std::uint64_t> spans;
  std::uint64_t allocated = 0;
  int fails = 0;
  for (int step = 0; step < 20000; ++step) {
    const bool do_alloc = live.empty() || rng() % 100 < 55;
    if (do_alloc) {
      const std::uint64_t size = rng() % 8 == 0 ? 1 + rng() % (512 << 10) : 1 + rng() % 16384;
      const auto b = a.allocate(AllocRequest{Bytes{size}});
      // Succeeds exactly when the counter has room.
      REQUIRE(b.has_value() == (allocated + size <= kCapacity));
      if (!b) {
        ++fails;
      } else {
        REQUIRE(b->size.value == size);
        auto next = spans.lower_bound(b->addr);
        if (next != spans.end()) REQUIRE(b->addr + b->size.value <= next->first);
        if (next != spans.begin()) REQUIRE(std::prev(next)->second <= b->addr);
        spans.emplace(b->addr, b->addr + b->size.value);
        live.push_back(*b);
        allocated += size;
      }
    } else {
      const std::size_t k = rng() % live.size();
      const Block b = live[k];
      live[k] = live.back();
      live.pop_back();
      a.deallocate(b);
      spans.erase(b.addr);
      allocated -= b.size.value;
    }
    a.check_invariants();
    const auto s = a.stats();
    REQUIRE(s.allocated.value == allocated);
    REQUIRE(s.largest_free.value == kCapacity - allocated);
  }
  CHECK(fails > 0);
  for (const auto& b : live) a.deallocate(b);
  a.check_invariants();
  CHECK(a.stats().allocated == 0_B);
}

}  // namespace fungible_test
