// Strong types for the quantities coopsim moves around: bytes, simulated time and dense ids.
// Ids index vectors (TensorId -> Trace::tensors()), so they are plain enums over uint32.
#pragma once

#include <chrono>
#include <compare>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace coopsim {

// Simulated time, always nanoseconds. Never wall clock.
using SimTime = std::chrono::duration<std::int64_t, std::nano>;

// a + b for times that only grow (b >= 0); nullopt when the sum would pass 2^63 - 1 ns (about
// 292 years). The engine and the simrd simulation stop such a run with an error instead of
// wrapping (docs/limits.md, "Arithmetic").
constexpr std::optional<SimTime> checked_add(SimTime a, SimTime b) {
  if (b.count() < 0 || a.count() > std::numeric_limits<std::int64_t>::max() - b.count()) return std::nullopt;
  return a + b;
}
// a + b (b >= 0), saturating at 2^63 - 1 ns: for estimates (policies' plans) that must not
// wrap; the engine's own clock uses checked_add.
constexpr SimTime sat_add(SimTime a, SimTime b) { return checked_add(a, b).value_or(SimTime::max()); }

// Byte counts. Sums saturate at 2^64 - 1 instead of wrapping (docs/limits.md, "Arithmetic"):
// totals over a run (bytes swapped, allocated) can pass 64 bits with 2^53-byte tensors.
struct Bytes {
  std::uint64_t value = 0;

  constexpr Bytes() = default;
  constexpr explicit Bytes(std::uint64_t v) : value(v) {}

  friend constexpr auto operator<=>(Bytes, Bytes) = default;
  friend constexpr Bytes operator+(Bytes a, Bytes b) {
    return Bytes{a.value > std::numeric_limits<std::uint64_t>::max() - b.value
                     ? std::numeric_limits<std::uint64_t>::max()
                     : a.value + b.value};
  }
  friend constexpr Bytes operator-(Bytes a, Bytes b) { return Bytes{a.value - b.value}; }  // pre: a >= b
  constexpr Bytes& operator+=(Bytes o) {
    *this = *this + o;
    return *this;
  }
  constexpr Bytes& operator-=(Bytes o) {
    value -= o.value;
    return *this;
  }
};

constexpr Bytes operator""_B(unsigned long long v) { return Bytes{v}; }
constexpr Bytes operator""_KiB(unsigned long long v) { return Bytes{v << 10}; }
constexpr Bytes operator""_MiB(unsigned long long v) { return Bytes{v << 20}; }
constexpr Bytes operator""_GiB(unsigned long long v) { return Bytes{v << 30}; }

// Round up to a multiple of `unit` (unit > 0). Saturates instead of wrapping.
constexpr std::uint64_t round_up(std::uint64_t v, std::uint64_t unit) {
  const std::uint64_t rem = v % unit;
  if (rem == 0) return v;
  const std::uint64_t add = unit - rem;
  return v > std::numeric_limits<std::uint64_t>::max() - add ? std::numeric_limits<std::uint64_t>::max() : v + add;
}

// "8GiB", "512MB", "1.5GiB", "4096", "64 KiB" (SI: kB MB GB TB; binary: KiB MiB GiB TiB; B).
// nullopt on malformed text, negative values, overflow, or a fraction of a byte without a larger
// unit ("0.5", "1.5B": there is no half byte; "0.5KiB" is 512).
std::optional<Bytes> parse_bytes(std::string_view text);

// A budget as a user spells it where a plain number could be meant as a share of the trace's
// peak (run/bench --budget, a sweep config's "budgets"): a size with a unit ("512B", "8GiB"),
// plain bytes of 1024 or more, 0 (refused later as "must be greater than 0"), or, with
// BudgetHint::Percent, "N%" (0 < N <= 1e6) of the trace's peak live bytes. A plain number from
// 1 to 1023 is refused: "-b 0.5" meaning one byte is never what was meant.
enum class BudgetHint : std::uint8_t {
  Percent,  // the command line: hints say "did you mean 50%?"
  Ratio,    // a sweep config: hints say "did you mean {"ratios": [0.5]}?"
};
struct BudgetText {
  std::optional<Bytes> bytes;
  std::optional<double> percent;  // Percent only
  std::string problem;            // neither: why, with a "did you mean" hint where one helps
};
BudgetText parse_budget(std::string_view text, BudgetHint hint);

// floor(`fraction` x `of`) in bytes; nullopt when that is below one byte or beyond 2^64 - 1.
std::optional<Bytes> scale_bytes(double fraction, Bytes of);
// `percent`% of a trace's peak live bytes `peak`, for a budget given as a percentage; throws
// ConfigError(key) naming the peak when that is less than one byte (or beyond 2^64 - 1).
Bytes percent_of_peak(double percent, Bytes peak, const std::string& key);
// Human form with binary units, e.g. "1.50 GiB", "512 B".
std::string format_bytes(Bytes b);
// "1.234 ms" style.
std::string format_time(SimTime t);

enum class TensorId : std::uint32_t {};
enum class OpId : std::uint32_t {};

constexpr std::uint32_t index_of(TensorId id) { return static_cast<std::uint32_t>(id); }
constexpr std::uint32_t index_of(OpId id) { return static_cast<std::uint32_t>(id); }
inline constexpr TensorId kNoTensor{0xffffffffU};  // "no tensor" (a free block, no view base)
inline constexpr OpId kNoOp{0xffffffffU};
// A trace event: its index in Trace::events() (run logs say which event was being processed).
enum class EventId : std::uint32_t {};
constexpr std::uint32_t index_of(EventId id) { return static_cast<std::uint32_t>(id); }
inline constexpr EventId kNoEvent{0xffffffffU};

}  // namespace coopsim
