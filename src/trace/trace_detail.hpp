// Helpers shared by the trace loader and writer. Private to src/trace.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace coopsim::trace_detail {

// Decimal exponent of a time unit relative to ns: ns 0, us 3, ms 6, s 9; nullopt otherwise.
std::optional<int> time_unit_exponent(std::string_view unit);

// ns expressed exactly in a unit 10^exp ns: "1500" (exp 0), "1.5" (1500 ns, exp 3), "0.000001".
std::string format_in_unit(std::int64_t ns, int exp);

// FNV-1a 64.
inline constexpr std::uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
inline constexpr std::uint64_t kFnvPrime = 0x100000001b3ULL;
inline std::uint64_t fnv1a(std::uint64_t h, const char* data, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= kFnvPrime;
  }
  return h;
}

// Largest byte size of a storage-owning tensor (2^53, exactly representable as a double).
inline constexpr std::uint64_t kMaxTensorBytes = 1ULL << 53;

}  // namespace coopsim::trace_detail
