// FNV-1a 64 (Fowler/Noll/Vo, http://www.isthe.com/chongo/tech/comp/fnv/): the content hash of
// traces (Trace::content_hash) and the identity of a sweep's configuration. Not cryptographic.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace coopsim {

inline constexpr std::uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
inline constexpr std::uint64_t kFnvPrime = 0x100000001b3ULL;

// Folds `n` bytes into the running hash `h` (start from kFnvOffset).
inline std::uint64_t fnv1a(std::uint64_t h, const char* data, std::size_t n) {
  std::size_t i = 0;
  // The same bytes in the same order, read 8 at a time (one load and no loop test per byte): the
  // multiply chain is serial, so fewer instructions around it leave room to overlap other work.
  if constexpr (std::endian::native == std::endian::little) {
    for (; n - i >= 8; i += 8) {
      std::uint64_t w = 0;
      std::memcpy(&w, data + i, 8);
      for (int b = 0; b < 8; ++b, w >>= 8) h = (h ^ (w & 0xff)) * kFnvPrime;
    }
  }
  for (; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= kFnvPrime;
  }
  return h;
}
inline std::uint64_t fnv1a(std::uint64_t h, std::string_view s) { return fnv1a(h, s.data(), s.size()); }

}  // namespace coopsim
