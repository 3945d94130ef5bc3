// The registries of every built-in component. src/builtin.cpp is the only file that names
// concrete allocator and policy classes.
#pragma once

#include "coopsim/allocator.hpp"
#include "coopsim/policy.hpp"
#include <string>

#include "coopsim/registry.hpp"

namespace coopsim {

using AllocatorRegistry = Registry<Allocator, Bytes /*capacity*/>;
using PolicyRegistry = Registry<Policy>;

struct Components {
  AllocatorRegistry allocators;
  PolicyRegistry policies;
};

const Components& builtin_components();

// Whether the named allocator model can start from a recorded allocator state (a trace that
// begins with a PyTorch snapshot's segments): probes seed() on a fresh instance.
bool allocator_can_seed(const std::string& name, const Components& c = builtin_components());

}  // namespace coopsim
