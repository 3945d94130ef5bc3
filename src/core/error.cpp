// Error classes. Text taken from an input (a file name, a config key, a JSON library's
// message) has its control characters escaped when a message is built (one_line, text.hpp), so
// no input can split or forge lines of the CLI's output.
#include "coopsim/error.hpp"
#include "coopsim/text.hpp"

#include <fmt/format.h>

namespace coopsim {

TraceError::TraceError(const std::string& file, std::uint64_t line, const std::string& problem)
    : Error(one_line(file + ":" + std::to_string(line) + ": " + problem)),
      file_(file),
      line_(line),
      problem_(problem) {}

// The key is kept escaped: check_config re-keys errors by cutting key().size() + 2 bytes off what().
ConfigError::ConfigError(const std::string& key, const std::string& problem)
    : Error(key.empty() ? one_line(problem) : one_line(key) + ": " + one_line(problem)), key_(one_line(key)) {}

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
