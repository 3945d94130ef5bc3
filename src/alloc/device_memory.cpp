// Simulated cudaMalloc/cudaFree: a capacity check plus a bump pointer for addresses.
#include <fmt/format.h>

#include "coopsim/alloc/allocator.hpp"
#include "coopsim/base/error.hpp"

namespace coopsim {

std::optional<std::uint64_t> DeviceMemory::malloc(Bytes size) {
  if (size.value == 0 || size > capacity_ || used_ > capacity_ - size) return std::nullopt;
  const std::uint64_t addr = next_;
  // Addresses are never reused, so a long run of mallocs and frees could pass 2^64: refuse
  // rather than hand out wrapped addresses that collide (the address checks compare them).
  std::uint64_t end = 0;
  if (__builtin_add_overflow(next_, size.value, &end) || end > ~std::uint64_t{0} - alignment_) {
    throw Error(
        fmt::format("the simulated device ran out of addresses: its cudaMalloc calls handed out more than "
                    "2^64 bytes in this run (it never reuses an address); {} more bytes requested at {:#x}",
                    size.value, next_));
  }
  next_ = round_up(end, alignment_);
  used_ += size;
  ++mallocs_;
  return addr;
}

void DeviceMemory::free(std::uint64_t addr, Bytes size) {
  if (addr < kBaseAddress || addr >= next_ || size > used_) {
    throw InvariantError("DeviceMemory::free of an address or size it never handed out");
  }
  used_ -= size;
  ++frees_;
}

}  // namespace coopsim
