// Simulated cudaMalloc/cudaFree: a capacity check plus a bump pointer for addresses.
#include "coopsim/allocator.hpp"
#include "coopsim/error.hpp"

namespace coopsim {

std::optional<std::uint64_t> DeviceMemory::malloc(Bytes size) {
  if (size.value == 0 || size > capacity_ || used_ > capacity_ - size) return std::nullopt;
  const std::uint64_t addr = next_;
  next_ = round_up(next_ + size.value, alignment_);
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
