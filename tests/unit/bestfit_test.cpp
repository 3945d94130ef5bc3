// `bestfit` (Coop's arena): hand-worked sequences from the RematEpAllocator rules, parameters,
// misuse, and a seeded random stress with invariants after every step.
#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "alloc/bestfit.hpp"
#include "coopsim/base/error.hpp"
#include "alloc_steps.hpp"

using namespace coopsim;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace bestfit_test {

namespace {

using test::must_alloc;
using test::must_free;

struct R {
  std::uint64_t addr;
  std::uint64_t size;
  bool free;
  friend bool operator==(const R&, const R&) = default;
};

std::vector<R> layout(const Allocator& a) {
  std::vector<R> out;
  for (const auto& r : a.ranges()) out.push_back(R{r.addr, r.size.value, r.free});
  return out;
}

}  // namespace

}  // namespace bestfit_test

namespace Catch {
template <>
struct StringMaker<bestfit_test::R> {
  static std::string convert(const bestfit_test::R& r) {
    return "{" + std::to_string(r.addr) + ", " + std::to_string(r.size) + (r.free ? ", free}" : ", used}");
  }
};
}  // namespace Catch

namespace bestfit_test {

TEST_CASE("bestfit: empty arena reserves the whole budget as one free piece", "[bestfit]") {
  BestFitAllocator a(8_KiB);
  a.check_invariants();
  const auto s = a.stats();
  CHECK(s.capacity == 8_KiB);
  CHECK(s.reserved == 8_KiB);
  CHECK(s.allocated == 0_B);
  CHECK(s.requested == 0_B);
  CHECK(s.largest_free == 8_KiB);
  CHECK(s.footprint == 0_B);
  CHECK(s.free_ranges == 1);
  CHECK(s.segments == 1);
  CHECK(s.device_mallocs == 1);
  CHECK(s.device_frees == 0);
  CHECK(layout(a) == std::vector<R>{{0, 8192, true}});
}

TEST_CASE("bestfit: requests round up to 512 B and take the low end of the best piece", "[bestfit]") {
  BestFitAllocator a(8_KiB);
  const Block b1 = must_alloc(a, 1000);
  CHECK(b1.addr == 0);
  CHECK(b1.size == 1024_B);
  CHECK(b1.requested == 1000_B);
  const Block b2 = must_alloc(a, 600);
  CHECK(b2.addr == 1024);
  CHECK(b2.size == 1024_B);
  const Block b3 = must_alloc(a, 512);
  CHECK(b3.addr == 2048);
  CHECK(b3.size == 512_B);
  const Block b4 = must_alloc(a, 1);
  CHECK(b4.addr == 2560);
  CHECK(b4.size == 512_B);

  auto s = a.stats();
  CHECK(s.allocated == 3072_B);
  CHECK(s.requested == Bytes{1000 + 600 + 512 + 1});
  CHECK(s.active == 3072_B);
  CHECK(s.reserved == 8_KiB);
  CHECK(s.footprint == 3072_B);
  CHECK(s.largest_free == 5120_B);
  CHECK(s.free_ranges == 1);
  CHECK(layout(a) ==
        std::vector<R>{
            {0, 1024, false}, {1024, 1024, false}, {2048, 512, false}, {2560, 512, false}, {3072, 5120, true}});

  // Free the first block: a 1024 hole at 0; the footprint stays at the highest used end.
  must_free(a, b1);
  s = a.stats();
  CHECK(s.free_ranges == 2);
  CHECK(s.footprint == 3072_B);
  CHECK(s.largest_free == 5120_B);
  // Free the 512 block at 2048: a 512 hole between two used blocks.
  must_free(a, b3);
  CHECK(a.stats().free_ranges == 3);

  // 100 B -> 512: the smallest adequate hole is the 512 one at 2048, not the 1024 one at 0.
  const Block b5 = must_alloc(a, 100);
  CHECK(b5.addr == 2048);
  CHECK(b5.size == 512_B);
  // 513 B -> 1024: the 1024 hole at 0 (exact fit, no empty remainder).
  const Block b6 = must_alloc(a, 513);
  CHECK(b6.addr == 0);
  CHECK(b6.size == 1024_B);
  CHECK(layout(a) ==
        std::vector<R>{
            {0, 1024, false}, {1024, 1024, false}, {2048, 512, false}, {2560, 512, false}, {3072, 5120, true}});
  // 600 B -> 1024: only the tail piece is large enough.
  const Block b7 = must_alloc(a, 600);
  CHECK(b7.addr == 3072);
  CHECK(a.stats().footprint == 4096_B);
  CHECK(a.stats().largest_free == 4096_B);
}

TEST_CASE("bestfit: equal-sized holes are taken lowest address first", "[bestfit]") {
  BestFitAllocator a(8_KiB);
  const Block b0 = must_alloc(a, 1024);
  const Block b1 = must_alloc(a, 1024);
  const Block b2 = must_alloc(a, 1024);
  const Block b3 = must_alloc(a, 1024);
  CHECK(b3.addr == 3072);
  // Holes of 1024 at 2048 and at 0 (freed in that order), tail of 4096 at 4096.
  must_free(a, b2);
  must_free(a, b0);
  CHECK(a.stats().free_ranges == 3);
  const Block c0 = must_alloc(a, 700);
  CHECK(c0.addr == 0);
  const Block c1 = must_alloc(a, 1024);
  CHECK(c1.addr == 2048);
  const Block c2 = must_alloc(a, 1024);
  CHECK(c2.addr == 4096);
  (void)b1;
}

TEST_CASE("bestfit: a freed piece coalesces with free neighbours on both sides", "[bestfit]") {
  BestFitAllocator a(8_KiB);
  const Block b0 = must_alloc(a, 1024);
  const Block b1 = must_alloc(a, 1024);
  const Block b2 = must_alloc(a, 1024);
  const Block b3 = must_alloc(a, 1024);
  must_free(a, b0);
  must_free(a, b2);
  CHECK(layout(a) ==
        std::vector<R>{
            {0, 1024, true}, {1024, 1024, false}, {2048, 1024, true}, {3072, 1024, false}, {4096, 4096, true}});
  // b1 merges with the hole before and the hole after.
  must_free(a, b1);
  CHECK(layout(a) == std::vector<R>{{0, 3072, true}, {3072, 1024, false}, {4096, 4096, true}});
  auto s = a.stats();
  CHECK(s.free_ranges == 2);
  CHECK(s.largest_free == 4096_B);
  CHECK(s.footprint == 4096_B);
  // b3 merges with both: the arena is one free piece again.
  must_free(a, b3);
  CHECK(layout(a) == std::vector<R>{{0, 8192, true}});
  s = a.stats();
  CHECK(s.free_ranges == 1);
  CHECK(s.largest_free == 8_KiB);
  CHECK(s.footprint == 0_B);
  CHECK(s.allocated == 0_B);
  CHECK(s.requested == 0_B);
}

TEST_CASE("bestfit: a freed piece coalesces with a free successor only", "[bestfit]") {
  BestFitAllocator a(4_KiB);
  const Block b0 = must_alloc(a, 1024);
  const Block b1 = must_alloc(a, 1024);
  must_free(a, b1);  // merges with the free tail
  CHECK(layout(a) == std::vector<R>{{0, 1024, false}, {1024, 3072, true}});
  CHECK(a.stats().footprint == 1024_B);
  must_free(a, b0);
  CHECK(layout(a) == std::vector<R>{{0, 4096, true}});
}

TEST_CASE("bestfit: fails when no single hole fits although the free bytes would", "[bestfit]") {
  BestFitAllocator a(4_KiB);
  const Block b0 = must_alloc(a, 1024);
  const Block b1 = must_alloc(a, 1024);
  const Block b2 = must_alloc(a, 1024);
  const Block b3 = must_alloc(a, 1024);
  auto s = a.stats();
  CHECK(s.largest_free == 0_B);
  CHECK(s.free_ranges == 0);
  CHECK(s.footprint == 4_KiB);
  CHECK_FALSE(a.allocate(AllocRequest{1_B}).has_value());
  a.check_invariants();

  must_free(a, b0);
  must_free(a, b2);
  s = a.stats();
  CHECK(s.allocated == 2048_B);
  CHECK(s.largest_free == 1024_B);
  // 2048 B free in total, but in two 1024 holes: 1025 B (-> 1536) does not fit.
  CHECK_FALSE(a.allocate(AllocRequest{1025_B}).has_value());
  a.check_invariants();
  CHECK(a.stats().allocated == 2048_B);
  CHECK(a.stats().free_ranges == 2);
  // Larger than the arena: fails too.
  CHECK_FALSE(a.allocate(AllocRequest{5_KiB}).has_value());
  // Freeing b1 joins the holes: now it fits at 0.
  must_free(a, b1);
  const Block c = must_alloc(a, 1025);
  CHECK(c.addr == 0);
  CHECK(c.size == 1536_B);
  (void)b3;
}

TEST_CASE("bestfit: the arena is the capacity rounded down to the alignment", "[bestfit]") {
  BestFitAllocator a(Bytes{5000});
  a.check_invariants();
  CHECK(a.arena_size() == 4608_B);
  CHECK(a.stats().capacity == Bytes{5000});
  CHECK(a.stats().reserved == 4608_B);
  CHECK(a.stats().largest_free == 4608_B);
  CHECK_FALSE(a.allocate(AllocRequest{4609_B}).has_value());
  CHECK(must_alloc(a, 4608).addr == 0);

  BestFitAllocator tiny(Bytes{100});
  tiny.check_invariants();
  CHECK(tiny.stats().reserved == 0_B);
  CHECK(tiny.stats().segments == 0);
  CHECK(tiny.ranges().empty());
  CHECK_FALSE(tiny.allocate(AllocRequest{1_B}).has_value());
}

TEST_CASE("bestfit: parameters come from Params with documented defaults", "[bestfit]") {
  const auto docs = BestFitAllocator::param_docs();
  REQUIRE(docs.size() == 3);
  CHECK(docs[0].key == "alignment");
  CHECK(docs[0].default_value == "512");
  CHECK(docs[1].key == "small_area");
  CHECK(docs[1].default_value == "0");  // off: OneFlow's small-piece area only when asked for
  CHECK(docs[2].key == "small_threshold");
  CHECK(docs[2].default_value == "10240");
  for (const auto& d : docs) CHECK_FALSE(d.help.empty());

  SECTION("defaults") {
    auto a = BestFitAllocator::create(Params("bestfit", docs), 8_KiB);
    CHECK(a->allocate(AllocRequest{100_B})->size == 512_B);
    a->check_invariants();
  }
  SECTION("alignment 256") {
    auto a = BestFitAllocator::create(Params("bestfit", {{"alignment", "256B"}}, docs), 8_KiB);
    const auto b1 = a->allocate(AllocRequest{100_B});
    const auto b2 = a->allocate(AllocRequest{300_B});
    REQUIRE(b1);
    REQUIRE(b2);
    CHECK(b1->size == 256_B);
    CHECK(b2->addr == 256);
    CHECK(b2->size == 512_B);
    a->check_invariants();
  }
  SECTION("unknown key") { CHECK_THROWS_AS(Params("bestfit", {{"aligment", 512}}, docs), ConfigError); }
  SECTION("zero alignment") {
    CHECK_THROWS_AS(BestFitAllocator::create(Params("bestfit", {{"alignment", 0}}, docs), 8_KiB), ConfigError);
  }
}

TEST_CASE("bestfit: deallocating an unknown or mismatched block throws InvariantError", "[bestfit]") {
  BestFitAllocator a(8_KiB);
  const Block b = must_alloc(a, 1000);
  CHECK_THROWS_AS(a.deallocate(Block{512, 512_B, 512_B, 0}), InvariantError);
  CHECK_THROWS_AS(a.deallocate(Block{b.addr, 512_B, b.requested, 0}), InvariantError);
  CHECK_THROWS_AS(a.deallocate(Block{b.addr, b.size, 999_B, 0}), InvariantError);
  a.check_invariants();
  must_free(a, b);
  CHECK_THROWS_AS(a.deallocate(b), InvariantError);  // double free
  a.check_invariants();
  CHECK_THROWS_AS(a.allocate(AllocRequest{0_B}), InvariantError);
}

TEST_CASE("bestfit: seeded random alloc/free keeps every invariant", "[bestfit]") {
  constexpr std::uint64_t kArena = 4ULL << 20;
  BestFitAllocator a(Bytes{kArena});
  std::mt19937_64 rng(0xC00B5EEDULL);
  std::vector<Block> live;
  std::map<std::uint64_t, std::uint64_t> spans;  // addr -> end of live blocks
  std::uint64_t allocated = 0;
  std::uint64_t requested = 0;
  int fails = 0;
  for (int step = 0; step < 20000; ++step) {
    const bool do_alloc = live.empty() || rng() % 100 < 55;
    if (do_alloc) {
      const std::uint64_t size = rng() % 8 == 0 ? 1 + rng() % (512 << 10) : 1 + rng() % 16384;
      const auto before = a.stats();
      const auto b = a.allocate(AllocRequest{Bytes{size}});
      if (!b) {
        ++fails;
        // A failure means no free piece is large enough.
        CHECK(before.largest_free.value < round_up(size, 512));
        CHECK(a.stats().allocated == before.allocated);
      } else {
        REQUIRE(b->size.value == round_up(size, 512));
        REQUIRE(b->addr % 512 == 0);
        REQUIRE(b->addr + b->size.value <= kArena);
        auto next = spans.lower_bound(b->addr);
        if (next != spans.end()) REQUIRE(b->addr + b->size.value <= next->first);
        if (next != spans.begin()) REQUIRE(std::prev(next)->second <= b->addr);
        spans.emplace(b->addr, b->addr + b->size.value);
        live.push_back(*b);
        allocated += b->size.value;
        requested += size;
      }
    } else {
      const std::size_t k = rng() % live.size();
      const Block b = live[k];
      live[k] = live.back();
      live.pop_back();
      a.deallocate(b);
      spans.erase(b.addr);
      allocated -= b.size.value;
      requested -= b.requested.value;
    }
    a.check_invariants();
    const auto s = a.stats();
    REQUIRE(s.allocated.value == allocated);
    REQUIRE(s.requested.value == requested);
    REQUIRE(s.footprint.value == (spans.empty() ? 0 : spans.rbegin()->second));
  }
  CHECK(fails > 0);  // the mix is sized to hit the arena limit sometimes
  for (const auto& b : live) a.deallocate(b);
  a.check_invariants();
  CHECK(a.ranges().size() == 1);
  CHECK(a.stats().largest_free.value == kArena);
}

}  // namespace bestfit_test
