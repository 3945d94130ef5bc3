// Shared helpers for the `smartpool` tests: plan offsets, option shortcuts, a keep-style replay
// with check_invariants() after every step, and two hand-worked traces.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <vector>

#include "alloc/smartpool.hpp"
#include "coopsim/model/trace.hpp"
#include "trace_builder.hpp"

namespace coopsim::test {

inline constexpr std::uint64_t kDeviceBase = DeviceMemory::kBaseAddress;

inline std::vector<std::uint64_t> offsets(const SmartPoolPlan& p) {
  std::vector<std::uint64_t> out;
  for (const auto& s : p.slots) out.push_back(s.offset);
  return out;
}

inline SmartPoolOptions fit(SmartPoolFit f, bool quirk = true) {
  SmartPoolOptions o;
  o.fit = f;
  o.bf_quirk = quirk;
  return o;
}

// Replays the trace's alloc/free events straight into the allocator (as the engine does under
// keep), checking invariants after every step. Returns the block of every alloc, in order.
inline std::vector<Block> replay(Allocator& a, const Trace& t) {
  std::map<TensorId, Block> live;
  std::vector<Block> placed;
  for (const TraceEvent& e : t.events) {
    if (e.kind == EventKind::Alloc) {
      auto b = a.allocate(AllocRequest{t.tensor(e.tensor()).size, e.stream, e.tensor()});
      REQUIRE(b.has_value());
      live[e.tensor()] = *b;
      placed.push_back(*b);
    } else if (e.kind == EventKind::Free) {
      a.deallocate(live.at(e.tensor()));
      live.erase(e.tensor());
    } else {
      continue;
    }
    a.check_invariants();
  }
  return placed;
}

// One iteration, no markers, r/d = event positions: A(100) [6,9), B(80) [2,7), C(10) [4,5),
// D(90) [8,10), E(50) [0,3), F(60) [1,11). Slots in allocation order: E F B C A D.
inline Trace quirk_instance() {
  TraceBuilder b;
  const auto A = b.tensor(100), Bt = b.tensor(80), C = b.tensor(10), D = b.tensor(90), E = b.tensor(50),
             F = b.tensor(60);
  b.alloc(E).alloc(F).alloc(Bt).free(E).alloc(C).free(C).alloc(A).free(Bt).alloc(D).free(A).free(D).free(F);
  return b.trace();
}

// Iteration 0 is warm-up with a parameter W before it; in iteration 1, a(100) [9,11) and
// b(50) [10,14) are normal, g(64) and h(32) are allocated and not freed (cross-iteration,
// d = 15). `extra_iterations` repeat iteration 1.
inline Trace cross_instance(int extra_iterations = 0) {
  TraceBuilder t;
  const auto W = t.tensor(1000, TensorRole::Parameter), a = t.tensor(100), bb = t.tensor(50),
             g = t.tensor(64, TensorRole::Gradient), h = t.tensor(32, TensorRole::Gradient);
  t.alloc(W);
  t.iteration(0).alloc(a).alloc(g).alloc(h).free(a);
  for (int k = 1; k <= 1 + extra_iterations; ++k) {
    t.iteration(static_cast<std::uint32_t>(k)).free(g).free(h).alloc(a).alloc(bb).free(a).alloc(g).alloc(h).free(bb);
  }
  return t.trace();
}

}  // namespace coopsim::test
