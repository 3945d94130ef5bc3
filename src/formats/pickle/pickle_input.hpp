// The bytes a pickle reader walks: a buffer in memory, or a file read in chunks (through
// CappedInput, so gzip and limits.max_input_bytes behave as for every other input). The chunked
// form keeps one window of the file, grown only as far as one opcode's argument needs, so reading
// a pickle takes memory for its largest argument, not for the file.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "coopsim/base/capped_input.hpp"
#include "coopsim/model/memory_cap.hpp"

namespace coopsim::pickle::detail {

class Input {
 public:
  // All of `bytes`, in memory (the caller keeps them alive).
  explicit Input(std::string_view bytes) : size_(bytes.size()), window_(bytes) {}
  // `file`, read in chunks; the window's growth is counted in `memory`; `name` prefixes errors.
  // With a `size` (measured by an earlier pass), a file that ends before it is reported as
  // having changed while it was read; without one, the end is found as the reads reach it.
  Input(CappedInput& file, std::optional<std::uint64_t> size, MemoryCap& memory, std::string name);
  Input(const Input&) = delete;
  Input& operator=(const Input&) = delete;
  ~Input() {
    if (memory_ != nullptr) memory_->remove(counted_);
  }

  [[nodiscard]] std::uint64_t pos() const { return pos_; }
  // Known size only.
  [[nodiscard]] std::uint64_t size() const { return size_; }
  [[nodiscard]] std::uint64_t left() const { return size_ - pos_; }

  // Whether n (at most kChunk) more bytes exist; reads ahead when the size is not known yet.
  bool has(std::size_t n) {
    if (n <= window_.size() - at_) return true;
    if (!size_known_ && n <= left()) fill(n);
    return n <= left();
  }
  // The next byte (after has(1) or a check of left()).
  unsigned char byte() {
    if (at_ == window_.size()) fill(1);
    ++pos_;
    return static_cast<unsigned char>(window_[at_++]);
  }
  // The next n bytes (after has(n) or a check of left()); valid until the next call.
  std::string_view take(std::size_t n) {
    if (window_.size() - at_ < n) fill(n);
    const std::string_view s = window_.substr(at_, n);
    at_ += n;
    pos_ += n;
    return s;
  }
  // Up to the next n (at most kChunk) bytes, fewer only at the end, without reading past them;
  // valid until the next call.
  std::string_view peek(std::size_t n) {
    if (size_known_ && n > left()) n = static_cast<std::size_t>(left());
    if (window_.size() - at_ < n && left() > window_.size() - at_) fill(n);
    return window_.substr(at_, std::min(n, window_.size() - at_));
  }
  // The unread bytes already in memory (no reading).
  [[nodiscard]] std::string_view buffered() const { return window_.substr(at_); }
  // Passes over n bytes of what peek() or buffered() returned.
  void advance(std::size_t n) {
    at_ += n;
    pos_ += n;
  }
  // Passes over n bytes without keeping them; false (at the end) when fewer are left.
  bool skip(std::uint64_t n);
  // The bytes up to the next newline, which is consumed; nullopt (nothing consumed) when no
  // newline comes before the end.
  std::optional<std::string_view> line();
  // Reads to the end of the input; returns its size.
  std::uint64_t drain();

  static constexpr std::size_t kChunk = std::size_t{1} << 20;

 private:
  // Makes at least n unread bytes stand in the window, or (size not known) finds the end first.
  void fill(std::size_t n);

  std::uint64_t size_ = 0;  // ~0 until the end is found, when not given
  bool size_known_ = true;
  std::uint64_t pos_ = 0;    // offset of the next byte in the whole input
  std::string_view window_;  // bytes in memory; window_[at_] is the byte at pos_
  std::size_t at_ = 0;
  CappedInput* file_ = nullptr;  // chunked form only
  MemoryCap* memory_ = nullptr;
  std::string name_;
  std::string buffer_;         // the chunked form's window
  std::uint64_t counted_ = 0;  // bytes of buffer_ counted in memory_
};

}  // namespace coopsim::pickle::detail
