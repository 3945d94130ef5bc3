// A placed block of device memory: what an allocator model hands out (coopsim/alloc/allocator.hpp)
// and what the remat graph records for a resident value (coopsim/model/remat_graph.hpp). Plain
// data, so both layers can name it.
#pragma once

#include <cstdint>

#include "coopsim/base/units.hpp"

namespace coopsim {

struct Block {
  std::uint64_t addr = 0;  // device address (arena offset for fixed-arena models)
  Bytes size;              // block size as the model rounds it
  Bytes requested;         // what was asked for
  std::uint32_t stream = 0;
  friend bool operator==(const Block&, const Block&) = default;
};

}  // namespace coopsim
