// The contract every registered allocator must honour, checked by a seeded random stress of
// 100k operations with invariants after every step.
#include <catch2/catch.hpp>

#include <map>
#include <random>

#include "coopsim/sim/builtin.hpp"
#include "coopsim/base/error.hpp"

using namespace coopsim;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace allocator_contract_test {

namespace {

std::vector<std::string> allocator_names() {
  std::vector<std::string> names;
  for (const auto& e : builtin_components().allocators.entries()) names.push_back(e.name);
  return names;
}

std::unique_ptr<Allocator> make(const std::string& name, Bytes capacity) {
  const auto& e = builtin_components().allocators.get(name, "allocator", "allocator");
  return e.make(Params(name, e.params), capacity);
}

// Size mix spanning PyTorch's small pool, the 1-10 MiB band and large requests.
std::uint64_t random_size(std::mt19937_64& rng) {
  const int bucket = static_cast<int>(rng() % 10);
  if (bucket < 5) return 1 + rng() % (1 << 20);
  if (bucket < 8) return (1 << 20) + rng() % (9 << 20);
  return (10 << 20) + rng() % (54 << 20);
}

struct Live {
  Block block;
};

// Returns the sequence of placements, for the determinism check.
std::vector<Block> stress(const std::string& name, std::uint64_t seed, int ops) {
  const Bytes capacity{1ULL << 30};
  auto alloc = make(name, capacity);
  std::mt19937_64 rng(seed);
  std::vector<Block> live;
  std::map<std::uint64_t, std::uint64_t> by_addr;  // start -> end of live blocks
  std::vector<Block> placements;
  std::uint64_t sum_size = 0, sum_requested = 0;
  for (int i = 0; i < ops; ++i) {
    const bool do_alloc = live.empty() || rng() % 100 < 55;
    if (do_alloc) {
      const AllocRequest req{Bytes{random_size(rng)}, static_cast<std::uint32_t>(rng() % 2), TensorId{0}};
      auto b = alloc->allocate(req);
      if (b) {
        REQUIRE(b->size >= req.size);
        REQUIRE(b->requested == req.size);
        const std::uint64_t start = b->addr, end = b->addr + b->size.value;
        auto next = by_addr.lower_bound(start);
        if (next != by_addr.end()) REQUIRE(next->first >= end);
        if (next != by_addr.begin()) REQUIRE(std::prev(next)->second <= start);
        by_addr.emplace(start, end);
        live.push_back(*b);
        placements.push_back(*b);
        sum_size += b->size.value;
        sum_requested += b->requested.value;
      } else {
        // Only a model out of room may refuse: the live blocks must take a real share.
        REQUIRE(alloc->stats().reserved.value + req.size.value > capacity.value / 4);
      }
    } else {
      const std::size_t k = rng() % live.size();
      const Block b = live[k];
      live[k] = live.back();
      live.pop_back();
      alloc->deallocate(b);
      by_addr.erase(b.addr);
      sum_size -= b.size.value;
      sum_requested -= b.requested.value;
    }
    alloc->check_invariants();
    const AllocatorStats s = alloc->stats();
    REQUIRE(s.allocated.value == sum_size);
    REQUIRE(s.requested.value == sum_requested);
    REQUIRE(s.reserved <= capacity);
    REQUIRE(s.allocated <= s.reserved);
  }
  for (const Block& b : live) alloc->deallocate(b);
  alloc->check_invariants();
  CHECK(alloc->stats().allocated.value == 0);
  CHECK(alloc->stats().requested.value == 0);
  alloc->release_cached();
  alloc->check_invariants();
  return placements;
}

}  // namespace

TEST_CASE("every allocator survives 100k random operations with its invariants", "[contract]") {
  const std::string name = GENERATE(from_range(allocator_names()));
  INFO("allocator " << name);
  const auto placements = stress(name, 42, 100'000);
  CHECK(placements.size() > 10'000);
}

TEST_CASE("every allocator is deterministic for a given sequence", "[contract]") {
  const std::string name = GENERATE(from_range(allocator_names()));
  INFO("allocator " << name);
  CHECK(stress(name, 7, 5'000) == stress(name, 7, 5'000));
}

TEST_CASE("every allocator rejects freeing an unknown block", "[contract]") {
  const std::string name = GENERATE(from_range(allocator_names()));
  INFO("allocator " << name);
  auto alloc = make(name, Bytes{1ULL << 30});
  auto b = alloc->allocate({Bytes{4096}, 0, TensorId{0}});
  REQUIRE(b);
  Block bogus = *b;
  bogus.addr += 1ULL << 40;
  CHECK_THROWS_AS(alloc->deallocate(bogus), InvariantError);
  alloc->deallocate(*b);
  alloc->check_invariants();
}

TEST_CASE("every allocator refuses what exceeds its capacity and reports ranges in order", "[contract]") {
  const std::string name = GENERATE(from_range(allocator_names()));
  INFO("allocator " << name);
  auto alloc = make(name, Bytes{64ULL << 20});
  CHECK_FALSE(alloc->allocate({Bytes{65ULL << 20}, 0, TensorId{0}}));
  auto a = alloc->allocate({Bytes{1000}, 0, TensorId{0}});
  auto b = alloc->allocate({Bytes{3ULL << 20}, 0, TensorId{1}});
  REQUIRE(a);
  REQUIRE(b);
  const auto ranges = alloc->ranges();
  for (std::size_t i = 1; i < ranges.size(); ++i) CHECK(ranges[i - 1].addr < ranges[i].addr);
  alloc->check_invariants();
}

}  // namespace allocator_contract_test
