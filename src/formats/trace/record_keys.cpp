// Record kinds, keys and exact number conversions for the trace v1 loader (record_keys.hpp).
#include "record_keys.hpp"

#include <algorithm>
#include <limits>

namespace coopsim::trace_detail {

std::string_view key_name(Key k) {
  static constexpr std::array<std::string_view, kNumKeys> kNames{
      "kind",  "id",      "bytes",  "role",   "name", "duration", "inputs",    "outputs",
      "views", "mutates", "random", "tensor", "t",    "stream",   "addr",      "mode",
      "op",    "index",   "label",  "size",   "pool", "blocks",   "expandable"};
  return kNames[k];
}

std::optional<Kind> parse_kind(std::string_view s) {
  switch (s.size()) {
    case 2:
      if (is(s, "op")) return Kind::Op;
      break;
    case 4:
      if (is(s, "free")) return Kind::Free;
      if (is(s, "mark")) return Kind::Mark;
      break;
    case 5:
      if (is(s, "alloc")) return Kind::Alloc;
      break;
    case 6:
      if (is(s, "tensor")) return Kind::Tensor;
      if (is(s, "access")) return Kind::Access;
      break;
    case 7:
      if (is(s, "compute")) return Kind::Compute;
      if (is(s, "segment")) return Kind::Segment;
      break;
    case 9:
      if (is(s, "iteration")) return Kind::Iteration;
      break;
    case 15:
      if (is(s, "segment_address")) return Kind::SegmentAddress;
      break;
    default: break;
  }
  return std::nullopt;
}

bool as_u64(const JValue& v, std::uint64_t& out) {
  if (v.type != JType::Number || !v.integer || v.negative) return false;
  if (v.exact) {
    out = v.value;
    return true;
  }
  // r * 10 + d overflows exactly when r > max / 10, or r == max / 10 and d > max % 10 (constants:
  // no division per digit).
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  constexpr std::uint64_t kLimit = kMax / 10, kLastDigit = kMax % 10;
  std::uint64_t r = 0;
  for (const char c : v.text) {
    const auto d = static_cast<std::uint64_t>(c - '0');
    if (r > kLimit || (r == kLimit && d > kLastDigit)) return false;
    r = r * 10 + d;
  }
  out = r;
  return true;
}

bool to_ns(std::string_view text, int unit_exp, std::int64_t& out) {
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  std::size_t i = 0;
  const std::size_t n = text.size();
  const std::size_t int_begin = i;
  while (i < n && text[i] >= '0' && text[i] <= '9') ++i;
  const std::string_view ip = text.substr(int_begin, i - int_begin);
  std::string_view fp;
  if (i < n && text[i] == '.') {
    const std::size_t fb = ++i;
    while (i < n && text[i] >= '0' && text[i] <= '9') ++i;
    fp = text.substr(fb, i - fb);
  }
  std::int64_t exp = 0;
  if (i < n && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool neg = false;
    if (i < n && (text[i] == '+' || text[i] == '-')) neg = text[i++] == '-';
    for (; i < n; ++i) {
      if (exp < 1'000'000'000) exp = exp * 10 + (text[i] - '0');
    }
    if (neg) exp = -exp;
  }
  // value = D * 10^E, D = digits of ip followed by fp.
  const auto nd = static_cast<std::int64_t>(ip.size() + fp.size());
  auto digit = [&](std::int64_t k) {
    const auto u = static_cast<std::size_t>(k);
    return static_cast<std::uint64_t>((u < ip.size() ? ip[u] : fp[u - ip.size()]) - '0');
  };
  std::int64_t k0 = 0;
  while (k0 < nd && digit(k0) == 0) ++k0;
  if (k0 == nd) {
    out = 0;
    return true;
  }
  const std::int64_t e = exp - static_cast<std::int64_t>(fp.size()) + unit_exp;
  const std::int64_t int_end = nd + e;  // digits [k0, int_end) form the integer part
  std::uint64_t r = 0;
  for (std::int64_t k = k0; k < std::min(nd, int_end); ++k) {
    const std::uint64_t d = digit(k);
    if (r > (kMax - d) / 10) return false;
    r = r * 10 + d;
  }
  for (std::int64_t k = nd; k < int_end; ++k) {  // trailing zeros of a positive exponent
    if (r > kMax / 10) return false;
    r *= 10;
  }
  if (int_end >= 0 && int_end < nd && digit(int_end) >= 5) {
    if (r == kMax) return false;
    ++r;
  }
  out = static_cast<std::int64_t>(r);
  return true;
}

}  // namespace coopsim::trace_detail
