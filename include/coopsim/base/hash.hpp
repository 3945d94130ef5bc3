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
  std::size_t i = 0;
  // The same bytes in the same order, eight to a loop test: each costs a load, an xor and a
  // multiply. The multiply chain is serial, so fewer instructions around it leave room to overlap
  // the parser's work (the loader hashes each line just before parsing it).
  const auto* bytes = reinterpret_cast<const unsigned char*>(data);
  for (; n - i >= 8; i += 8) {
    const unsigned char* b = bytes + i;
    h = (h ^ b[0]) * kFnvPrime;
    h = (h ^ b[1]) * kFnvPrime;
    h = (h ^ b[2]) * kFnvPrime;
    h = (h ^ b[3]) * kFnvPrime;
    h = (h ^ b[4]) * kFnvPrime;
    h = (h ^ b[5]) * kFnvPrime;
    h = (h ^ b[6]) * kFnvPrime;
    h = (h ^ b[7]) * kFnvPrime;
  }
  for (; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= kFnvPrime;
  }
  return h;
}
inline std::uint64_t fnv1a(std::uint64_t h, std::string_view s) { return fnv1a(h, s.data(), s.size()); }

}  // namespace coopsim
