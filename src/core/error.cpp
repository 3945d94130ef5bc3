#include "coopsim/error.hpp"

#include <fmt/format.h>

namespace coopsim {

TraceError::TraceError(const std::string& file, std::uint64_t line, const std::string& problem)
    : Error(file + ":" + std::to_string(line) + ": " + problem),
      file_(file),
      line_(line),
      problem_(problem) {}

ConfigError::ConfigError(const std::string& key, const std::string& problem)
    : Error(key.empty() ? problem : key + ": " + problem), key_(key) {}

std::string quote_excerpt(std::string_view s) {
  constexpr std::size_t kMax = 40;
  bool cut = false;
  if (s.size() > kMax) {
    std::size_t n = kMax;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
    s = s.substr(0, n);
    cut = true;
  }
  std::string out = "'";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7F || c == '\\' || c == '\'') {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += ch;
    }
  }
  out += cut ? "...'" : "'";
  return out;
}

}  // namespace coopsim
