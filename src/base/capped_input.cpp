// The capped zlib reader behind every input file (capped_input.hpp).
#include "coopsim/base/capped_input.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>

#include "coopsim/base/limits.hpp"

namespace coopsim {

CappedInput::CappedInput(const std::string& path, std::uint64_t max_bytes, std::string_view what)
    : path_(path), max_bytes_(max_bytes) {
  errno = 0;
  file_ = gzopen(path.c_str(), "rb");
  if (file_ == nullptr) {
    const int err = errno;
    problem_ = fmt::format("cannot open{}{}: {}", what.empty() ? "" : " ", what,
                           err != 0 ? std::strerror(err) : "out of memory");
    return;
  }
  gzbuffer(file_, 1 << 17);
}

CappedInput::~CappedInput() {
  if (file_ != nullptr) gzclose_r(file_);
}

std::size_t CappedInput::read(char* buf, std::size_t n) {
  if (file_ == nullptr || over_ || !problem_.empty()) return 0;
  const int got = gzread(file_, buf, static_cast<unsigned>(n));
  if (got <= 0) {
    record_problem();  // a truncated or corrupt stream ends the reads early
    return 0;
  }
  auto usable = static_cast<std::uint64_t>(got);
  if (usable > max_bytes_ - total_) {
    usable = max_bytes_ - total_;
    over_ = true;
  }
  total_ += usable;
  return static_cast<std::size_t>(usable);
}

std::string CappedInput::cap_problem() const { return limit_problem(max_bytes_, "bytes of input", "max_input_bytes"); }

void CappedInput::record_problem() {
  int err = Z_OK;
  const char* msg = gzerror(file_, &err);
  if (err == Z_OK || err == Z_STREAM_END) return;
  if (err == Z_BUF_ERROR) {
    problem_ = "gzip stream is truncated (unexpected end of compressed data)";
  } else if (err == Z_ERRNO) {
    problem_ = fmt::format("read error: {}", std::strerror(errno));
  } else {
    std::string_view why = msg != nullptr ? msg : "unknown error";
    // zlib prefixes its messages with the file name.
    if (const std::string prefix = path_ + ": "; why.substr(0, prefix.size()) == prefix)
      why.remove_prefix(prefix.size());
    problem_ = fmt::format("gzip stream is corrupt: {}", why);
  }
}

}  // namespace coopsim
