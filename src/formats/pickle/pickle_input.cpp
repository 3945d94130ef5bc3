// Chunked reading of a pickle (see pickle_input.hpp).
#include "pickle_input.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "coopsim/base/error.hpp"

namespace coopsim::pickle::detail {

Input::Input(CappedInput& file, std::optional<std::uint64_t> size, MemoryCap& memory, std::string name)
    : size_(size.value_or(~std::uint64_t{0})),
      size_known_(size.has_value()),
      file_(&file),
      memory_(&memory),
      name_(std::move(name)) {}

bool Input::skip(std::uint64_t n) {
  if (size_known_ && n > left()) return false;
  while (n > 0) {
    if (at_ == window_.size()) {
      if (left() == 0) return false;
      fill(1);
      if (at_ == window_.size()) return false;  // the end, found just now
    }
    const std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(n, window_.size() - at_));
    at_ += k;
    pos_ += k;
    n -= k;
  }
  return true;
}

std::uint64_t Input::drain() {
  while (!size_known_) {
    pos_ += window_.size() - at_;
    at_ = window_.size();
    fill(1);
  }
  pos_ = size_;
  at_ = window_.size();
  return size_;
}

std::optional<std::string_view> Input::line() {
  std::size_t searched = 0;  // unread bytes already searched
  for (;;) {
    const std::size_t unread = window_.size() - at_;
    const void* nl = std::memchr(window_.data() + at_ + searched, '\n', unread - searched);
    if (nl != nullptr) {
      const auto n = static_cast<std::size_t>(static_cast<const char*>(nl) - (window_.data() + at_));
      const std::string_view s = window_.substr(at_, n);
      at_ += n + 1;
      pos_ += n + 1;
      return s;
    }
    if (unread >= left()) return std::nullopt;
    searched = unread;
    fill(static_cast<std::size_t>(std::min<std::uint64_t>(unread + kChunk, left())));
    if (window_.size() - at_ == unread) return std::nullopt;  // the end, found just now
  }
}

void Input::fill(std::size_t n) {
  if (file_ == nullptr) throw Error(fmt::format("{}: internal: read past the end of the input", name_));
  const std::size_t unread = window_.size() - at_;
  // A chunk at a time, and as much as the caller needs in one piece.
  const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(std::max(n, kChunk), left()));
  if (want > counted_) {
    // The old window lives on while the new one is filled.
    if (!memory_->fits(counted_) || !memory_->add(want - counted_)) {
      throw Error(fmt::format("{}: {}", name_, memory_->problem()));
    }
    counted_ = want;
    std::string grown;
    grown.reserve(want);
    grown.assign(window_.substr(at_));
    buffer_ = std::move(grown);
  } else {
    std::memmove(buffer_.data(), window_.data() + at_, unread);
    buffer_.resize(unread);
  }
  while (buffer_.size() < want) {
    const std::size_t have = buffer_.size();
    buffer_.resize(want);
    const std::size_t got = file_->read(buffer_.data() + have, want - have);
    buffer_.resize(have + got);
    if (got > 0) continue;
    if (!file_->problem().empty()) throw Error(fmt::format("{}: {}", name_, file_->problem()));
    if (file_->over_cap()) throw Error(fmt::format("{}: {}", name_, file_->cap_problem()));
    if (size_known_) throw Error(fmt::format("{}: the file changed while it was read", name_));
    size_known_ = true;
    size_ = pos_ + buffer_.size();
    break;
  }
  window_ = buffer_;
  at_ = 0;
}

}  // namespace coopsim::pickle::detail
