// The keep policy's registry entry (the class is header-only: coopsim/policy/keep.hpp).
#include "coopsim/policy/keep.hpp"
#include "coopsim/policy/registry.hpp"

namespace coopsim {

// Its line in the registry (src/policy/registry.cpp).
PolicyRegistry::Entry keep_policy_entry() { return PolicyRegistry::entry_for<KeepPolicy>(); }

}  // namespace coopsim
