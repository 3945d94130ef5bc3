// The one place that names every built-in component. Order here is the order of `coopsim list`
// and of `--allocator all`.
#include "coopsim/builtin.hpp"

#include "coopsim/alloc/bestfit.hpp"
#include "coopsim/alloc/cnmem.hpp"
#include "coopsim/alloc/fungible.hpp"
#include "coopsim/alloc/pytorch.hpp"
#include "coopsim/alloc/smartpool.hpp"
#include "coopsim/policy/autoswap.hpp"
#include "coopsim/policy/coop.hpp"
#include "coopsim/policy/dte.hpp"
#include "coopsim/policy/dtr.hpp"
#include "coopsim/policy/keep.hpp"
#include "coopsim/policy/vdnn.hpp"
#include "coopsim/policy/hybrid.hpp"

namespace coopsim {
namespace {

template <class T>
AllocatorRegistry::Entry allocator_entry() {
  return {std::string(T::kName), std::string(T::kHelp), T::param_docs(), &T::create};
}

template <class T>
PolicyRegistry::Entry policy_entry() {
  return {std::string(T::kName), std::string(T::kHelp), T::param_docs(), &T::create};
}

Components make_builtin() {
  Components c;
  c.allocators.add(allocator_entry<PyTorchCachingAllocator>());
  c.allocators.add(allocator_entry<CnMemAllocator>());
  c.allocators.add(allocator_entry<BestFitAllocator>());
  c.allocators.add(allocator_entry<FungibleAllocator>());
  c.allocators.add(allocator_entry<SmartPoolAllocator>());
  c.policies.add(policy_entry<KeepPolicy>());
  c.policies.add(policy_entry<CoopPolicy>());
  c.policies.add(policy_entry<DtePolicy>());
  c.policies.add(policy_entry<DtrPolicy>());
  c.policies.add(policy_entry<AutoSwapPolicy>());
  c.policies.add(policy_entry<VdnnPolicy>());
  c.policies.add(policy_entry<PoochPolicy>());
  c.policies.add(policy_entry<CapuchinPolicy>());
  return c;
}

}  // namespace

const Components& builtin_components() {
  static const Components components = make_builtin();
  return components;
}

bool allocator_can_seed(const std::string& name, const Components& c) {
  const auto& entry = c.allocators.get(name, "allocator", "allocator");
  auto probe = entry.make(Params(name, entry.params), Bytes{1ULL << 30});
  try {
    (void)probe->seed({});
    return true;
  } catch (const SeedUnsupported&) {
    return false;
  }
}

}  // namespace coopsim
