// Error classes. Text taken from an input (a file name, a config key, a JSON library's
// message) has its control characters escaped when a message is built (one_line, text.hpp), so
// no input can split or forge lines of the CLI's output.
#include "coopsim/base/error.hpp"
#include "coopsim/base/text.hpp"

#include <fmt/format.h>

namespace coopsim {

namespace {

// A safety net under quote_excerpt: whatever a message quotes, what() stays a line of a few
// kilobytes. Keys and file names are cut shorter than problems, which may list valid names. A
// JSON reader's "last read: '...'" token is cut to 80 bytes first (cut_last_read, text.hpp), as
// every importer and config reader passes those messages on.
constexpr std::size_t kMaxWhereBytes = 1024;
constexpr std::size_t kMaxProblemBytes = 4096;

}  // namespace

InputError::InputError(const std::string& file, std::uint64_t line, const std::string& problem)
    : Error(excerpt(file, kMaxWhereBytes) + ":" + std::to_string(line) + ": " +
            excerpt(cut_last_read(problem), kMaxProblemBytes)),
      file_(file),
      line_(line),
      problem_(problem) {}

ConfigError::ConfigError(const std::string& key, const std::string& problem)
    : Error(key.empty() ? excerpt(cut_last_read(problem), kMaxProblemBytes)
                        : excerpt(key, kMaxWhereBytes) + ": " + excerpt(cut_last_read(problem), kMaxProblemBytes)),
      key_(one_line(key)),
      problem_(one_line(problem)) {}

std::string quote_excerpt(std::string_view s) {
  const bool cut = s.size() > kExcerptBytes;
  std::string_view shown = s;
  if (cut) {
    std::size_t n = kExcerptBytes;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // not inside a character
    shown = s.substr(0, n);
  }
  std::string out = "'";
  for (const char ch : shown) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7F || c == '\\' || c == '\'') {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += ch;
    }
  }
  out += cut ? fmt::format("...' ({} bytes)", s.size()) : "'";
  return out;
}

}  // namespace coopsim
