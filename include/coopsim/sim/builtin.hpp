// The registries of every built-in component: the allocator list (src/alloc/registry.cpp) and
// the policy list (src/policy/registry.cpp).
#pragma once

#include <string>

#include "coopsim/alloc/registry.hpp"
#include "coopsim/policy/registry.hpp"

namespace coopsim {

struct Components {
  AllocatorRegistry allocators;
  PolicyRegistry policies;
};

const Components& builtin_components();

// Whether the named allocator model can start from a recorded allocator state (a trace that
// begins with a PyTorch snapshot's segments): probes seed() on a fresh instance.
bool allocator_can_seed(const std::string& name, const Components& c = builtin_components());

}  // namespace coopsim
