// Text helpers for input-derived strings (include/coopsim/base/text.hpp).
#include "coopsim/base/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

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
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t n = c < 0x80 ? 1 : utf8_length(s, i);
    if (c < 0x20 || c == 0x7F || n == 0) {  // a control character, or a byte that begins no UTF-8 sequence
      out += fmt::format("\\x{:02x}", c);
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string excerpt(std::string_view s, std::size_t max) {
  if (s.size() <= max) return one_line(s);
  std::size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // not inside a character
  return fmt::format("{}... ({} bytes)", one_line(s.substr(0, n)), s.size());
}

std::string cut_last_read(std::string_view message) {
  // The two tokens nlohmann's messages quote from the input: the text it last read, and a number
  // literal beyond a double (a 100,000-digit integer).
  std::size_t from = std::string_view::npos;
  for (const std::string_view open : {std::string_view("last read: '"), std::string_view("number overflow parsing '")}) {
    if (const auto at = message.find(open); at != std::string_view::npos) {
      from = at + open.size();
      break;
    }
  }
  if (from == std::string_view::npos) return std::string(message);
  // The token ends at "'; expected ..." when the library adds what it expected, else at the last quote.
  std::size_t end = message.rfind("'; expected ");
  if (end == std::string_view::npos || end < from) end = message.rfind('\'');
  if (end == std::string_view::npos || end < from || end - from <= kExcerptBytes) return std::string(message);
  // Already cut (a message passed on twice): "<80 bytes>... (N bytes)" stays as it is.
  const std::string_view token = message.substr(from, end - from);
  if (token.size() <= kExcerptBytes + 32 && token.ends_with(" bytes)") && token.find("... (") != std::string_view::npos) {
    return std::string(message);
  }
  return std::string(message.substr(0, from)) + excerpt(message.substr(from, end - from)) +
         std::string(message.substr(end));
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  const auto lower = [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
  // Three rows of the dynamic programme: the transposition case looks two rows back.
  std::vector<std::size_t> back(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const bool same = lower(a[i - 1]) == lower(b[j - 1]);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (same ? 0 : 1)});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) && lower(a[i - 2]) == lower(b[j - 1])) {
        cur[j] = std::min(cur[j], back[j - 2] + 1);
      }
    }
    std::swap(back, prev);
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest_name(std::string_view word, const std::vector<std::string>& candidates) {
  constexpr std::size_t kMaxDistance = 2;
  std::string best;
  std::size_t best_d = kMaxDistance + 1;
  bool tie = false;
  for (const auto& c : candidates) {
    // The distance is at least the difference in length: skip the quadratic work (and any
    // megabyte-long word) when that alone rules the candidate out.
    const std::size_t gap = word.size() > c.size() ? word.size() - c.size() : c.size() - word.size();
    if (gap > kMaxDistance) continue;
    const std::size_t d = edit_distance(word, c);
    if (3 * d > c.size() || d > best_d) continue;
    if (d == best_d) {
      tie = true;
    } else {
      best = c;
      best_d = d;
      tie = false;
    }
  }
  if (tie) return {};  // "--jo" is as close to --json as to --jobs: no guess
  if (!best.empty()) return best;
  const std::size_t dashes = std::min(word.find_first_not_of('-'), word.size());
  if (word.size() - dashes < 3) return {};
  std::string only;
  for (const auto& c : candidates) {
    if (c.size() > word.size() && c.compare(0, word.size(), word) == 0) {
      if (!only.empty()) return {};  // two candidates begin so: no guess
      only = c;
    }
  }
  return only;
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
