// Streaming pickle reading (coopsim/formats/pickle_stream.hpp): the first pass, which finds the
// memo indices some GET reads, and the two-pass drivers. The first pass decodes only the lengths
// of opcode arguments (Lib/pickletools.py gives each opcode's argument encoding) and stops at
// the first opcode it cannot step over (refused, unknown, truncated): the second pass, which
// runs the real unpickler, reports the problem there or earlier, and every GET before it has
// been seen.
#include "coopsim/formats/pickle_stream.hpp"

#include <fmt/format.h>

#include "coopsim/base/capped_input.hpp"
#include "coopsim/base/error.hpp"
#include "pickle_detail.hpp"
#include "pickle_index_set.hpp"
#include "pickle_input.hpp"
#include "pickle_opcodes.hpp"

namespace coopsim::pickle {
namespace detail {

ValuePtr read_streaming(Input& in, const std::string& name, MemoryCap& memory, const IndexSet& fetched,
                        ItemSink& sink);  // pickle.cpp

namespace {

// Little-endian unsigned integer of n bytes; nullopt at the end of the input.
std::optional<std::uint64_t> le(Input& in, std::size_t n) {
  if (!in.has(n)) return std::nullopt;
  const std::string_view s = in.take(n);
  std::uint64_t v = 0;
  for (std::size_t i = n; i-- > 0;) v = (v << 8) | static_cast<unsigned char>(s[i]);
  return v;
}

// Steps over one opcode's argument, recording the index of a GET. False where the second pass
// will fail (or STOP).
bool step_over(Input& in, unsigned char code, IndexSet& fetched) {
  auto skip_counted = [&](std::size_t width, bool signed32) {
    const auto n = le(in, width);
    if (!n) return false;
    if (signed32 && (*n & 0x80000000ULL) != 0) return false;
    return in.skip(*n);
  };
  switch (code) {
    case op::kProto:
    case op::kBinInt1:
    case op::kBinPut: return in.skip(1);
    case op::kBinInt2: return in.skip(2);
    case op::kBinInt:
    case op::kLongBinPut: return in.skip(4);
    case op::kFrame:
    case op::kBinFloat: return in.skip(8);
    case op::kInt:
    case op::kLong:
    case op::kFloat:
    case op::kString:
    case op::kUnicode:
    case op::kPut: return in.line().has_value();
    case op::kLong1:
    case op::kShortBinString:
    case op::kShortBinUnicode:
    case op::kShortBinBytes: return skip_counted(1, false);
    case op::kLong4:
    case op::kBinString: return skip_counted(4, true);
    case op::kBinUnicode:
    case op::kBinBytes: return skip_counted(4, false);
    case op::kBinUnicode8:
    case op::kBinBytes8:
    case op::kByteArray8: return skip_counted(8, false);
    case op::kNone:
    case op::kNewTrue:
    case op::kNewFalse:
    case op::kMark:
    case op::kPop:
    case op::kPopMark:
    case op::kDup:
    case op::kEmptyList:
    case op::kEmptyDict:
    case op::kEmptyTuple:
    case op::kAppend:
    case op::kAppends:
    case op::kList:
    case op::kTuple:
    case op::kTuple1:
    case op::kTuple2:
    case op::kTuple3:
    case op::kDict:
    case op::kSetItem:
    case op::kSetItems:
    case op::kMemoize: return true;
    case op::kGet: {
      const auto text = in.line();
      std::int64_t index = 0;
      if (!text || !decode_decimal(*text, false, index).empty()) return false;
      fetched.insert(static_cast<std::uint64_t>(index));
      return true;
    }
    case op::kBinGet:
    case op::kLongBinGet: {
      const auto index = le(in, code == op::kBinGet ? 1 : 4);
      if (!index) return false;
      fetched.insert(*index);
      return true;
    }
    default: return false;  // STOP, refused or unknown
  }
}

// Steps over the opcodes of `w` whose arguments lie wholly inside it and have a fixed or one-byte
// length (nearly all of a snapshot's), recording GETs as step_over does; returns the bytes
// passed. Stops before anything else, which step_over then takes.
std::size_t step_over_window(std::string_view w, IndexSet& fetched) {
  std::size_t p = 0;
  const std::size_t end = w.size() < 16 ? 0 : w.size() - 16;  // room for any fixed-size argument
  auto at = [&](std::size_t i) { return static_cast<unsigned char>(w[i]); };
  while (p < end) {
    switch (at(p)) {
      case op::kBinGet:
        fetched.insert(at(p + 1));
        p += 2;
        continue;
      case op::kLongBinGet:
        fetched.insert(at(p + 1) | at(p + 2) << 8 | at(p + 3) << 16 | std::uint64_t{at(p + 4)} << 24);
        p += 5;
        continue;
      case op::kMemoize:
      case op::kMark:
      case op::kNone:
      case op::kNewTrue:
      case op::kNewFalse:
      case op::kEmptyList:
      case op::kEmptyDict:
      case op::kEmptyTuple:
      case op::kAppend:
      case op::kAppends:
      case op::kSetItem:
      case op::kSetItems:
      case op::kTuple1:
      case op::kTuple2:
      case op::kTuple3: p += 1; continue;
      case op::kBinInt1:
      case op::kBinPut: p += 2; continue;
      case op::kBinInt2: p += 3; continue;
      case op::kBinInt:
      case op::kLongBinPut: p += 5; continue;
      case op::kLong1:
      case op::kShortBinUnicode:
      case op::kShortBinString:
      case op::kShortBinBytes:
        if (p + 2 + at(p + 1) > w.size()) return p;
        p += 2 + at(p + 1);
        continue;
      default: return p;
    }
  }
  return p;
}

// The first pass: every memo index a GET reads. Reads the input to its end.
IndexSet fetched_indices(Input& in) {
  IndexSet fetched;
  for (;;) {
    // Read more only when the window is nearly used up: a refill moves what is left to its front.
    std::string_view w = in.buffered();
    if (w.size() < 64) w = in.peek(Input::kChunk);
    in.advance(step_over_window(w, fetched));
    if (!in.has(1) || !step_over(in, in.byte(), fetched)) break;
  }
  in.drain();
  fetched.freeze();
  return fetched;
}

}  // namespace
}  // namespace detail

const ValuePtr& taken() {
  static const ValuePtr placeholder = std::make_shared<const Value>();
  return placeholder;
}

ValuePtr stream(std::string_view bytes, const std::string& name, MemoryCap& memory, ItemSink& sink) {
  detail::Input scan(bytes);
  const detail::IndexSet fetched = detail::fetched_indices(scan);
  detail::Input in(bytes);
  return detail::read_streaming(in, name, memory, fetched, sink);
}

ValuePtr stream_file(const std::string& path, std::uint64_t max_bytes, MemoryCap& memory, ItemSink& sink) {
  auto open = [&] {
    auto file = std::make_unique<CappedInput>(path, max_bytes, "");
    if (!file->is_open()) throw Error(fmt::format("{}: {}", path, file->problem()));
    return file;
  };
  std::uint64_t size = 0;
  detail::IndexSet fetched;
  {
    const auto file = open();
    detail::Input scan(*file, std::nullopt, memory, path);
    fetched = detail::fetched_indices(scan);
    size = scan.size();
  }
  const auto file = open();
  detail::Input in(*file, size, memory, path);
  return detail::read_streaming(in, path, memory, fetched, sink);
}

}  // namespace coopsim::pickle
