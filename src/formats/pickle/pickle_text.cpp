// Text arguments of the protocol-0 opcodes and text checks, as CPython decodes them:
// INT / LONG / GET / PUT decimals, FLOAT (float() of repr() output), STRING (quotes stripped,
// then codecs.escape_decode: Objects/bytesobject.c _PyBytes_DecodeEscape), UNICODE
// (raw-unicode-escape: Objects/unicodeobject.c _PyUnicode_DecodeRawUnicodeEscapeStateful), and
// UTF-8 validity as Python's decoder sees it with errors="surrogatepass".
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <limits>

#include "pickle_detail.hpp"

namespace coopsim::pickle::detail {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

int hex_value(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Code points, surrogates included (Python str may hold lone surrogates), as UTF-8 bytes.
void append_utf8(std::uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string shown(std::string_view text) {
  constexpr std::size_t kShown = 40;
  std::string s;
  for (const char c : text.substr(0, kShown)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7F && c != '\'' && c != '\\') {
      s.push_back(c);
    } else {
      s += fmt::format("\\x{:02x}", u);
    }
  }
  if (text.size() > kShown) s += "...";
  return "'" + s + "'";
}

}  // namespace

std::string decode_decimal(std::string_view text, bool allow_minus, std::int64_t& out) {
  std::string_view digits = text;
  const bool negative = allow_minus && !digits.empty() && digits.front() == '-';
  if (negative) digits.remove_prefix(1);
  bool ok = !digits.empty() && (digits.size() == 1 || digits.front() != '0');
  for (const char c : digits) ok = ok && is_digit(c);
  if (!ok) {
    return fmt::format("argument {} is not a plain decimal integer{}", shown(text),
                       allow_minus ? "" : " (non-negative)");
  }
  // Accumulate negatively so that INT64_MIN is reachable.
  std::int64_t value = 0;
  for (const char c : digits) {
    const int d = c - '0';
    if (value < (std::numeric_limits<std::int64_t>::min() + d) / 10) {
      return fmt::format("integer {} does not fit in 64 bits", shown(text));
    }
    value = value * 10 - d;
  }
  if (!negative) {
    if (value == std::numeric_limits<std::int64_t>::min()) {
      return fmt::format("integer {} does not fit in 64 bits", shown(text));
    }
    value = -value;
  }
  out = value;
  return {};
}

std::string decode_float_text(std::string_view text, double& out) {
  std::string_view body = text;
  bool negative = false;
  if (!body.empty() && (body.front() == '+' || body.front() == '-')) {
    negative = body.front() == '-';
    body.remove_prefix(1);
  }
  // from_chars takes no sign of its own here: a second sign ("+-1") must stay an error.
  const bool starts_well = !body.empty() && body.front() != '+' && body.front() != '-';
  double value = 0.0;
  const auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), value, std::chars_format::general);
  const bool whole = starts_well && end == body.data() + body.size();
  if (!whole || (ec != std::errc() && ec != std::errc::result_out_of_range)) {
    return fmt::format("argument {} is not a decimal floating-point number", shown(text));
  }
  if (ec == std::errc::result_out_of_range) {
    // Python's float() rounds to inf or to zero instead of failing.
    const auto e = body.find_first_of("eE");
    const bool tiny = e != std::string_view::npos ? body.substr(e + 1, 1) == "-"
                                                  : body.find_first_not_of("0.") == std::string_view::npos ||
                                                        body.front() == '.' || body.substr(0, 2) == "0.";
    value = tiny ? 0.0 : std::numeric_limits<double>::infinity();
  }
  out = negative ? -value : value;
  return {};
}

