// The built-in components: the allocator and policy registries of their layers.
#include "coopsim/sim/builtin.hpp"

namespace coopsim {

const Components& builtin_components() {
  static const Components components{builtin_allocators(), builtin_policies()};
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
