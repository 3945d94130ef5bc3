// `cnmem`: hand-worked sequences from NVIDIA cnmem's rules (growth by exact requests, head blocks
// that never merge across device allocations, best fit across regions, low-end split, initial
// reservation, CANNOT_GROW), parameters, misuse, and a seeded random stress.
#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "alloc/cnmem.hpp"
#include "coopsim/base/error.hpp"
#include "alloc_steps.hpp"

using namespace coopsim;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace cnmem_test {

namespace {

constexpr std::uint64_t B = DeviceMemory::kBaseAddress;

using test::must_alloc;
using test::must_free;

struct R {
  std::uint64_t addr;  // offset from DeviceMemory::kBaseAddress
  std::uint64_t size;
  bool free;
  std::uint64_t segment;
  friend bool operator==(const R&, const R&) = default;
};

std::vector<R> layout(const Allocator& a) {
  std::vector<R> out;
  for (const auto& r : a.ranges()) out.push_back(R{r.addr - B, r.size.value, r.free, r.segment});
  return out;
}

}  // namespace

}  // namespace cnmem_test

namespace Catch {
template <>
struct StringMaker<cnmem_test::R> {
  static std::string convert(const cnmem_test::R& r) {
    return "{+" + std::to_string(r.addr) + ", " + std::to_string(r.size) + (r.free ? ", free" : ", used") + ", seg " +
           std::to_string(r.segment) + "}";
  }
};
}  // namespace Catch

