// The one reader of input files: zlib (gzip or plain, told apart from the magic bytes), at most
// limits.max_input_bytes decompressed bytes. Every reader of a trace, DTR log, Kineto / ET JSON or
// pickle goes through it, so the cap and the wording of stream problems are the same everywhere;
// each reader only adds where (file:line) the problem is reported.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "coopsim/base/byte_buffer.hpp"

struct z_stream_s;

namespace coopsim {

class CappedInput {
 public:
  // Opens `path`. On failure is_open() is false and problem() is "cannot open <what>: <reason>"
  // ("cannot open: <reason>" for an empty `what`).
  CappedInput(const std::string& path, std::uint64_t max_bytes, std::string_view what);
  CappedInput(const CappedInput&) = delete;
  CappedInput& operator=(const CappedInput&) = delete;
  ~CappedInput();

  [[nodiscard]] bool is_open() const { return fd_ >= 0; }
  // Reads up to `n` bytes into `buf` and returns how many. 0 means no more input: the end of the
  // file, a zlib problem (problem() is set), or the cap (over_cap() is set). A read that crosses
  // the cap returns the bytes before it and sets over_cap(); the caller reports the cap at the
  // first byte past it, after handling those before, so where it is reported does not depend on
  // the chunk size.
  std::size_t read(char* buf, std::size_t n);
  [[nodiscard]] bool over_cap() const { return over_; }
  // "" while the stream is sound; otherwise what went wrong: "gzip stream is truncated
  // (unexpected end of compressed data)" (also for a member cut anywhere, even within its first
  // bytes), "gzip stream is corrupt: <zlib's reason>" (also "trailing bytes after the last member
  // are not a gzip member"), "read error: <reason>", or the open failure. A gzip file may hold
  // several members, read one after the other, as gzip -d does; nothing else may follow them.
  [[nodiscard]] const std::string& problem() const { return problem_; }
  // "more than N bytes of input (limits.max_input_bytes)"
  [[nodiscard]] std::string cap_problem() const;
  [[nodiscard]] std::uint64_t total() const { return total_; }  // decompressed bytes handed out

 private:
  struct StreamDeleter {
    void operator()(z_stream_s* s) const;
  };
  std::size_t read_raw(char* buf, std::size_t n);  // plain files; 0 at the end or on an error
  std::size_t inflate_some(char* buf, std::size_t n);
  bool refill();  // more compressed bytes after the unread ones; false at the end or on an error
  // One read(2) of up to n bytes (retried on EINTR): sets eof_ at the end, problem_ on an error
  // (then 0).
  std::size_t read_fd(void* buf, std::size_t n);

  std::string path_;
  int fd_ = -1;
  bool gzip_ = false;
  bool done_ = false;       // the end of the input was reached cleanly
  bool in_member_ = false;  // between a gzip member's header and its end
  bool eof_ = false;        // the file has no more bytes
  std::unique_ptr<z_stream_s, StreamDeleter> z_;
  UninitVector<unsigned char> in_;  // compressed bytes; z_->next_in points into it
  std::uint64_t max_bytes_;
  std::uint64_t total_ = 0;
  bool over_ = false;
  std::string problem_;
};

}  // namespace coopsim
