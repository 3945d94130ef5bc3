// The registry of allocator models, filled explicitly by src/alloc/registry.cpp.
#pragma once

#include "coopsim/alloc/allocator.hpp"
#include "coopsim/base/registry.hpp"
#include "coopsim/base/units.hpp"

namespace coopsim {

using AllocatorRegistry = Registry<Allocator, Bytes /*capacity*/>;

// Every built-in allocator model, in `coopsim list` order.
AllocatorRegistry builtin_allocators();

}  // namespace coopsim
