// Time units of trace files ("time_unit": ns, us, ms, s), shared by the loader and the writer.
#include <fmt/format.h>

#include <cstdint>

#include "trace_detail.hpp"

namespace coopsim {
namespace trace_detail {

std::optional<int> time_unit_exponent(std::string_view unit) {
  if (unit == "ns") return 0;
  if (unit == "us") return 3;
  if (unit == "ms") return 6;
  if (unit == "s") return 9;
  return std::nullopt;
}

std::string format_in_unit(std::int64_t ns, int exp) {
  if (exp <= 0) return fmt::format("{}", ns);
  std::int64_t factor = 1;
  for (int i = 0; i < exp; ++i) factor *= 10;
  const bool negative = ns < 0;
  // Work on the magnitude as unsigned so that INT64_MIN cannot overflow.
  const std::uint64_t mag = negative ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  const auto f = static_cast<std::uint64_t>(factor);
  const std::uint64_t whole = mag / f, frac = mag % f;
  std::string out = negative ? "-" : "";
  if (frac == 0) return out + fmt::format("{}", whole);
  std::string digits = fmt::format("{:0{}}", frac, exp);
  while (!digits.empty() && digits.back() == '0') digits.pop_back();
  return out + fmt::format("{}.{}", whole, digits);
}

}  // namespace trace_detail
}  // namespace coopsim
