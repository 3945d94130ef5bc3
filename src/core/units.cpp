// Parsing and printing of sizes and times.
#include "coopsim/units.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <cmath>
#include <string>

namespace coopsim {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

struct Unit {
  std::string_view name;
  std::uint64_t factor;
};

constexpr std::array<Unit, 14> kByteUnits{{
    {"B", 1},
    {"KiB", 1ULL << 10}, {"MiB", 1ULL << 20}, {"GiB", 1ULL << 30}, {"TiB", 1ULL << 40},
    {"kB", 1000ULL}, {"KB", 1000ULL}, {"MB", 1000ULL * 1000}, {"GB", 1000ULL * 1000 * 1000},
    {"TB", 1000ULL * 1000 * 1000 * 1000},
    {"K", 1ULL << 10}, {"M", 1ULL << 20}, {"G", 1ULL << 30}, {"T", 1ULL << 40},
}};

}  // namespace

std::optional<Bytes> parse_bytes(std::string_view text) {
  text = trim(text);
  if (text.empty()) return std::nullopt;
  std::size_t i = 0;
  bool seen_digit = false, seen_dot = false;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
    if (text[i] == '.') {
      if (seen_dot) return std::nullopt;
      seen_dot = true;
    } else {
      seen_digit = true;
    }
    ++i;
  }
  if (!seen_digit) return std::nullopt;
  const std::string number(text.substr(0, i));
  const std::string_view suffix = trim(text.substr(i));
  std::uint64_t factor = 1;
  if (!suffix.empty()) {
    bool found = false;
    for (const auto& u : kByteUnits) {
      if (u.name == suffix) {
        factor = u.factor;
        found = true;
        break;
      }
    }
    if (!found) return std::nullopt;
  }
  if (!seen_dot) {
    // Exact integer path.
    if (number.size() > 20) return std::nullopt;
    unsigned long long v = 0;
    for (char c : number) {
      const unsigned d = static_cast<unsigned>(c - '0');
      if (v > (std::numeric_limits<std::uint64_t>::max() - d) / 10) return std::nullopt;
      v = v * 10 + d;
    }
    if (factor != 1 && v > std::numeric_limits<std::uint64_t>::max() / factor) return std::nullopt;
    return Bytes{v * factor};
  }
  const double v = std::stod(number) * static_cast<double>(factor);
  if (!std::isfinite(v) || v < 0 || v >= 18446744073709549568.0) return std::nullopt;
  return Bytes{static_cast<std::uint64_t>(std::llround(v))};
}

std::string format_bytes(Bytes b) {
  constexpr std::array<std::string_view, 5> names{"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b.value);
  std::size_t u = 0;
  while (v >= 1024.0 && u + 1 < names.size()) {
    v /= 1024.0;
    ++u;
  }
  if (u == 0) return fmt::format("{} B", b.value);
  return fmt::format("{:.2f} {}", v, names[u]);
}

std::string format_time(SimTime t) {
  const double ns = static_cast<double>(t.count());
  const double a = std::fabs(ns);
  if (a >= 1e9) return fmt::format("{:.3f} s", ns / 1e9);
  if (a >= 1e6) return fmt::format("{:.3f} ms", ns / 1e6);
  if (a >= 1e3) return fmt::format("{:.3f} us", ns / 1e3);
  return fmt::format("{} ns", t.count());
}

}  // namespace coopsim