std::string decode_quoted_string(std::string_view text, std::string& out) {
  if (text.size() < 2 || text.front() != text.back() || (text.front() != '\'' && text.front() != '"')) {
    return "the STRING opcode argument must be quoted";
  }
  const std::string_view body = text.substr(1, text.size() - 2);
  out.clear();
  out.reserve(body.size());
  for (std::size_t i = 0; i < body.size();) {
    const char c = body[i++];
    if (c != '\\') {
      out.push_back(c);
      continue;
    }
    if (i == body.size()) return "trailing \\ in the STRING argument";
    const char e = body[i++];
    switch (e) {
      case '\n': break;  // line continuation
      case '\\': out.push_back('\\'); break;
      case '\'': out.push_back('\''); break;
      case '"': out.push_back('"'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 't': out.push_back('\t'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 'v': out.push_back('\v'); break;
      case 'a': out.push_back('\a'); break;
      case 'x': {
        const int hi = i + 1 < body.size() ? hex_value(static_cast<unsigned char>(body[i])) : -1;
        const int lo = i + 1 < body.size() ? hex_value(static_cast<unsigned char>(body[i + 1])) : -1;
        if (hi < 0 || lo < 0) return fmt::format("invalid \\x escape at position {} of the STRING argument", i - 2);
        out.push_back(static_cast<char>((hi << 4) | lo));
        i += 2;
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          unsigned value = static_cast<unsigned>(e - '0');
          for (int more = 0; more < 2 && i < body.size() && body[i] >= '0' && body[i] <= '7'; ++more) {
            value = value * 8 + static_cast<unsigned>(body[i++] - '0');
          }
          out.push_back(static_cast<char>(value & 0xFFU));  // CPython keeps the low byte of \400..\777
        } else {
          out.push_back('\\');  // unknown escapes stay as written
          --i;
        }
    }
  }
  return {};
}

std::string decode_raw_unicode_escape(std::string_view text, std::string& out) {
  out.clear();
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i++]);
    if (c != '\\' || i == text.size()) {
      append_utf8(c, out);  // latin-1
      continue;
    }
    const auto e = static_cast<unsigned char>(text[i++]);
    if (e != 'u' && e != 'U') {
      out.push_back('\\');
      append_utf8(e, out);
      continue;
    }
    const std::size_t start = i - 2;
    std::uint32_t cp = 0;
    for (int n = e == 'u' ? 4 : 8; n > 0; --n, ++i) {
      const int d = i < text.size() ? hex_value(static_cast<unsigned char>(text[i])) : -1;
      if (d < 0) {
        return fmt::format("truncated \\{}{} escape at position {} of the UNICODE argument", static_cast<char>(e),
                           e == 'u' ? "XXXX" : "XXXXXXXX", start);
      }
      cp = (cp << 4) | static_cast<std::uint32_t>(d);
    }
    if (cp > 0x10FFFF) return fmt::format("\\U escape out of range at position {} of the UNICODE argument", start);
    append_utf8(cp, out);
  }
  return {};
}

std::size_t first_non_ascii(std::string_view bytes) {
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (static_cast<unsigned char>(bytes[i]) >= 0x80) return i;
  }
  return std::string_view::npos;
}

std::size_t first_invalid_utf8(std::string_view bytes) {
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t n = bytes.size();
  std::size_t i = first_non_ascii(bytes);
  if (i == std::string_view::npos) return i;
  auto cont = [&](std::size_t k, unsigned lo, unsigned hi) { return k < n && s[k] >= lo && s[k] <= hi; };
  while (i < n) {
    const unsigned c = s[i];
    std::size_t len = 0;
    if (c < 0x80) {
      len = 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = cont(i + 1, 0x80, 0xBF) ? 2 : 0;
    } else if (c >= 0xE0 && c <= 0xEF) {
      // E0 needs A0..BF (no overlongs); ED keeps 80..BF: surrogatepass lets surrogates through.
      const unsigned lo = c == 0xE0 ? 0xA0 : 0x80;
      len = cont(i + 1, lo, 0xBF) && cont(i + 2, 0x80, 0xBF) ? 3 : 0;
    } else if (c >= 0xF0 && c <= 0xF4) {
      const unsigned lo = c == 0xF0 ? 0x90 : 0x80;
      const unsigned hi = c == 0xF4 ? 0x8F : 0xBF;
      len = cont(i + 1, lo, hi) && cont(i + 2, 0x80, 0xBF) && cont(i + 3, 0x80, 0xBF) ? 4 : 0;
    }
    if (len == 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

}  // namespace coopsim::pickle::detail
