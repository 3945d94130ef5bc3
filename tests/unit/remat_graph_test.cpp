// RematGraph costs on a hand-built graph: eq-class union-find (Coop/DTR prototype, with
// upstream's approximate update after recompute), the full evicted neighbourhood e* and the
// evicted-ancestor cost (MSPS); and the heuristic family end to end.
#include <catch2/catch.hpp>

#include "alloc/fungible.hpp"
#include "coopsim/engine/engine.hpp"
#include "coopsim/policy/dtr.hpp"
#include "coopsim/model/remat_graph.hpp"
#include "coopsim/policy/remat/victim.hpp"
#include "trace_builder.hpp"

using namespace coopsim;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace remat_graph_test {

namespace {
Block block_at(std::uint64_t addr) { return Block{addr, Bytes{100}, Bytes{100}, 0}; }
}  // namespace

TEST_CASE("remat graph: eq-class, neighbourhood and ancestor costs", "[remat][graph]") {
  // x0 (constant) -e1(10)-> a -e2(20)-> b -e3(30)-> {c, d};  c -e4(40)-> f.
  RematGraph g;
  const auto x0 = g.add_value(TensorId{0}, Bytes{100}, true);
  const auto a = g.add_value(TensorId{1}, Bytes{100}, false), b = g.add_value(TensorId{2}, Bytes{100}, false);
  const auto c = g.add_value(TensorId{3}, Bytes{100}, false), d = g.add_value(TensorId{4}, Bytes{100}, false);
  const auto f = g.add_value(TensorId{5}, Bytes{100}, false);
  std::uint64_t addr = 0;
  for (auto v : {x0, a, b, c, d, f}) g.place(v, block_at(addr += 100));
  g.set_producer(a, g.add_execution(OpId{0}, SimTime{10}, {x0}, {a}));
  g.set_producer(b, g.add_execution(OpId{1}, SimTime{20}, {a}, {b}));
  const auto e3 = g.add_execution(OpId{2}, SimTime{30}, {b}, {c, d});
  g.set_producer(c, e3);
  g.set_producer(d, e3);
  g.set_producer(f, g.add_execution(OpId{3}, SimTime{40}, {c}, {f}));

  CHECK(g.eq_class_cost(d) == 30.0);  // nothing evicted yet
  g.evict(a);
  g.evict(b);  // joins a (evicted input of e2): class {a, b} = 30
  g.evict(c);  // joins b (evicted input of e3): class {a, b, c} = 60
  CHECK_FALSE(g.evictable(c));
  CHECK(g.evictable(d));
  // d: c(d) + max(class 60, c(b) 20) for b + max(60, c(c) 30) for its evicted sibling c.
  CHECK(g.eq_class_cost(d) == 150.0);
  // e*(d): evicted ancestors b, a (20 + 10); no descendants. e*(f): ancestors c, b, a.
  CHECK(g.neighbourhood_cost(d) == 60.0);
  CHECK(g.neighbourhood_cost(f) == 100.0);
  CHECK(g.ancestor_cost(f) == 100.0);
  // e*(x0) looks downwards: a, then b, then c (through evicted values only) = 60 + c(x0) 0.
  CHECK(g.neighbourhood_cost(x0) == 60.0);

  // Rematerializing b: its class (root c) loses 20; b becomes a singleton again.
  g.place(b, block_at(1000));
  g.computed(b);
  CHECK(g.eq_class_cost(d) == 70.0);       // b resident; c: max(40, 30)
  CHECK(g.needed_by_evicted(x0) == true);  // a is evicted and not released
  g.set_released(a);
  g.set_released(c);
  CHECK(g.needed_by_evicted(b) == false);  // c is evicted but released
}

TEST_CASE("every DTR heuristic runs the chain to completion, deterministically", "[remat]") {
  coopsim::test::TraceBuilder b;
  std::vector<std::uint32_t> x{b.tensor(100, TensorRole::Input)};
  b.alloc(x[0]);
  for (std::uint32_t i = 1; i <= 24; ++i) {
    x.push_back(b.tensor(100 + 10 * (i % 3)));
    b.alloc(x[i]).compute(b.op("f", 1 + i % 4, {x[i - 1]}, {x[i]}));
  }
  for (std::uint32_t i = 24; i >= 1; --i) b.compute(b.op("b", 1, {x[i]}, {}));
  for (const char* h : {"dtr", "dtr-eq", "dtr-local", "lru", "largest", "msps", "random"}) {
    INFO(h);
    auto run = [&](int seed) {
      auto p = DtrPolicy::create(Params("dtr", nlohmann::json{{"heuristic", h}, {"seed", seed}, {"thrash_limit", 0}},
                                        DtrPolicy::param_docs()));
      FungibleAllocator a(Bytes{800});
      EngineOptions o;
      o.budget = Bytes{800};
      o.residency_checks = true;
      Report r;
      run_engine(b.trace(), a, *p, o, r);
      return r;
    };
    const Report r1 = run(1), r2 = run(1);
    CHECK(r1.status == RunStatus::Completed);
    CHECK(r1.time.recomputes > 0);
    CHECK(r1.time.recomputes == r2.time.recomputes);
    CHECK(r1.counters.forced_evictions == r2.counters.forced_evictions);
    CHECK(r1.counters.search_scanned == r2.counters.search_scanned);
  }
  CHECK(parse_eviction_score("dtr-eq") == EvictionScore::DtrEq);
  CHECK_FALSE(parse_eviction_score("belady").has_value());
}

}  // namespace remat_graph_test
