// A byte vector whose resize() leaves the new bytes as they are (no zero fill): for read buffers
// that a read() or inflate() overwrites anyway. Zeroing a 128-256 KiB buffer, and faulting in every
// page of it, was a fifth of the instructions of a short `coopsim run`.
#pragma once

#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace coopsim {

template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  using value_type = T;
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() noexcept = default;
  template <class U>
  explicit DefaultInitAllocator(const DefaultInitAllocator<U>& /*other*/) noexcept {}
  // Value construction (resize's new elements) becomes default construction: no write for bytes.
  template <class U>
  void construct(U* p) noexcept(noexcept(::new (static_cast<void*>(p)) U)) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    std::allocator_traits<std::allocator<T>>::construct(static_cast<std::allocator<T>&>(*this), p,
                                                        std::forward<Args>(args)...);
  }
};

template <class T>
using UninitVector = std::vector<T, DefaultInitAllocator<T>>;

}  // namespace coopsim
