// Parsing and printing of sizes and times.
#include "coopsim/base/units.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "coopsim/base/error.hpp"

namespace coopsim {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// A string of digits with at most one dot as a double; inf when too long for one (std::stod
// would throw on 400 nines).
double decimal(std::string_view digits) {
  const std::string text(digits);
  return std::strtod(text.c_str(), nullptr);
}

struct Unit {
  std::string_view name;
  std::uint64_t factor;
};

constexpr std::array<Unit, 14> kByteUnits{{
    {"B", 1},
    {"KiB", 1ULL << 10},
    {"MiB", 1ULL << 20},
    {"GiB", 1ULL << 30},
    {"TiB", 1ULL << 40},
    {"kB", 1000ULL},
    {"KB", 1000ULL},
    {"MB", 1000ULL * 1000},
    {"GB", 1000ULL * 1000 * 1000},
    {"TB", 1000ULL * 1000 * 1000 * 1000},
    {"K", 1ULL << 10},
    {"M", 1ULL << 20},
    {"G", 1ULL << 30},
    {"T", 1ULL << 40},
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
  const double x = decimal(number);
  if (factor == 1 && x != std::floor(x)) return std::nullopt;  // a fraction of a byte
  const double v = x * static_cast<double>(factor);
  if (!std::isfinite(v) || v < 0 || v >= 18446744073709549568.0) return std::nullopt;
  return Bytes{static_cast<std::uint64_t>(std::llround(v))};
}

namespace {

// "N%" -> N when N is a plain decimal (digits and one dot): no sign, exponent, hex or "inf".
std::optional<double> percent_number(std::string_view text) {
  if (text.size() < 2 || text.back() != '%') return std::nullopt;
  const std::string_view n = trim(text.substr(0, text.size() - 1));
  if (n.empty() || n == "." || std::count(n.begin(), n.end(), '.') > 1 || !std::all_of(n.begin(), n.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c)) || c == '.';
      })) {
    return std::nullopt;
  }
  return decimal(n);
}

bool plain_number(std::string_view text) {
  return !text.empty() && std::count(text.begin(), text.end(), '.') <= 1 &&
         std::any_of(text.begin(), text.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) &&
         std::all_of(text.begin(), text.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '.'; });
}

}  // namespace

BudgetText parse_budget(std::string_view text, BudgetHint hint) {
  const std::string_view t = trim(text);
  BudgetText out;
  if (hint == BudgetHint::Percent && !t.empty() && t.back() == '%') {
    const auto p = percent_number(t);
    if (!p) {
      out.problem = quote_excerpt(text) + " is not a percentage (e.g. 40%, 12.5%)";
    } else if (!(*p > 0.0) || *p > 1e6) {
      out.problem = fmt::format("a percentage of the trace's peak must be greater than 0% and at most 1000000%, got {}",
                                quote_excerpt(text));
    } else {
      out.percent = *p;
    }
    return out;
  }
  if (plain_number(t)) {
    // Plain numbers are bytes only from 1024 up: below that a unit or a percentage was meant.
    const double x = decimal(t);
    if (x > 0 && x < 1024) {
      const std::string as = std::string(t);
      std::string mean;
      if (hint == BudgetHint::Percent) {
        mean = x <= 1 ? fmt::format("{:g}%", x * 100) : fmt::format("{}GiB or {}%", as, as);
      } else {
        mean = x <= 1 ? fmt::format("{{\"ratios\": [{}]}}", as) : fmt::format("\"{}GiB\"", as);
      }
      out.problem = fmt::format(
          "{} has no unit; did you mean {}? (plain numbers below 1024 are not taken as bytes{})", quote_excerpt(text),
          mean, x == std::floor(x) ? fmt::format("; write {}B for {} byte{}", as, as, x == 1 ? "" : "s") : "");
      return out;
    }
    if (x != std::floor(x)) {
      out.problem = quote_excerpt(text) + " is not a whole number of bytes";
      return out;
    }
  }
  out.bytes = parse_bytes(t);
  if (!out.bytes) {
    out.problem = quote_excerpt(text) + (hint == BudgetHint::Percent
                                             ? " is not a size (e.g. 8GiB, 512MB, 1048576) or a percentage (e.g. 40%)"
                                             : " is not a size (e.g. 8GiB, 512MB, 1048576)");
  }
  return out;
}

std::optional<Bytes> scale_bytes(double fraction, Bytes of) {
  const double v = std::floor(fraction * static_cast<double>(of.value));
  // 2^64 is exactly representable; every double below it converts without overflow.
  if (!(v >= 1.0) || v >= 18446744073709551616.0) return std::nullopt;
  return Bytes{static_cast<std::uint64_t>(v)};
}

namespace {
// A percentage as a user writes it: 0.0000001, not 1e-07 (exponents only beyond what a plain
// decimal shows in 40 places).
std::string plain_decimal(double v) {
  const std::string shortest = fmt::format("{}", v);  // the shortest text that reads back as v
  const std::size_t e = shortest.find('e');
  if (e == std::string::npos || !(v > 1e-40 && v < 1e15)) return shortest;
  std::string digits = shortest.substr(0, e);
  const std::size_t dot = digits.find('.');
  if (dot != std::string::npos) digits.erase(dot, 1);
  // The decimal point goes after the first digit, moved by the exponent.
  const long point = 1 + std::strtol(shortest.c_str() + e + 1, nullptr, 10);
  if (point <= 0) return "0." + std::string(static_cast<std::size_t>(-point), '0') + digits;
  if (static_cast<std::size_t>(point) >= digits.size()) return digits + std::string(point - digits.size(), '0');
  return digits.insert(static_cast<std::size_t>(point), ".");
}
}  // namespace

Bytes percent_of_peak(double percent, Bytes peak, const std::string& key) {
  if (peak.value == 0) throw ConfigError(key, "the trace's peak live bytes are 0: give a size");
  if (const auto b = scale_bytes(percent / 100.0, peak)) return *b;
  throw ConfigError(key, fmt::format("{}% of the trace's peak live bytes ({} B) is {}; give a {} percentage or a size",
                                     plain_decimal(percent), peak.value,
                                     percent >= 100 ? "more than 2^64 - 1 bytes" : "less than one byte",
                                     percent >= 100 ? "smaller" : "larger"));
}

std::string format_bytes(Bytes b) {
  // Byte sums saturate (docs/limits.md, "Arithmetic"): the largest value means "at least".
  if (b.value == std::numeric_limits<std::uint64_t>::max()) return "at least 16777216.00 TiB (saturated)";
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
