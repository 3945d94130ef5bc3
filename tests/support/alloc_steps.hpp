// Allocation steps for allocator unit tests: every step is followed by check_invariants().
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>

#include "coopsim/alloc/allocator.hpp"

namespace coopsim::test {

inline Block must_alloc(Allocator& a, const AllocRequest& request) {
  auto b = a.allocate(request);
  REQUIRE(b.has_value());
  a.check_invariants();
  return *b;
}

inline Block must_alloc(Allocator& a, std::uint64_t size) { return must_alloc(a, AllocRequest{Bytes{size}}); }

inline void must_free(Allocator& a, const Block& b) {
  a.deallocate(b);
  a.check_invariants();
}

}  // namespace coopsim::test
