// The capped zlib reader behind every input file (capped_input.hpp). gzip members are inflated
// here rather than through zlib's gzread, which ignores what follows a member when it does not
// begin with the two magic bytes (one cut byte of a second member, or any trailing garbage): here
// every byte of the file is either in a member or refused.
#include "coopsim/base/capped_input.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "coopsim/base/limits.hpp"

namespace coopsim {
namespace {

constexpr std::size_t kInputChunk = std::size_t{1} << 17;
constexpr unsigned char kMagic0 = 0x1f, kMagic1 = 0x8b;
constexpr const char* kTruncated = "gzip stream is truncated (unexpected end of compressed data)";

}  // namespace

void CappedInput::StreamDeleter::operator()(z_stream_s* s) const {
  inflateEnd(s);
  delete s;
}

CappedInput::CappedInput(const std::string& path, std::uint64_t max_bytes, std::string_view what)
    : path_(path), max_bytes_(max_bytes) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    problem_ = fmt::format("cannot open{}{}: {}", what.empty() ? "" : " ", what, std::strerror(errno));
    return;
  }
  // gzip when the file begins with the magic bytes, else plain bytes (as gzopen tells them apart).
  // Only those two bytes are read to tell: a plain file's bytes then go straight into the
  // caller's buffer, not through in_ as well (a second copy, and a second set of fresh pages).
  unsigned char magic[2] = {0, 0};
  std::size_t probed = 0;
  while (probed < 2 && !eof_ && problem_.empty()) probed += read_fd(magic + probed, 2 - probed);
  if (!problem_.empty()) return;
  in_.assign(magic, magic + probed);
  gzip_ = probed == 2 && magic[0] == kMagic0 && magic[1] == kMagic1;
  if (!gzip_) return;
  refill();
  if (!problem_.empty()) return;
  auto* z = new z_stream_s{};
  if (inflateInit2(z, 16 + MAX_WBITS) != Z_OK) {  // gzip only
    delete z;
    problem_ = "out of memory";
    return;
  }
  z_.reset(z);
  z_->next_in = in_.data();
  z_->avail_in = static_cast<uInt>(in_.size());
}

CappedInput::~CappedInput() {
  if (fd_ >= 0) ::close(fd_);
}

bool CappedInput::refill() {
  // Keep the bytes inflate has not taken yet, then append what the file has next.
  const std::size_t kept = z_ ? z_->avail_in : in_.size();
  if (z_ && kept > 0) std::memmove(in_.data(), z_->next_in, kept);
  in_.resize(kInputChunk);
  const std::size_t got = read_fd(in_.data() + kept, kInputChunk - kept);
  in_.resize(kept + got);
  if (z_) {
    z_->next_in = in_.data();
    z_->avail_in = static_cast<uInt>(in_.size());
  }
  return got > 0;
}

std::size_t CappedInput::read_fd(void* buf, std::size_t n) {
  ssize_t got = 0;
  do {
    got = eof_ ? 0 : ::read(fd_, buf, n);
  } while (got < 0 && errno == EINTR);
  if (got < 0) {
    problem_ = fmt::format("read error: {}", std::strerror(errno));
    return 0;
  }
  eof_ = got == 0;
  return static_cast<std::size_t>(got);
}

std::size_t CappedInput::read_raw(char* buf, std::size_t n) {
  // The bytes read while telling gzip from plain come first, then the file's next ones.
  std::size_t k = 0;
  if (!in_.empty()) {
    k = std::min(n, in_.size());
    std::memcpy(buf, in_.data(), k);
    in_.erase(in_.begin(), in_.begin() + static_cast<std::ptrdiff_t>(k));
    if (k == n || !problem_.empty()) return k;
  }
  return k + read_fd(buf + k, n - k);
}

std::size_t CappedInput::inflate_some(char* buf, std::size_t n) {
  z_->next_out = reinterpret_cast<Bytef*>(buf);
  z_->avail_out = static_cast<uInt>(n);
  while (z_->avail_out == n) {
    if (!in_member_) {
      // Between members: the end of the file, or the next member's magic bytes (two of them,
      // which may straddle a refill).
      if (z_->avail_in < 2 && !eof_) refill();
      if (!problem_.empty()) return 0;
      if (z_->avail_in == 0) {
        done_ = true;
        return 0;
      }
      if (z_->avail_in < 2 || z_->next_in[0] != kMagic0 || z_->next_in[1] != kMagic1) {
        // The first byte of a member cut after it, or bytes that no member begins with.
        problem_ = z_->avail_in == 1 && z_->next_in[0] == kMagic0
                       ? kTruncated
                       : "gzip stream is corrupt: trailing bytes after the last member are not a gzip member";
        return 0;
      }
      inflateReset(z_.get());
      in_member_ = true;
    }
    if (z_->avail_in == 0 && !eof_) refill();
    if (!problem_.empty()) return 0;
    const int ret = inflate(z_.get(), Z_NO_FLUSH);
    if (ret == Z_STREAM_END) {
      in_member_ = false;
    } else if (ret == Z_BUF_ERROR && z_->avail_in == 0 && eof_) {
      problem_ = kTruncated;  // the file ends inside a member: inflate can go no further
      return 0;
    } else if (ret == Z_DATA_ERROR) {
      problem_ = fmt::format("gzip stream is corrupt: {}", z_->msg != nullptr ? z_->msg : "compressed data error");
      return 0;
    } else if (ret == Z_MEM_ERROR) {
      problem_ = "out of memory";
      return 0;
    } else if (ret != Z_OK && ret != Z_BUF_ERROR) {
      problem_ = "gzip stream is corrupt: internal error: inflate stream corrupt";
      return 0;
    }
  }
  return n - z_->avail_out;
}

std::size_t CappedInput::read(char* buf, std::size_t n) {
  if (fd_ < 0 || over_ || done_ || !problem_.empty() || n == 0) return 0;
  const std::size_t got = gzip_ ? inflate_some(buf, n) : read_raw(buf, n);
  if (got == 0) return 0;
  auto usable = static_cast<std::uint64_t>(got);
  if (usable > max_bytes_ - total_) {
    usable = max_bytes_ - total_;
    over_ = true;
  }
  total_ += usable;
  return static_cast<std::size_t>(usable);
}

std::string CappedInput::cap_problem() const { return limit_problem(max_bytes_, "bytes of input", "max_input_bytes"); }

}  // namespace coopsim
