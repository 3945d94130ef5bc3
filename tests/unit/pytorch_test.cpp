// Hand-worked sequences for the `pytorch` caching-allocator model. Every expected address and
// counter below is derived from the upstream rules (pytorch/pytorch @001074d2
// c10/cuda/CUDACachingAllocator.cpp): segments come from
// DeviceMemory's bump pointer starting at kBaseAddress; expandable virtual ranges are handed out
// downwards from just below it.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <vector>

#include "coopsim/alloc/pytorch.hpp"
#include "coopsim/base/error.hpp"

using namespace coopsim;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace pytorch_test {

namespace {

constexpr std::uint64_t KiB = 1ULL << 10;
constexpr std::uint64_t MiB = 1ULL << 20;
constexpr std::uint64_t GiB = 1ULL << 30;
constexpr std::uint64_t B = DeviceMemory::kBaseAddress;

using PT = PyTorchCachingAllocator;

std::optional<Block> try_alloc(PT& a, std::uint64_t size, std::uint32_t stream = 0) {
  auto b = a.allocate(AllocRequest{Bytes{size}, stream, {}});
  a.check_invariants();
  return b;
}

Block must(PT& a, std::uint64_t size, std::uint32_t stream = 0) {
  auto b = try_alloc(a, size, stream);
  REQUIRE(b.has_value());
  CHECK(b->requested.value == size);
  CHECK(b->stream == stream);
  return *b;
}

void drop(PT& a, const Block& b) {
  a.deallocate(b);
  a.check_invariants();
}

void empty(PT& a) {
  a.release_cached();
  a.check_invariants();
}

PyTorchOptions with_mss(std::uint64_t mss) {
  PyTorchOptions o;
  o.max_split_size = Bytes{mss};
  return o;
}

PyTorchOptions expandable() {
  PyTorchOptions o;
  o.expandable_segments = true;
  return o;
}

}  // namespace

TEST_CASE("pytorch: round_size and allocation_size", "[pytorch]") {
  const PyTorchOptions off;
  CHECK(PT::round_size(0, off) == 512);
  CHECK(PT::round_size(1, off) == 512);
  CHECK(PT::round_size(511, off) == 512);
  CHECK(PT::round_size(512, off) == 512);
  CHECK(PT::round_size(513, off) == 1024);
  CHECK(PT::round_size(1000, off) == 1024);
  CHECK(PT::round_size(1200 * KiB + 1, off) == 1200 * KiB + 512);

  // The power-of-two division helper (upstream's own example) ...
  CHECK(PT::roundup_power2_next_division(1200, 4) == 1280);
  CHECK(PT::roundup_power2_next_division(1024, 4) == 1024);
  CHECK(PT::roundup_power2_next_division(1700, 4) == 1792);
  CHECK(PT::roundup_power2_next_division(1800, 4) == 2048);
  CHECK(PT::roundup_power2_next_division(1793, 4) == 2048);
  // ... which round_size applies only when size > 512 x divisions.
  PyTorchOptions div4;
  div4.set_roundup_power2_divisions(4);
  CHECK(PT::round_size(1200, div4) == 1536);  // 1200 <= 2048: plain 512 rounding
  CHECK(PT::round_size(3000, div4) == 3072);
  CHECK(PT::round_size(1200 * KiB, div4) == 1280 * KiB);
  CHECK(PT::round_size(5 * MiB + 1, div4) == 6 * MiB);
  CHECK(PT::round_size(4 * MiB, div4) == 4 * MiB);
  PyTorchOptions div8;
  div8.set_roundup_power2_divisions(8);
  CHECK(PT::round_size(1200 * KiB, div8) == 1280 * KiB);
  CHECK(PT::round_size(1100 * KiB, div8) == 1152 * KiB);
  // Buckets are per power-of-two interval: bucket 0 (< 2 MiB) set, bucket 1 ([2, 4) MiB) not.
  PyTorchOptions bucket0;
  bucket0.roundup_power2_divisions[0] = 4;
  CHECK(PT::round_size(1200 * KiB, bucket0) == 1280 * KiB);
  CHECK(PT::round_size(3 * MiB + 1, bucket0) == 3 * MiB + 512);

  CHECK(PT::allocation_size(512) == 2 * MiB);
  CHECK(PT::allocation_size(1 * MiB) == 2 * MiB);
  CHECK(PT::allocation_size(1 * MiB + 512) == 20 * MiB);
  CHECK(PT::allocation_size(10 * MiB - 512) == 20 * MiB);
  CHECK(PT::allocation_size(10 * MiB) == 10 * MiB);
  CHECK(PT::allocation_size(10 * MiB + 512) == 12 * MiB);
  CHECK(PT::allocation_size(11 * MiB) == 12 * MiB);
}

TEST_CASE("pytorch: small pool packs 2 MiB segments and splits remainders >= 512", "[pytorch]") {
  PT a(Bytes{1 * GiB});
  const Block x = must(a, 1000);
  CHECK(x.addr == B);
  CHECK(x.size.value == 1024);
  auto st = a.stats();
  CHECK(st.reserved.value == 2 * MiB);
  CHECK(st.allocated.value == 1024);
  CHECK(st.requested.value == 1000);
  CHECK(st.active.value == 1024);
  CHECK(st.segments == 1);
  CHECK(st.free_ranges == 1);
  CHECK(st.largest_free.value == 2 * MiB - 1024);
  CHECK(st.device_mallocs == 1);
  CHECK(a.inactive_split_bytes().value == 2 * MiB - 1024);

  const Block y = must(a, 1 * MiB);  // <= 1 MiB: still the small pool
  CHECK(y.addr == B + 1024);
  CHECK(y.size.value == 1 * MiB);
  const Block z = must(a, 600);
  CHECK(z.addr == B + 1 * MiB + 1024);
  CHECK(z.size.value == 1024);
  // Exactly the rest of the segment: remainder 0 < 512, not split.
  const std::uint64_t rest = 2 * MiB - 1 * MiB - 2048;
  const Block w = must(a, rest - 300);
  CHECK(w.addr == B + 1 * MiB + 2048);
  CHECK(w.size.value == rest);
  st = a.stats();
  CHECK(st.free_ranges == 0);
  CHECK(st.largest_free.value == 0);
  CHECK(st.allocated.value == 2 * MiB);
  CHECK(st.requested.value == 1000 + 1 * MiB + 600 + rest - 300);
  CHECK(a.inactive_split_bytes().value == 0);
  CHECK(st.segments == 1);

  drop(a, y);  // neighbours allocated: no merge
  CHECK(a.stats().free_ranges == 1);
  CHECK(a.inactive_split_bytes().value == 1 * MiB);
  drop(a, x);  // merges with y's block
  CHECK(a.stats().free_ranges == 1);
  CHECK(a.stats().largest_free.value == 1 * MiB + 1024);
  drop(a, z);
  CHECK(a.inactive_split_bytes().value == 1 * MiB + 2048);
  drop(a, w);  // the whole segment again, no longer split
  st = a.stats();
  CHECK(st.free_ranges == 1);
  CHECK(st.largest_free.value == 2 * MiB);
  CHECK(st.allocated.value == 0);
  CHECK(st.requested.value == 0);
  CHECK(st.reserved.value == 2 * MiB);  // cached
  CHECK(a.inactive_split_bytes().value == 0);

  // Reuse of the cached segment: no new cudaMalloc.
  const Block v = must(a, 4096);
  CHECK(v.addr == B);
  CHECK(a.stats().device_mallocs == 1);
  drop(a, v);

  empty(a);
  st = a.stats();
  CHECK(st.reserved.value == 0);
  CHECK(st.segments == 0);
  CHECK(st.free_ranges == 0);
  CHECK(st.device_frees == 1);
}

TEST_CASE("pytorch: large pool segment sizes and the 1 MiB split rule", "[pytorch]") {
  PT a(Bytes{1 * GiB});
  // < 10 MiB: a 20 MiB segment, split (remainder 17 MiB > 1 MiB).
  const Block x = must(a, 3 * MiB);
  CHECK(x.addr == B);
  CHECK(x.size.value == 3 * MiB);
  CHECK(a.stats().reserved.value == 20 * MiB);
  const Block y = must(a, 1 * MiB + 1);  // > 1 MiB: large pool, rounded to 512
  CHECK(y.addr == B + 3 * MiB);
  CHECK(y.size.value == 1 * MiB + 512);
  // Remainder of the cached block 16 MiB - 512 minus 15.5 MiB is <= 1 MiB: not split; the
  // whole block is handed out and counted in allocated but not in requested.
  const std::uint64_t left = 16 * MiB - 512;
  const Block z = must(a, 15 * MiB + 512 * KiB);
  CHECK(z.addr == B + 4 * MiB + 512);
  CHECK(z.size.value == left);
  auto st = a.stats();
  CHECK(st.allocated.value == 20 * MiB);
  CHECK(st.requested.value == 3 * MiB + 1 * MiB + 1 + 15 * MiB + 512 * KiB);
  CHECK(st.free_ranges == 0);
  CHECK(st.segments == 1);

  // >= 10 MiB: segment = request rounded up to 2 MiB, at the next bump address.
  const Block p = must(a, 10 * MiB + 1);
  CHECK(p.addr == B + 20 * MiB);
  CHECK(p.size.value == 10 * MiB + 512);
  CHECK(a.stats().reserved.value == 32 * MiB);
  CHECK(a.stats().free_ranges == 1);  // 2 MiB - 512 > 1 MiB: split
  CHECK(a.stats().largest_free.value == 2 * MiB - 512);
  const Block q = must(a, 11 * MiB);  // 12 MiB segment, remainder exactly 1 MiB: not split
  CHECK(q.addr == B + 32 * MiB);
  CHECK(q.size.value == 12 * MiB);
  st = a.stats();
  CHECK(st.reserved.value == 44 * MiB);
  CHECK(st.segments == 3);
  CHECK(st.allocated.value == 20 * MiB + 10 * MiB + 512 + 12 * MiB);

  drop(a, x);
  drop(a, y);
  drop(a, z);
  drop(a, p);
  drop(a, q);
  CHECK(a.stats().free_ranges == 3);
  CHECK(a.inactive_split_bytes().value == 0);
  empty(a);
  CHECK(a.stats().reserved.value == 0);
  CHECK(a.stats().device_frees == 3);
}

TEST_CASE("pytorch: best fit by size then address, on the same stream only", "[pytorch]") {
  SECTION("size, then lowest address") {
    PT a(Bytes{1 * GiB});
    const Block a1 = must(a, 256 * KiB);
    const Block a2 = must(a, 64 * KiB);
    const Block a3 = must(a, 128 * KiB);
    const Block a4 = must(a, 64 * KiB);
    CHECK(a4.addr == B + 448 * KiB);
    drop(a, a1);  // 256 KiB free at B
    drop(a, a3);  // 128 KiB free at B + 320 KiB
    const Block b1 = must(a, 100 * KiB);
    CHECK(b1.addr == B + 320 * KiB);  // smallest fitting block
    const Block b2 = must(a, 200 * KiB);
    CHECK(b2.addr == B);  // 28 KiB left at B + 420 KiB is too small
    (void)a2;

    PT t(Bytes{1 * GiB});
    std::vector<Block> p;
    for (int i = 0; i < 4; ++i) p.push_back(must(t, 64 * KiB));
    drop(t, p[2]);
    drop(t, p[0]);
    CHECK(must(t, 64 * KiB).addr == B);  // equal sizes: lowest address
  }

  SECTION("streams do not share cached blocks") {
    PT a(Bytes{1 * GiB});
    const Block x = must(a, 3 * MiB, 0);
    CHECK(x.addr == B);
    const Block y = must(a, 3 * MiB, 1);
    CHECK(y.addr == B + 20 * MiB);  // stream 1 cannot use stream 0's 17 MiB remainder
    drop(a, x);
    const Block z = must(a, 5 * MiB, 1);
    CHECK(z.addr == B + 23 * MiB);
    const Block w = must(a, 18 * MiB, 1);  // stream 0's cached 20 MiB block is not eligible
    CHECK(w.addr == B + 40 * MiB);
    CHECK(w.size.value == 18 * MiB);
    const Block v = must(a, 18 * MiB, 0);
    CHECK(v.addr == B);
    CHECK(v.size.value == 18 * MiB);  // 2 MiB remainder split off
    auto st = a.stats();
    CHECK(st.segments == 3);
    CHECK(st.reserved.value == 58 * MiB);
    CHECK(st.largest_free.value == 12 * MiB);  // stream 1: B + 28 MiB
    CHECK(st.free_ranges == 2);
  }
}

TEST_CASE("pytorch: blocks merge only within their segment", "[pytorch]") {
  PT a(Bytes{1 * GiB});
  const Block x1 = must(a, 1 * MiB);
  const Block x2 = must(a, 1 * MiB);  // fills segment 1 exactly
  const Block x3 = must(a, 1 * MiB);  // segment 2, adjacent in address space
  CHECK(x2.addr == B + 1 * MiB);
  CHECK(x2.size.value == 1 * MiB);
  CHECK(x3.addr == B + 2 * MiB);
  drop(a, x2);
  drop(a, x3);
  const auto r = a.ranges();
  REQUIRE(r.size() == 3);
  CHECK(r[0].addr == B);
  CHECK(!r[0].free);
  CHECK(r[1].addr == B + 1 * MiB);
  CHECK(r[1].free);
  CHECK(r[1].size.value == 1 * MiB);
  CHECK(r[2].addr == B + 2 * MiB);
  CHECK(r[2].free);
  CHECK(r[2].size.value == 2 * MiB);
  CHECK(r[0].segment == r[1].segment);
  CHECK(r[1].segment != r[2].segment);
  CHECK(a.stats().free_ranges == 2);
  CHECK(a.stats().largest_free.value == 2 * MiB);  // not 3 MiB
  const Block y = must(a, 768 * KiB);
  CHECK(y.addr == B + 1 * MiB);  // best fit: the 1 MiB block
  drop(a, y);
  empty(a);  // only the unsplit segment 2 is released
  CHECK(a.stats().reserved.value == 2 * MiB);
  CHECK(a.stats().segments == 1);
  CHECK(a.inactive_split_bytes().value == 1 * MiB);
  drop(a, x1);
  empty(a);
  CHECK(a.stats().reserved.value == 0);
}

TEST_CASE("pytorch: max_split_size rejections and no splitting of oversize blocks", "[pytorch]") {
  PT a(Bytes{1 * GiB}, with_mss(32 * MiB));
  const Block big = must(a, 64 * MiB);
  CHECK(big.addr == B);
  drop(a, big);
  // A small request never takes an oversize (>= 32 MiB) cached block.
  const Block s = must(a, 8 * MiB);
  CHECK(s.addr == B + 64 * MiB);
  CHECK(s.size.value == 8 * MiB);  // below max_split_size: split as usual
  // A large request may round up, but not by 20 MiB or more: 64 >= 40 + 20.
  const Block l = must(a, 40 * MiB);
  CHECK(l.addr == B + 84 * MiB);
  // 64 < 50 + 20: taken whole, never split (request >= max_split_size).
  const Block m = must(a, 50 * MiB);
  CHECK(m.addr == B);
  CHECK(m.size.value == 64 * MiB);
  auto st = a.stats();
  CHECK(st.reserved.value == 124 * MiB);
  CHECK(st.allocated.value == 8 * MiB + 40 * MiB + 64 * MiB);
  CHECK(st.requested.value == 8 * MiB + 40 * MiB + 50 * MiB);
  CHECK(st.free_ranges == 1);  // the 12 MiB remainder of the 20 MiB segment

  SECTION("max_non_split_rounding_size is configurable") {
    PyTorchOptions o = with_mss(32 * MiB);
    o.max_non_split_rounding_size = Bytes{10 * MiB};
    PT b(Bytes{1 * GiB}, o);
    drop(b, must(b, 64 * MiB));
    CHECK(must(b, 50 * MiB).addr == B + 64 * MiB);  // 64 >= 50 + 10: rejected
  }
}

TEST_CASE("pytorch: release_available_cached_blocks frees oversize blocks before OOM", "[pytorch]") {
  SECTION("one block large enough") {
    PT a(Bytes{100 * MiB}, with_mss(32 * MiB));
    const Block x = must(a, 40 * MiB);
    const Block y = must(a, 40 * MiB);
    drop(a, x);
    drop(a, y);
    // 30 MiB: oversize blocks rejected; 80 + 30 > 100; free the smallest oversize block >=
    // max(30, 32) MiB (the one at B), then the segment fits.
    const Block z = must(a, 30 * MiB);
    CHECK(z.addr == B + 80 * MiB);
    auto st = a.stats();
    CHECK(st.reserved.value == 70 * MiB);
    CHECK(st.segments == 2);
    CHECK(st.device_frees == 1);
    CHECK(st.alloc_retries == 0);
    const auto r = a.ranges();
    REQUIRE(r.size() == 2);
    CHECK(r[0].addr == B + 40 * MiB);  // y's segment is still cached
    CHECK(r[0].free);
  }
  SECTION("several blocks, largest first") {
    PT a(Bytes{100 * MiB}, with_mss(32 * MiB));
    const Block x = must(a, 34 * MiB);
    const Block y = must(a, 36 * MiB);
    drop(a, x);
    drop(a, y);
    const Block z = must(a, 60 * MiB);
    CHECK(z.addr == B + 70 * MiB);
    auto st = a.stats();
    CHECK(st.reserved.value == 60 * MiB);
    CHECK(st.device_frees == 2);
    CHECK(st.segments == 1);
    CHECK(st.alloc_retries == 0);
  }
}

TEST_CASE("pytorch: OOM path releases cached segments and retries", "[pytorch]") {
  SECTION("release then success") {
    PT a(Bytes{64 * MiB});
    const Block x = must(a, 30 * MiB);
    const Block y = must(a, 30 * MiB);
    CHECK(y.addr == B + 30 * MiB);
    drop(a, x);
    const Block z = must(a, 32 * MiB);  // 60 + 32 > 64: empty the cache, retry
    CHECK(z.addr == B + 60 * MiB);
    auto st = a.stats();
    CHECK(st.reserved.value == 62 * MiB);
    CHECK(st.alloc_retries == 1);
    CHECK(st.device_mallocs == 3);
    CHECK(st.device_frees == 1);
    CHECK(a.ooms() == 0);

    // Impossible: nothing cached is left to free.
    CHECK_FALSE(try_alloc(a, 40 * MiB).has_value());
    st = a.stats();
    CHECK(st.reserved.value == 62 * MiB);
    CHECK(st.allocated.value == 62 * MiB);
    CHECK(st.alloc_retries == 2);  // upstream counts the retry attempt itself
    CHECK(a.ooms() == 1);
    // Larger than the whole device.
    CHECK_FALSE(try_alloc(a, 65 * MiB).has_value());
    CHECK(a.ooms() == 2);
    drop(a, y);
    drop(a, z);
  }
  SECTION("split segments are kept") {
    PT a(Bytes{64 * MiB});
    const Block x = must(a, 2 * MiB);  // 20 MiB segment, 18 MiB cached remainder
    const Block y = must(a, 40 * MiB);
    CHECK(y.addr == B + 20 * MiB);
    drop(a, y);
    const Block z = must(a, 42 * MiB);
    CHECK(z.addr == B + 60 * MiB);
    auto st = a.stats();
    CHECK(st.reserved.value == 62 * MiB);
    CHECK(st.segments == 2);
    CHECK(a.inactive_split_bytes().value == 18 * MiB);
    CHECK(st.alloc_retries == 1);
    (void)x;
  }
}

TEST_CASE("pytorch: garbage collection frees the oldest cached large blocks", "[pytorch]") {
  PyTorchOptions o;
  o.garbage_collection_threshold = 0.5;  // 50 MiB of 100
  PT a(Bytes{100 * MiB}, o);
  const Block x = must(a, 30 * MiB);  // get_free_block call 1 on the large pool
  drop(a, x);                         // cached at age base 1
  const Block y = must(a, 31 * MiB);  // call 2; 32 MiB segment, 1 MiB remainder not split
  CHECK(y.addr == B + 30 * MiB);
  CHECK(y.size.value == 32 * MiB);
  drop(a, y);  // cached at age base 2
  // Call 3: no fit; reserved 62 > 50, target 12. Ages 2 and 1, average 1.5: only x's segment
  // goes, which is enough. No release-and-retry is needed.
  const Block z = must(a, 40 * MiB);
  CHECK(z.addr == B + 62 * MiB);
  auto st = a.stats();
  CHECK(st.reserved.value == 72 * MiB);
  CHECK(st.segments == 2);
  CHECK(st.device_frees == 1);
  CHECK(st.alloc_retries == 0);
  const auto r = a.ranges();
  REQUIRE(r.size() == 2);
  CHECK(r[0].addr == B + 30 * MiB);
  CHECK(r[0].free);

  SECTION("without GC the same sequence needs the release-and-retry path") {
    PT b(Bytes{100 * MiB});
    drop(b, must(b, 30 * MiB));
    drop(b, must(b, 31 * MiB));
    CHECK(must(b, 40 * MiB).addr == B + 62 * MiB);
    CHECK(b.stats().alloc_retries == 1);
    CHECK(b.stats().reserved.value == 40 * MiB);
  }
}

TEST_CASE("pytorch: expandable segments", "[pytorch]") {
  // Capacity 64 MiB: virtual ranges of 1 1/8 x 64 = 72 MiB rounded to pages: 72 MiB (small,
  // 2 MiB pages) and 80 MiB (large, 20 MiB pages), handed out downwards below kBaseAddress.
  const std::uint64_t L = B - 80 * MiB;

  SECTION("growth, page mapping, unmapping and release") {
    PT a(Bytes{64 * MiB}, expandable());
    const Block x = must(a, 3 * MiB);
    CHECK(x.addr == L);
    CHECK(x.size.value == 3 * MiB);
    auto st = a.stats();
    CHECK(st.reserved.value == 20 * MiB);  // one 20 MiB page
    CHECK(st.device_mallocs == 1);
    CHECK(st.segments == 1);
    CHECK(st.free_ranges == 1);
    CHECK(a.inactive_split_bytes().value == 0);  // not tracked for expandable segments

    // 30 MiB: the 17 MiB free tail plus one more page, merged into one block.
    const Block y = must(a, 30 * MiB);
    CHECK(y.addr == L + 3 * MiB);
    st = a.stats();
    CHECK(st.reserved.value == 40 * MiB);
    CHECK(st.device_mallocs == 2);
    CHECK(st.largest_free.value == 7 * MiB);

    const Block s = must(a, 1000);  // the small pool's own virtual segment
    const std::uint64_t S = L - 72 * MiB;
    CHECK(s.addr == S);
    CHECK(a.stats().reserved.value == 42 * MiB);
    CHECK(a.stats().segments == 2);

    drop(a, x);
    empty(a);  // no whole free page anywhere
    CHECK(a.stats().reserved.value == 42 * MiB);
    drop(a, y);  // [L, L + 40 MiB) free and mapped
    CHECK(a.stats().largest_free.value == 40 * MiB);
    empty(a);  // both pages unmapped; the large virtual segment is dropped
    st = a.stats();
    CHECK(st.reserved.value == 2 * MiB);
    CHECK(st.segments == 1);
    CHECK(st.device_frees == 1);
    drop(a, s);
    empty(a);
    st = a.stats();
    CHECK(st.reserved.value == 0);
    CHECK(st.segments == 0);
    CHECK(st.device_frees == 2);
  }

  SECTION("lowest-address placement fills unmapped holes") {
    PT a(Bytes{64 * MiB}, expandable());
    const Block x1 = must(a, 20 * MiB);
    const Block x2 = must(a, 20 * MiB);
    const Block x3 = must(a, 20 * MiB);
    CHECK(x1.addr == L);
    CHECK(x2.addr == L + 20 * MiB);
    CHECK(x3.addr == L + 40 * MiB);
    CHECK(a.stats().reserved.value == 60 * MiB);
    drop(a, x2);
    empty(a);  // unmaps the hole
    CHECK(a.stats().reserved.value == 40 * MiB);
    CHECK(a.ranges().size() == 2);
    const Block x4 = must(a, 20 * MiB);
    CHECK(x4.addr == L + 20 * MiB);
    // Full: 60 + 20 > 64 and nothing can be unmapped.
    CHECK_FALSE(try_alloc(a, 20 * MiB).has_value());
    CHECK(a.stats().alloc_retries == 1);
    CHECK(a.stats().reserved.value == 60 * MiB);
  }

  SECTION("split threshold is 512 B in the large pool too") {
    PT a(Bytes{64 * MiB}, expandable());
    const Block x = must(a, 19 * MiB + 512 * KiB);
    CHECK(x.size.value == 19 * MiB + 512 * KiB);  // 512 KiB remainder split off
    CHECK(a.stats().free_ranges == 1);
    PT b(Bytes{64 * MiB});
    CHECK(must(b, 19 * MiB + 512 * KiB).size.value == 20 * MiB);  // not without expandable
  }

  SECTION("best fit weighs the unmapped space behind a block") {
    PT a(Bytes{64 * MiB}, expandable());
    const Block y1 = must(a, 6 * MiB);
    const Block y2 = must(a, 10 * MiB);
    CHECK(y2.addr == L + 6 * MiB);
    drop(a, y1);  // free: [L, 6 MiB) and [L + 16 MiB, 4 MiB) followed by unmapped space
    const Block y3 = must(a, 3 * MiB);
    CHECK(y3.addr == L);  // not the smaller block that could still expand
  }
}

TEST_CASE("pytorch: deallocate of an unknown block throws", "[pytorch]") {
  PT a(Bytes{1 * GiB});
  const Block x = must(a, 4096);
  CHECK_THROWS_AS(a.deallocate(Block{x.addr + 512, Bytes{512}, Bytes{512}, 0}), InvariantError);
  CHECK_THROWS_AS(a.deallocate(Block{x.addr, Bytes{1024}, Bytes{4096}, 0}), InvariantError);
  CHECK_THROWS_AS(a.deallocate(Block{x.addr, x.size, x.requested, 1}), InvariantError);
  a.check_invariants();
  drop(a, x);
  CHECK_THROWS_AS(a.deallocate(x), InvariantError);
  a.check_invariants();
}

TEST_CASE("pytorch: seeded segments", "[pytorch]") {
  PT a(Bytes{1 * GiB});
  const std::uint64_t X = 0x100000000ULL;
  const std::vector<PyTorchSeedBlock> blocks = {
      {Bytes{512}, Bytes{100}, true},
      {Bytes{1024}, Bytes{0}, false},
      {Bytes{512}, Bytes{0}, false},  // merged with the free block before it
      {Bytes{2 * MiB - 2048}, Bytes{2 * MiB - 2100}, true},
  };
  const auto live = a.seed_segment(X, 7, PyTorchPool::Small, blocks);
  a.check_invariants();
  REQUIRE(live.size() == 2);
  CHECK(live[0] == Block{X, Bytes{512}, Bytes{100}, 7});
  CHECK(live[1] == Block{X + 2048, Bytes{2 * MiB - 2048}, Bytes{2 * MiB - 2100}, 7});
  auto st = a.stats();
  CHECK(st.reserved.value == 2 * MiB);
  CHECK(st.segments == 1);
  CHECK(st.device_mallocs == 0);
  CHECK(st.allocated.value == 2 * MiB - 1536);
  CHECK(st.free_ranges == 1);
  CHECK(a.inactive_split_bytes().value == 1536);

  const Block y = must(a, 1000, 7);
  CHECK(y.addr == X + 512);
  CHECK(must(a, 1000, 0).addr == B);  // other stream: a new segment
  CHECK_THROWS_AS(a.seed_segment(X + 1 * MiB, 7, PyTorchPool::Small, blocks), ConfigError);
  CHECK_THROWS_AS(a.seed_segment(X - 1024, 7, PyTorchPool::Small, blocks), ConfigError);
  const std::vector<PyTorchSeedBlock> too_big = {{Bytes{2 * GiB}, Bytes{0}, false}};
  CHECK_THROWS_AS(a.seed_segment(0x200000000ULL, 0, PyTorchPool::Large, too_big), ConfigError);

  drop(a, live[0]);
  drop(a, live[1]);
  drop(a, y);
  empty(a);  // the seeded segment goes without touching DeviceMemory
  st = a.stats();
  CHECK(st.segments == 1);
  CHECK(st.reserved.value == 2 * MiB);
  CHECK(st.device_frees == 1);
}

TEST_CASE("pytorch: seeded expandable ranges and recorded reservations", "[pytorch]") {
  // Recorded reservations: large pool at X (stream 0), small pool at Y (stream 0). Seeds: two
  // mapped ranges of X's reservation, [X, X + 20 MiB) = [8 MiB live][12 MiB free] and
  // [X + 40 MiB, X + 60 MiB) = [20 MiB live]; between them one unmapped 20 MiB page.
  const std::uint64_t X = 0x7e0000000000ULL, Y = 0x7c0000000000ULL;
  PT a(Bytes{1 * GiB}, expandable());
  const std::vector<SegmentAddress> plan{{X, Bytes{60 * MiB}, 0, SegmentPool::Large, true},
                                         {Y, Bytes{2 * MiB}, 0, SegmentPool::Small, true}};
  a.assign_segment_addresses(plan);
  std::vector<SeedSegment> seeds(2);
  seeds[0] = {X + 40 * MiB, 0, SegmentPool::Large, true, {{Bytes{20 * MiB}, Bytes{20 * MiB}, true}}};
  seeds[1] = {X,
              0,
              SegmentPool::Large,
              true,
              {{Bytes{8 * MiB}, Bytes{8 * MiB - 10}, true}, {Bytes{12 * MiB}, Bytes{0}, false}}};
  const auto live = a.seed(seeds);
  a.check_invariants();
  REQUIRE(live.size() == 2);  // in seed order
  CHECK(live[0] == Block{X + 40 * MiB, Bytes{20 * MiB}, Bytes{20 * MiB}, 0});
  CHECK(live[1] == Block{X, Bytes{8 * MiB}, Bytes{8 * MiB - 10}, 0});
  CHECK(a.stats().reserved.value == 40 * MiB);  // mapped pages only

  // 16 MiB: no cached block is large enough; find_expandable_block takes the lowest unmapped
  // range [X + 20 MiB, X + 40 MiB) with the free 12 MiB block before it: maps 4 MiB more, rounded
  // to one 20 MiB page, merged: [X + 8 MiB, X + 40 MiB) free, the allocation at its low end.
  const Block b = must(a, 16 * MiB);
  CHECK(b.addr == X + 8 * MiB);
  CHECK(a.stats().reserved.value == 60 * MiB);
  // 1000 bytes: the small pool's first reservation is the recorded one at Y.
  CHECK(must(a, 1000).addr == Y);

  // Refusals: a range off the page grid of its reservation; expandable ranges without the option.
  PT c(Bytes{1 * GiB}, expandable());
  c.assign_segment_addresses(plan);
  const std::vector<SeedSegment> off{{X + 2 * MiB, 0, SegmentPool::Large, true, {{Bytes{20 * MiB}, Bytes{0}, false}}}};
  CHECK_THROWS_WITH(c.seed(off), Catch::Contains("is not whole 20971520-byte pages of the reservation"));
  PT plain(Bytes{1 * GiB});
  CHECK_THROWS_WITH(plain.seed(seeds), Catch::Contains("replay with pytorch.expandable_segments=true"));
}

TEST_CASE("pytorch: parameters", "[pytorch]") {
  const auto docs = PT::param_docs();
  std::vector<std::string> keys;
  for (const auto& d : docs) keys.push_back(d.key);
  CHECK(keys == std::vector<std::string>{"max_split_size", "max_non_split_rounding_size", "roundup_power2_divisions",
                                         "garbage_collection_threshold", "expandable_segments"});
  {
    const Params p("pytorch", docs);
    auto a = PT::create(p, Bytes{1 * GiB});
    auto* pt = dynamic_cast<PT*>(a.get());
    REQUIRE(pt != nullptr);
    CHECK(pt->options().max_split_size.value == PyTorchOptions::kOff);
    CHECK(pt->options().max_non_split_rounding_size.value == 20 * MiB);
    CHECK(pt->options().roundup_power2_divisions[3] == 0);
    CHECK(pt->options().garbage_collection_threshold == 0.0);
    CHECK_FALSE(pt->options().expandable_segments);
  }
  {
    const Params p("pytorch",
                   nlohmann::json{{"max_split_size", "64MiB"},
                                  {"roundup_power2_divisions", 4},
                                  {"garbage_collection_threshold", 0.8},
                                  {"expandable_segments", true}},
                   docs);
    auto a = PT::create(p, Bytes{1 * GiB});
    const auto& o = dynamic_cast<PT&>(*a).options();
    CHECK(o.max_split_size.value == 64 * MiB);
    CHECK(o.roundup_power2_divisions[0] == 4);
    CHECK(o.roundup_power2_divisions[15] == 4);
    CHECK(o.garbage_collection_threshold == 0.8);
    CHECK(o.expandable_segments);
  }
  auto make = [&](nlohmann::json j) { return PT::create(Params("pytorch", j, docs), Bytes{1 * GiB}); };
  CHECK_THROWS_AS(make({{"max_split_size", "10MiB"}}), ConfigError);
  CHECK_THROWS_AS(make({{"roundup_power2_divisions", 3}}), ConfigError);
  CHECK_THROWS_AS(make({{"roundup_power2_divisions", -2}}), ConfigError);
  CHECK_THROWS_AS(make({{"garbage_collection_threshold", 1.0}}), ConfigError);
  CHECK_THROWS_AS(make({{"garbage_collection_threshold", -0.1}}), ConfigError);
  CHECK_NOTHROW(make({{"max_split_size", "20MiB"}}));
}

namespace {

void stress(const PyTorchOptions& opts, std::uint64_t capacity, std::uint32_t seed, int ops) {
  PT a(Bytes{capacity}, opts);
  std::mt19937_64 rng(seed);
  std::vector<Block> live;
  std::map<std::uint64_t, std::uint64_t> spans;  // live addr -> end
  std::uint64_t ooms = 0;
  auto size_of = [&]() -> std::uint64_t {
    switch (rng() % 4) {
      case 0: return 1 + rng() % 4096;
      case 1: return 1 + rng() % (1 * MiB);
      case 2: return 1 * MiB + 1 + rng() % (9 * MiB);
      default: return 10 * MiB + rng() % (40 * MiB);
    }
  };
  for (int i = 0; i < ops; ++i) {
    const auto r = rng() % 100;
    if (r < 1) {
      a.release_cached();
    } else if (r < 55 || live.empty()) {
      const std::uint64_t size = size_of();
      const auto stream = static_cast<std::uint32_t>(rng() % 2);
      auto b = a.allocate(AllocRequest{Bytes{size}, stream, {}});
      if (!b) {
        ++ooms;
      } else {
        REQUIRE(b->size.value >= size);
        REQUIRE(b->requested.value == size);
        REQUIRE(b->stream == stream);
        auto next = spans.lower_bound(b->addr);
        if (next != spans.end()) REQUIRE(b->addr + b->size.value <= next->first);
        if (next != spans.begin()) REQUIRE(std::prev(next)->second <= b->addr);
        spans.emplace(b->addr, b->addr + b->size.value);
        live.push_back(*b);
      }
    } else {
      const std::size_t k = rng() % live.size();
      a.deallocate(live[k]);
      spans.erase(live[k].addr);
      live[k] = live.back();
      live.pop_back();
    }
    a.check_invariants();
    const auto st = a.stats();
    REQUIRE(st.reserved <= st.capacity);
    REQUIRE(st.allocated >= st.requested);
  }
  // The slow paths were exercised: cache flushes before OOM, real OOMs, segments given back.
  const auto st = a.stats();
  CHECK(st.alloc_retries > 0);
  CHECK(ooms > 0);
  CHECK(st.device_frees > 0);
  CHECK(st.device_mallocs > st.segments);
  for (const Block& b : live) a.deallocate(b);
  a.release_cached();
  a.check_invariants();
  CHECK(a.stats().allocated.value == 0);
  CHECK(a.stats().reserved.value == 0);
  CHECK(a.stats().segments == 0);
  CHECK(ooms == a.ooms());
}

}  // namespace

TEST_CASE("pytorch: randomized alloc/free stress keeps every invariant", "[pytorch]") {
  SECTION("defaults") { stress(PyTorchOptions{}, 512 * MiB, 1, 25000); }
  SECTION("max_split_size and power-of-two rounding") {
    PyTorchOptions o = with_mss(24 * MiB);
    o.set_roundup_power2_divisions(4);
    stress(o, 512 * MiB, 2, 25000);
  }
  SECTION("garbage collection") {
    PyTorchOptions o;
    o.garbage_collection_threshold = 0.6;
    stress(o, 512 * MiB, 3, 25000);
  }
  SECTION("expandable segments") { stress(expandable(), 512 * MiB, 4, 25000); }
  SECTION("expandable segments with max_split_size") {
    PyTorchOptions o = expandable();
    o.max_split_size = Bytes{32 * MiB};
    stress(o, 256 * MiB, 5, 25000);
  }
}

}  // namespace pytorch_test
