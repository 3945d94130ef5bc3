// Engine options for hand-worked engine tests: a unit link (1 ns per byte each way, no latency),
// so that copy times equal byte counts, and the allocator's invariants checked after every event.
#pragma once

#include <cstdint>

#include "coopsim/engine/engine.hpp"

namespace coopsim::test {

inline EngineOptions unit_link_options(std::uint64_t budget) {
  EngineOptions o;
  o.budget = Bytes{budget};
  o.link.name = "test";
  o.link.d2h = {1.0, SimTime{0}};
  o.link.h2d = {1.0, SimTime{0}};
  o.paranoid = true;
  return o;
}

}  // namespace coopsim::test