namespace cnmem_test {

TEST_CASE("cnmem: grows by exactly the rounded request and never merges across regions", "[cnmem]") {
  CnMemAllocator a(1_MiB);
  a.check_invariants();
  CHECK(a.stats().reserved == 0_B);
  CHECK(a.stats().segments == 0);
  CHECK(a.ranges().empty());

  const Block b1 = must_alloc(a, 1000);  // -> 1024: cudaMalloc(1024)
  CHECK(b1.addr == B);
  CHECK(b1.size == 1024_B);
  CHECK(b1.requested == 1000_B);
  auto s = a.stats();
  CHECK(s.reserved == 1024_B);
  CHECK(s.footprint == 1024_B);
  CHECK(s.segments == 1);
  CHECK(s.device_mallocs == 1);
  CHECK(s.free_ranges == 0);
  CHECK(s.largest_free == 0_B);

  const Block b2 = must_alloc(a, 600);  // -> 1024: nothing free, cudaMalloc(1024), adjacent
  CHECK(b2.addr == B + 1024);
  CHECK(b2.size == 1024_B);
  s = a.stats();
  CHECK(s.reserved == 2048_B);
  CHECK(s.segments == 2);
  CHECK(s.device_mallocs == 2);
  CHECK(s.allocated == 2048_B);
  CHECK(s.requested == 1600_B);

  // Both freed: contiguous, but b2 is a head, so the blocks stay separate.
  must_free(a, b1);
  must_free(a, b2);
  CHECK(layout(a) == std::vector<R>{{0, 1024, true, 0}, {1024, 1024, true, 1}});
  s = a.stats();
  CHECK(s.free_ranges == 2);
  CHECK(s.largest_free == 1024_B);
  CHECK(s.allocated == 0_B);
  CHECK(s.reserved == 2048_B);

  // 2048 fits in neither block although 2048 B are free: grow by exactly 2048.
  const Block b3 = must_alloc(a, 2048);
  CHECK(b3.addr == B + 2048);
  CHECK(a.stats().reserved == 4096_B);
  CHECK(a.stats().segments == 3);

  // 512: two 1024 candidates, the lowest address wins; the low end is taken and the rest of
  // the head block becomes a free non-head block.
  const Block b4 = must_alloc(a, 512);
  CHECK(b4.addr == B);
  CHECK(layout(a) ==
        std::vector<R>{{0, 512, false, 0}, {512, 512, true, 0}, {1024, 1024, true, 1}, {2048, 2048, false, 2}});
  // 512 again: the exact-fit 512 remainder beats the 1024 block.
  const Block b5 = must_alloc(a, 512);
  CHECK(b5.addr == B + 512);
  CHECK(a.stats().free_ranges == 1);

  // Freeing the head block b4: its successor is used, no merge.
  must_free(a, b4);
  CHECK(a.stats().free_ranges == 2);
  // Freeing b5 (not a head) merges into b4's free block; the successor at +1024 is a head.
  must_free(a, b5);
  CHECK(layout(a) == std::vector<R>{{0, 1024, true, 0}, {1024, 1024, true, 1}, {2048, 2048, false, 2}});
  // Freeing b3 (a head): the free block before it is contiguous but b3 is a head.
  must_free(a, b3);
  CHECK(layout(a) == std::vector<R>{{0, 1024, true, 0}, {1024, 1024, true, 1}, {2048, 2048, true, 2}});
  s = a.stats();
  CHECK(s.free_ranges == 3);
  CHECK(s.largest_free == 2048_B);
  CHECK(s.reserved == 4096_B);
  CHECK(s.device_frees == 0);

  // release_cached is a no-op: cnmem never returns memory.
  a.release_cached();
  a.check_invariants();
  CHECK(a.stats().reserved == 4096_B);
  CHECK(a.stats().segments == 3);
}

TEST_CASE("cnmem: best fit searches across regions and splits the low end", "[cnmem]") {
  CnMemAllocator a(64_KiB, CnMemOptions{4_KiB, true});
  a.check_invariants();
  auto s = a.stats();
  CHECK(s.reserved == 4_KiB);
  CHECK(s.segments == 1);
  CHECK(s.device_mallocs == 1);
  CHECK(s.free_ranges == 1);
  CHECK(s.largest_free == 4_KiB);
  CHECK(s.allocated == 0_B);

  const Block a1 = must_alloc(a, 1024);
  CHECK(a1.addr == B);
  const Block a2 = must_alloc(a, 4096);  // only 3072 free: grow by 4096 at +4096
  CHECK(a2.addr == B + 4096);
  CHECK(a.stats().reserved == 8_KiB);
  const Block a3 = must_alloc(a, 2048);  // the 3072 remainder at +1024
  CHECK(a3.addr == B + 1024);
  CHECK(layout(a) ==
        std::vector<R>{{0, 1024, false, 0}, {1024, 2048, false, 0}, {3072, 1024, true, 0}, {4096, 4096, false, 1}});
  must_free(a, a2);  // head: stays apart from the free block that ends where it starts
  CHECK(layout(a) ==
        std::vector<R>{{0, 1024, false, 0}, {1024, 2048, false, 0}, {3072, 1024, true, 0}, {4096, 4096, true, 1}});
  // 1024: exact fit in region 0 beats region 1's 4096.
  const Block a4 = must_alloc(a, 1024);
  CHECK(a4.addr == B + 3072);
  // 3000 -> 3072: only region 1 fits; low end, remainder 1024 at +7168.
  const Block a5 = must_alloc(a, 3000);
  CHECK(a5.addr == B + 4096);
  CHECK(a5.size == 3072_B);
  CHECK(layout(a) == std::vector<R>{{0, 1024, false, 0},
                                    {1024, 2048, false, 0},
                                    {3072, 1024, false, 0},
                                    {4096, 3072, false, 1},
                                    {7168, 1024, true, 1}});
  s = a.stats();
  CHECK(s.allocated == 7168_B);
  CHECK(s.requested == Bytes{1024 + 2048 + 1024 + 3000});
  CHECK(s.reserved == 8_KiB);
  CHECK(s.segments == 2);
  // Free everything: each region collapses to one free head block.
  must_free(a, a3);
  must_free(a, a1);
  must_free(a, a4);
  must_free(a, a5);
  CHECK(layout(a) == std::vector<R>{{0, 4096, true, 0}, {4096, 4096, true, 1}});
}

TEST_CASE("cnmem: the initial reservation is rounded up to 512 B", "[cnmem]") {
  CnMemAllocator a(64_KiB, CnMemOptions{1000_B, true});
  a.check_invariants();
  CHECK(a.stats().reserved == 1024_B);
  CHECK(layout(a) == std::vector<R>{{0, 1024, true, 0}});
}

TEST_CASE("cnmem: with can_grow false only the initial reservation is used", "[cnmem]") {
  CnMemAllocator a(64_KiB, CnMemOptions{4_KiB, false});
  const Block b1 = must_alloc(a, 4096);
  CHECK(b1.addr == B);
  CHECK_FALSE(a.allocate(AllocRequest{512_B}).has_value());
  a.check_invariants();
  auto s = a.stats();
  CHECK(s.reserved == 4_KiB);
  CHECK(s.segments == 1);
  CHECK(s.device_mallocs == 1);
  must_free(a, b1);
  const Block b2 = must_alloc(a, 2048);
  CHECK(b2.addr == B);
  CHECK_FALSE(a.allocate(AllocRequest{2049_B}).has_value());
  const Block b3 = must_alloc(a, 2048);
  CHECK(b3.addr == B + 2048);
  CHECK(a.stats().largest_free == 0_B);
}

TEST_CASE("cnmem: growth fails when the device capacity would be exceeded", "[cnmem]") {
  CnMemAllocator a(4_KiB);
  const Block b1 = must_alloc(a, 3072);
  const Block b2 = must_alloc(a, 1024);
  CHECK(b2.addr == B + 3072);
  CHECK(a.stats().reserved == 4_KiB);
  CHECK_FALSE(a.allocate(AllocRequest{1_B}).has_value());
  a.check_invariants();
  must_free(a, b1);
  must_free(a, b2);
  // 4096 B free in two regions that never merge, and no room to grow.
  CHECK(a.stats().largest_free == 3072_B);
  CHECK_FALSE(a.allocate(AllocRequest{4_KiB}).has_value());
  CHECK_FALSE(a.allocate(AllocRequest{3073_B}).has_value());
  a.check_invariants();
  CHECK(a.stats().device_mallocs == 2);
  CHECK(must_alloc(a, 3072).addr == B);
}

TEST_CASE("cnmem: parameters come from Params with documented defaults", "[cnmem]") {
  const auto docs = CnMemAllocator::param_docs();
  REQUIRE(docs.size() == 2);
  CHECK(docs[0].key == "initial_reservation");
  CHECK(docs[0].default_value == "0");
  CHECK(docs[1].key == "can_grow");
  CHECK(docs[1].default_value == "true");
  for (const auto& d : docs) CHECK_FALSE(d.help.empty());

  SECTION("defaults: grow on demand") {
    auto a = CnMemAllocator::create(Params("cnmem", docs), 1_MiB);
    a->check_invariants();
    CHECK(a->stats().reserved == 0_B);
    CHECK(a->allocate(AllocRequest{100_B})->size == 512_B);
    CHECK(a->stats().reserved == 512_B);
  }
  SECTION("initial reservation without growth") {
    auto a =
        CnMemAllocator::create(Params("cnmem", {{"initial_reservation", "4KiB"}, {"can_grow", false}}, docs), 1_MiB);
    a->check_invariants();
    CHECK(a->stats().reserved == 4_KiB);
    CHECK_FALSE(a->allocate(AllocRequest{8_KiB}).has_value());
  }
  SECTION("unknown key") { CHECK_THROWS_AS(Params("cnmem", {{"initial_size", "4KiB"}}, docs), ConfigError); }
  SECTION("reservation larger than the capacity") {
    CHECK_THROWS_AS(CnMemAllocator::create(Params("cnmem", {{"initial_reservation", "2MiB"}}, docs), 1_MiB),
                    ConfigError);
    CHECK_THROWS_AS(CnMemAllocator(1_MiB, CnMemOptions{Bytes{(1 << 20) + 1}, true}), ConfigError);
  }
  SECTION("no growth and no reservation") {
    CHECK_THROWS_AS(CnMemAllocator::create(Params("cnmem", {{"can_grow", false}}, docs), 1_MiB), ConfigError);
  }
}

TEST_CASE("cnmem: deallocating an unknown or mismatched block throws InvariantError", "[cnmem]") {
  CnMemAllocator a(1_MiB);
  const Block b = must_alloc(a, 1000);
  CHECK_THROWS_AS(a.deallocate(Block{B + 512, 512_B, 512_B, 0}), InvariantError);
  CHECK_THROWS_AS(a.deallocate(Block{b.addr, 512_B, b.requested, 0}), InvariantError);
  a.check_invariants();
  must_free(a, b);
  CHECK_THROWS_AS(a.deallocate(b), InvariantError);
  a.check_invariants();
  CHECK_THROWS_AS(a.allocate(AllocRequest{0_B}), InvariantError);
}

TEST_CASE("cnmem: seeded random alloc/free keeps every invariant", "[cnmem]") {
  constexpr std::uint64_t kCapacity = 8ULL << 20;
  CnMemAllocator a(Bytes{kCapacity}, CnMemOptions{1_MiB, true});
  std::mt19937_64 rng(0x0C7E3E3ULL);
  std::vector<Block> live;
  std::map<std::uint64_t, std::uint64_t> spans;
  std::uint64_t allocated = 0;
  int fails = 0;
  std::uint64_t last_reserved = a.stats().reserved.value;
  for (int step = 0; step < 20000; ++step) {
    const bool do_alloc = live.empty() || rng() % 100 < 55;
    if (do_alloc) {
      const std::uint64_t size = rng() % 8 == 0 ? 1 + rng() % (256 << 10) : 1 + rng() % 16384;
      const auto before = a.stats();
      const auto b = a.allocate(AllocRequest{Bytes{size}});
      const auto after = a.stats();
      if (!b) {
        ++fails;
        CHECK(before.largest_free.value < round_up(size, 512));
        CHECK(before.reserved.value + round_up(size, 512) > kCapacity);
        CHECK(after.reserved == before.reserved);
      } else {
        REQUIRE(b->size.value == round_up(size, 512));
        REQUIRE(b->addr % 512 == 0);
        REQUIRE(b->addr >= B);
        // Either it fit into a free block, or the device grew by exactly the rounded size.
        if (before.largest_free.value >= b->size.value) {
          REQUIRE(after.reserved == before.reserved);
        } else {
          REQUIRE(after.reserved.value == before.reserved.value + b->size.value);
          REQUIRE(after.segments == before.segments + 1);
        }
        auto next = spans.lower_bound(b->addr);
        if (next != spans.end()) REQUIRE(b->addr + b->size.value <= next->first);
        if (next != spans.begin()) REQUIRE(std::prev(next)->second <= b->addr);
        spans.emplace(b->addr, b->addr + b->size.value);
        live.push_back(*b);
        allocated += b->size.value;
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
    REQUIRE(s.reserved.value >= last_reserved);  // never shrinks
    REQUIRE(s.reserved.value <= kCapacity);
    last_reserved = s.reserved.value;
  }
  CHECK(fails > 0);
  CHECK(a.stats().segments > 1);
  for (const auto& b : live) a.deallocate(b);
  a.check_invariants();
  // Fully free: exactly one free block per device allocation.
  CHECK(a.stats().free_ranges == a.stats().segments);
}

}  // namespace cnmem_test
