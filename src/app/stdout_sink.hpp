// std::cout's buffer when standard output is not a terminal: write(2) to descriptor 1, keeping
// the errno of the first failed write, so that `coopsim run --json > /dev/full` can end with
// "cannot write to standard output: No space left on device" (stdio reports that a write failed
// but has long lost errno by the end of the command). A terminal keeps stdio's line buffering.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <streambuf>

namespace coopsim::cli {

class StdoutSink : public std::streambuf {
 public:
  StdoutSink() { setp(buf_, buf_ + sizeof buf_); }
  StdoutSink(const StdoutSink&) = delete;
  StdoutSink& operator=(const StdoutSink&) = delete;
  // 0, or the errno of the first write that failed.
  [[nodiscard]] int error() const { return error_; }

 protected:
  int_type overflow(int_type ch) override {
    if (drain() != 0) return traits_type::eof();
    if (!traits_type::eq_int_type(ch, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(ch);
      pbump(1);
    }
    return traits_type::not_eof(ch);
  }
  int sync() override { return drain(); }

 private:
  int drain() {
    const char* p = pbase();
    int status = 0;
    while (p < pptr()) {
      const ssize_t n = ::write(STDOUT_FILENO, p, static_cast<std::size_t>(pptr() - p));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {  // what is left is lost: the command fails at the end anyway
        if (error_ == 0) error_ = n < 0 ? errno : EIO;
        status = -1;
        break;
      }
      p += n;
    }
    setp(buf_, buf_ + sizeof buf_);
    return status;
  }

  char buf_[1 << 16];
  int error_ = 0;
};

}  // namespace coopsim::cli
