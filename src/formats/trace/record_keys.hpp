// Record kinds, field keys and number conversions of trace v1 records. Private to src/formats/trace.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "json_line.hpp"

namespace coopsim::trace_detail {

enum Key : std::uint8_t {
  kKind,
  kId,
  kBytes,
  kRole,
  kName,
  kDuration,
  kInputs,
  kOutputs,
  kViews,
  kMutates,
  kRandom,
  kTensor,
  kT,
  kStream,
  kAddr,
  kMode,
  kOp,
  kIndex,
  kLabel,
  kSize,
  kPool,
  kBlocks,
  kExpandable,
  kNumKeys,
  kExtension,
  kUnknown,
};
static_assert(kNumKeys <= 32, "key masks are 32 bits");

// k == lit, for a literal whose length equals k.size() (checked by the caller's switch).
template <std::size_t N>
inline bool is(std::string_view k, const char (&lit)[N]) {
  return std::memcmp(k.data(), lit, N - 1) == 0;
}

// Classifies a record key; x_... keys are kExtension, anything else unknown is kUnknown. Inline:
// it runs for every field of every line.
inline Key classify(std::string_view k) {
  switch (k.size()) {
    case 1:
      if (k[0] == 't') return kT;
      break;
    case 2:
      if (is(k, "id")) return kId;
      if (is(k, "op")) return kOp;
      break;
    case 4:
      if (is(k, "kind")) return kKind;
      if (is(k, "name")) return kName;
      if (is(k, "role")) return kRole;
      if (is(k, "addr")) return kAddr;
      if (is(k, "mode")) return kMode;
      if (is(k, "size")) return kSize;
      if (is(k, "pool")) return kPool;
      break;
    case 5:
      if (is(k, "bytes")) return kBytes;
      if (is(k, "views")) return kViews;
      if (is(k, "index")) return kIndex;
      if (is(k, "label")) return kLabel;
      break;
    case 6:
      if (is(k, "tensor")) return kTensor;
      if (is(k, "stream")) return kStream;
      if (is(k, "inputs")) return kInputs;
      if (is(k, "random")) return kRandom;
      if (is(k, "blocks")) return kBlocks;
      break;
    case 7:
      if (is(k, "outputs")) return kOutputs;
      if (is(k, "mutates")) return kMutates;
      break;
    case 8:
      if (is(k, "duration")) return kDuration;
      break;
    case 10:
      if (is(k, "expandable")) return kExpandable;
      break;
    default: break;
  }
  if (k.size() >= 2 && k[0] == 'x' && k[1] == '_') return kExtension;
  return kUnknown;
}

std::string_view key_name(Key k);

enum class Kind : std::uint8_t {
  Tensor,
  Op,
  Alloc,
  Free,
  Access,
  Compute,
  Iteration,
  Mark,
  Segment,
  SegmentAddress,
};
inline constexpr std::size_t kNumKinds = 10;
inline constexpr std::array<std::string_view, kNumKinds> kKindNames{
    "tensor", "op", "alloc", "free", "access", "compute", "iteration", "mark", "segment", "segment_address"};

std::optional<Kind> parse_kind(std::string_view s);

constexpr std::uint32_t bit(Key k) { return 1U << k; }

// Keys each kind accepts (besides x_ extensions).
inline constexpr std::array<std::uint32_t, kNumKinds> kAllowed{
    bit(kKind) | bit(kId) | bit(kBytes) | bit(kRole) | bit(kName),
    bit(kKind) | bit(kId) | bit(kName) | bit(kDuration) | bit(kInputs) | bit(kOutputs) | bit(kViews) | bit(kMutates) |
        bit(kRandom),
    bit(kKind) | bit(kTensor) | bit(kT) | bit(kStream) | bit(kAddr),
    bit(kKind) | bit(kTensor) | bit(kT) | bit(kStream),
    bit(kKind) | bit(kTensor) | bit(kMode) | bit(kOp) | bit(kT) | bit(kStream),
    bit(kKind) | bit(kOp) | bit(kT) | bit(kStream),
    bit(kKind) | bit(kIndex) | bit(kT),
    bit(kKind) | bit(kLabel) | bit(kT),
    bit(kKind) | bit(kAddr) | bit(kSize) | bit(kStream) | bit(kPool) | bit(kBlocks) | bit(kExpandable),
    bit(kKind) | bit(kAddr) | bit(kSize) | bit(kStream) | bit(kPool) | bit(kExpandable),
};

// A JSON integer without sign, fraction or exponent that fits in 64 bits.
bool as_u64(const JValue& v, std::uint64_t& out);

// Exact conversion of a non-negative JSON number in unit 10^unit_exp ns to integer ns, rounded
// to the nearest ns (halves up). False on overflow of int64.
bool to_ns(std::string_view text, int unit_exp, std::int64_t& out);

}  // namespace coopsim::trace_detail
