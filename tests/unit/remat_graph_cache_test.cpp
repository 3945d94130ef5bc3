// The remat graph's indexes under random operations: every cached eq-class cost equals a fresh
// computation (verify_eq_cache throws otherwise), and candidates() holds exactly the resident,
// evictable-but-for-pins values in address order, after every step.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "coopsim/model/remat_graph.hpp"

using namespace coopsim;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace remat_graph_cache_test {

namespace {

void check_candidates(const RematGraph& g) {
  std::vector<std::pair<std::uint64_t, ValueId>> want;
  for (std::uint32_t i = 0; i < g.value_count(); ++i) {
    const RematValue& x = g.value(ValueId{i});
    if (x.state == ValueState::Resident && !x.unevictable && x.producer != kNoExecution)
      want.emplace_back(x.block.addr, ValueId{i});
  }
  std::sort(want.begin(), want.end());
  std::vector<std::pair<std::uint64_t, ValueId>> got;
  g.candidates().for_each([&](std::uint64_t a, ValueId v) { got.emplace_back(a, v); });
  REQUIRE(got == want);
}

}  // namespace

TEST_CASE("remat graph: cached eq-class costs and candidates stay exact", "[remat][graph][cache]") {
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed);
    RematGraph g;
    g.verify_eq_cache(true);
    std::uint64_t next_addr = 0;
    std::vector<ValueId> values;
    auto place = [&](ValueId v) { g.place(v, Block{next_addr += 64, g.value(v).size, g.value(v).size, 0}); };
    // A few constants to start from.
    for (int i = 0; i < 4; ++i) {
      const ValueId v = g.add_value(TensorId{static_cast<std::uint32_t>(values.size())}, Bytes{64}, true);
      place(v);
      values.push_back(v);
    }
    std::uint64_t costs_read = 0;
    for (int step = 0; step < 600; ++step) {
      // Mostly recent values, so that evictions chain into classes and recomputations cut them.
      const auto pick = [&] {
        const std::size_t n = values.size();
        return rng() % 4 == 0 ? values[rng() % n] : values[n - 1 - rng() % std::min<std::size_t>(n, 12)];
      };
      switch (rng() % 7) {
        case 0:
        case 1: {  // an op: reads 1-3 resident values, writes 1-2 fresh ones
          std::vector<ValueId> in, out;
          for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k) {
            const ValueId u = pick();
            if (g.value(u).state == ValueState::Resident) in.push_back(u);
          }
          for (int k = 0, n = 1 + static_cast<int>(rng() % 2); k < n; ++k) {
            const ValueId v = g.add_value(TensorId{static_cast<std::uint32_t>(values.size())}, Bytes{64}, false);
            place(v);
            out.push_back(v);
            values.push_back(v);
          }
          const auto e = g.add_execution(OpId{0}, SimTime{static_cast<std::int64_t>(1 + rng() % 1000)}, in, out);
          g.advance(SimTime{static_cast<std::int64_t>(1 + rng() % 100)});
          for (ValueId v : out) {
            g.set_producer(v, e);
            g.computed(v);
          }
          break;
        }
        case 2:
        case 3: {  // evict a resident value with a producer
          const ValueId v = pick();
          if (g.evictable(v)) g.evict(v);
          break;
        }
        case 4:
        case 5: {  // recompute an evicted value in place
          const ValueId v = pick();
          if (g.value(v).state == ValueState::Evicted) {
            place(v);
            g.computed(v);
            g.touch(v);
          }
          break;
        }
        default: {  // drop, or lock
          const ValueId v = pick();
          if (rng() % 2 == 0 && g.value(v).state == ValueState::Evicted) {
            g.drop(v);
          } else if (g.value(v).state == ValueState::Resident) {
            g.set_unevictable(v);
          }
          break;
        }
      }
      // Read every resident value's cost twice: the second read comes from the cache and is
      // checked against a fresh computation.
      for (ValueId v : values) {
        if (g.value(v).state != ValueState::Resident) continue;
        const double first = g.eq_class_cost(v);
        REQUIRE(g.eq_class_cost(v) == first);
        ++costs_read;
      }
      check_candidates(g);
    }
    CHECK(costs_read > 1000);
  }
}

}  // namespace remat_graph_cache_test
