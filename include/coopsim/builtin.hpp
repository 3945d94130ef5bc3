// The registries of every built-in component. src/builtin.cpp is the only file that names
// concrete allocator and policy classes.
#pragma once

#include "coopsim/allocator.hpp"
#include "coopsim/policy.hpp"
#include "coopsim/registry.hpp"

namespace coopsim {

using AllocatorRegistry = Registry<Allocator, Bytes /*capacity*/>;
using PolicyRegistry = Registry<Policy>;

struct Components {
  AllocatorRegistry allocators;
  PolicyRegistry policies;
};

const Components& builtin_components();

}  // namespace coopsim
