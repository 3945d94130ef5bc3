// FNV-1a 64 (Fowler/Noll/Vo, http://www.isthe.com/chongo/tech/comp/fnv/): the content hash of
// traces (Trace::content_hash) and the identity of a sweep's configuration. Not cryptographic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace coopsim {

inline constexpr std::uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
inline constexpr std::uint64_t kFnvPrime = 0x100000001b3ULL;

// Folds `n` bytes into the running hash `h` (start from kFnvOffset).
inline std::uint64_t fnv1a(std::uint64_t h, const char* data, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= kFnvPrime;
  }
  return h;
}
inline std::uint64_t fnv1a(std::uint64_t h, std::string_view s) { return fnv1a(h, s.data(), s.size()); }

}  // namespace coopsim
