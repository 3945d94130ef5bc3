// Helpers shared by the trace loader and writer. Private to src/formats/trace.
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
// Largest byte size of a storage-owning tensor (2^53, exactly representable as a double).
inline constexpr std::uint64_t kMaxTensorBytes = 1ULL << 53;

}  // namespace coopsim::trace_detail
