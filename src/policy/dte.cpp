// The DTE policy's registry entry (the class is header-only: dte.hpp).
#include "coopsim/policy/registry.hpp"
#include "dte.hpp"

namespace coopsim {

// Its line in the registry (src/policy/registry.cpp).
PolicyRegistry::Entry dte_policy_entry() { return PolicyRegistry::entry_for<DtePolicy>(); }

}  // namespace coopsim
