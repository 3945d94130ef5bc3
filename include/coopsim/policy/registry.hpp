// The registry of memory policies, filled explicitly by src/policy/registry.cpp.
#pragma once

#include "coopsim/base/registry.hpp"
#include "coopsim/policy/policy.hpp"

namespace coopsim {

using PolicyRegistry = Registry<Policy>;

// Every built-in policy, in `coopsim list` order.
PolicyRegistry builtin_policies();

}  // namespace coopsim
