// Text helpers for input-derived strings (include/coopsim/text.hpp).
#include "coopsim/text.hpp"

#include <fmt/format.h>

namespace coopsim {

std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 2;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 3;
  } else {
    return 0;
  }
  if (i + n >= s.size()) return 0;
  for (std::size_t k = 1; k <= n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  }
  const auto c1 = static_cast<unsigned char>(s[i + 1]);
  if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F)) {
    return 0;
  }
  return n + 1;
}

std::string one_line(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += ch;
    }
  }
  return out;
}

std::uint64_t line_of_offset(std::string_view text, std::size_t offset) {
  std::uint64_t line = 1;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) line += text[i] == '\n';
  return line;
}

std::string_view json_message(std::string_view what) {
  if (const auto p = what.find("] "); p != std::string_view::npos) what.remove_prefix(p + 2);
  return what;
}

std::pair<std::string, std::size_t> locate_json_overflow(std::string_view what, std::string_view text) {
  what = json_message(what);
  const auto open = what.find('\'');
  const auto close = what.rfind('\'');
  std::size_t at = std::string_view::npos;
  if (open != std::string_view::npos && close > open + 1) at = text.find(what.substr(open + 1, close - open - 1));
  return {std::string(what), at == std::string_view::npos ? 0 : at};
}

bool is_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string to_utf8(std::string_view s) {
  if (is_utf8(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_length(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

}  // namespace coopsim
