// The memory one input may make a reader hold: limits.max_memory (docs/limits.md, "Memory
// cap"). The count caps (max_tensors, max_events, ...) bound an input's size, but at their
// defaults they allow more memory than a machine has (500 M events alone are 16 GB), and small
// inputs can describe large data (a gzip bomb, a pickle whose memo references expand). So every
// reader counts the bytes it keeps as they grow, with the per-unit costs of memory_cost below,
// and refuses the input with one line ("more than N bytes of memory (limits.max_memory)")
// before an allocation would take it past the cap. The counts are estimates of the
// allocations (element sizes plus heap text), deterministic, so the refusal point does not
// depend on the allocator; docs/limits.md lists them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "coopsim/base/error.hpp"
#include "coopsim/model/trace.hpp"

namespace coopsim {

class MemoryCap {
 public:
  explicit MemoryCap(std::uint64_t limit) noexcept : limit_(limit) {}

  // Counts `bytes` more as held. False, counting nothing, when the total would pass the limit.
  [[nodiscard]] bool add(std::uint64_t bytes) noexcept {
    if (bytes > limit_ - used_) return false;
    used_ += bytes;
    return true;
  }
  // Bytes no longer held (a buffer freed); never below zero.
  void remove(std::uint64_t bytes) noexcept { used_ -= bytes < used_ ? bytes : used_; }
  // Whether `bytes` more fit for a moment, without counting them (the copy a vector makes
  // while it grows, a line's parse).
  [[nodiscard]] bool fits(std::uint64_t bytes) const noexcept { return bytes <= limit_ - used_; }
  // Whether appending one element to `v` fits: a full vector moves its elements to a new
  // buffer while the old one still exists.
  template <class T>
  [[nodiscard]] bool fits_append(const std::vector<T>& v) const noexcept {
    return v.size() < v.capacity() || fits(v.size() * sizeof(T));
  }
  // Counts `bytes` for an element about to be appended to `v`: false when they, or the copy
  // `v` makes if it must grow, do not fit.
  template <class T>
  [[nodiscard]] bool add_append(const std::vector<T>& v, std::uint64_t bytes) noexcept {
    return fits_append(v) && add(bytes);
  }
  [[nodiscard]] std::uint64_t used() const noexcept { return used_; }
  [[nodiscard]] std::uint64_t limit() const noexcept { return limit_; }
  // "more than N bytes of memory (limits.max_memory)": the problem text of an exceeded cap.
  [[nodiscard]] std::string problem() const;

 private:
  std::uint64_t limit_;
  std::uint64_t used_ = 0;  // never above limit_
};

// What a reader throws when an allocation fails before its cap `limit` is reached (the
// machine has less free memory than limits.max_memory assumes), so that the user gets one line
// naming the file and the key instead of an internal error.
Error out_of_memory(const std::string& file, std::uint64_t limit);

// Bytes counted for the parts of a trace being built, by the loader and every importer.
namespace memory_cost {

// A std::string's heap buffer for `n` bytes of text: none within the small-string buffer.
constexpr std::uint64_t text(std::uint64_t n) { return n > 15 ? n + 1 : 0; }
inline constexpr std::uint64_t kEvent = sizeof(TraceEvent);
std::uint64_t tensor(const TensorInfo& t);
std::uint64_t op(const OpInfo& o);
inline std::uint64_t label(std::string_view s) { return sizeof(std::string) + text(s.size()); }
std::uint64_t segment(const InitialSegment& s);
// What a loaded trace holds by these costs (events, tensors, ops, labels, segments; saturating):
// a sweep, which keeps all its traces at once, loads each within what the ones before it left.
std::uint64_t trace(const Trace& t);
// The trace loader's own state per op and per tensor besides the trace: the id map at its peak
// (6 slots of 16 bytes per id while it rehashes) and the definition line; for tensors also the
// liveness (24), the view-base flag and the op-membership marks.
inline constexpr std::uint64_t kLoaderOp = std::uint64_t{6} * 16 + sizeof(std::uint64_t);
inline constexpr std::uint64_t kLoaderTensor = kLoaderOp + 24 + 1 + 2 * sizeof(std::uint32_t);
// Per byte of the longest line (its parse buffers are kept): the line itself (it may span read
// chunks), its fields, its array elements and their per-depth staging (a value of at most 40
// bytes per 2 bytes of "0,", twice), and the elements of its plain reading (once more).
inline constexpr std::uint64_t kLoaderLine = 64;
inline constexpr std::uint64_t kMapNode = 64;  // a std::map node besides its key's text
// A JSON document parsed whole (nlohmann::json DOM), per byte of its text, at worst: "[{},{},"
// gives a 16-byte value (vectors grow to twice their size) and a 64-byte empty object per
// 3 bytes of text.
inline constexpr std::uint64_t kJsonPerTextByte = 32;
// One value added to a DOM as a SAX parser reads it: its slot (with the vector's slack), and
// the heap of a container or of a member's map node.
inline constexpr std::uint64_t kJsonValue = 32;
inline constexpr std::uint64_t kJsonContainer = 64;
inline constexpr std::uint64_t kJsonMember = 96;

}  // namespace memory_cost

}  // namespace coopsim
