// The one list of built-in allocators; its order is the order of `coopsim list` and of
// `--allocator all`. Each allocator lives in its own file (src/alloc/<name>.cpp), which defines
// `<name>_allocator_entry()` (name, help, parameters, factory); its line here declares that function
// and adds the entry. Adding an allocator: one file plus one line here (and the file's name in
// src/alloc/meson.build). No static self-registration: static libraries would drop it.
#include "coopsim/alloc/registry.hpp"

namespace coopsim {

AllocatorRegistry builtin_allocators() {
  AllocatorRegistry r;
  {
    extern AllocatorRegistry::Entry pytorch_allocator_entry();
    r.add(pytorch_allocator_entry());
  }
  {
    extern AllocatorRegistry::Entry cnmem_allocator_entry();
    r.add(cnmem_allocator_entry());
  }
  {
    extern AllocatorRegistry::Entry bestfit_allocator_entry();
    r.add(bestfit_allocator_entry());
  }
  {
    extern AllocatorRegistry::Entry fungible_allocator_entry();
    r.add(fungible_allocator_entry());
  }
  {
    extern AllocatorRegistry::Entry smartpool_allocator_entry();
    r.add(smartpool_allocator_entry());
  }
#ifdef COOPSIM_EXTENSION_ALLOCATOR
  // tests/extension/throwaway_allocator.cpp's line: tests/meson.build compiles this registry a
  // second time with it, to show that one line here is all a new allocator needs.
  {
    extern AllocatorRegistry::Entry COOPSIM_EXTENSION_ALLOCATOR();
    r.add(COOPSIM_EXTENSION_ALLOCATOR());
  }
#endif
  return r;
}

}  // namespace coopsim
