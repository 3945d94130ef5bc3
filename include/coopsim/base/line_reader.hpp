// Reads a trace file (or trace text held in memory) line by line through zlib (gzip or plain, detected from the magic bytes)
// in fixed-size chunks, hashing the decompressed bytes (FNV-1a 64, coopsim/base/hash.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace coopsim {

// Receives every line (without its newline). `number` is 1-based and counts blank lines too;
// `no_newline` marks a final line that ended without a newline.
class LineSink {
 public:
  virtual void on_line(std::string_view line, std::uint64_t number, bool no_newline) = 0;

 protected:
  ~LineSink() = default;
};

// Throws InputError("path:line: problem") for an unreadable file (line 0), a line over kMaxLine
// bytes, more than `max_bytes` decompressed bytes (limits.max_input_bytes), or a damaged or
// truncated gzip stream (at the line being read).
class LineReader {
 public:
  static constexpr std::size_t kChunk = 1 << 18;                  // bytes per gzread
  static constexpr std::size_t kMaxLine = std::size_t{64} << 20;  // longest accepted line

  LineReader(std::string path, std::uint64_t max_bytes) : path_(std::move(path)), max_bytes_(max_bytes) {}
  // Reads plain text held in memory instead of a file; `name` stands for the path in errors.
  // The text must outlive run().
  LineReader(std::string name, std::string_view text, std::uint64_t max_bytes)
      : path_(std::move(name)), max_bytes_(max_bytes), text_(text) {}
  // Feeds every line to `sink`; returns the number of lines read.
  std::uint64_t run(LineSink& sink);
  [[nodiscard]] std::uint64_t hash() const { return hash_; }
  // The decompressed size of the file, as far as it can be known before reading it: its size,
  // or for gzip the larger of its size and the trailer's ISIZE (the last member's length mod
  // 2^32). 0 when the file cannot be read. Only a hint for reserving memory.
  [[nodiscard]] static std::uint64_t size_hint(const std::string& path);

 private:
  std::string path_;
  std::uint64_t max_bytes_;
  std::optional<std::string_view> text_;
  std::uint64_t hash_ = 0;
};

}  // namespace coopsim
