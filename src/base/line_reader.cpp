// Chunked zlib line reader for trace files (see line_reader.hpp).
#include "coopsim/base/line_reader.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

#include "coopsim/base/error.hpp"
#include "coopsim/base/limits.hpp"
#include "coopsim/base/hash.hpp"

namespace coopsim {
namespace {

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose_r(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// Throws if zlib reports an error (other than a clean end of file) while reading line `line`.
void check_gz(gzFile f, const std::string& path, std::uint64_t line) {
  int err = Z_OK;
  const char* msg = gzerror(f, &err);
  if (err == Z_OK || err == Z_STREAM_END) return;
  if (err == Z_BUF_ERROR) throw InputError(path, line, "gzip stream is truncated (unexpected end of compressed data)");
  if (err == Z_ERRNO) throw InputError(path, line, fmt::format("read error: {}", std::strerror(errno)));
  std::string_view why = msg != nullptr ? msg : "unknown error";
  // zlib prefixes its messages with the file name.
  if (const std::string prefix = path + ": "; why.substr(0, prefix.size()) == prefix) why.remove_prefix(prefix.size());
  throw InputError(path, line, fmt::format("gzip stream is corrupt: {}", why));
}

}  // namespace

std::uint64_t LineReader::size_hint(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return 0;
  const std::streamoff size = in.tellg();
  if (size < 0) return 0;
  const auto bytes = static_cast<std::uint64_t>(size);
  unsigned char magic[2] = {0, 0};
  in.seekg(0);
  if (bytes < 18 || !in.read(reinterpret_cast<char*>(magic), 2) || magic[0] != 0x1f || magic[1] != 0x8b) return bytes;
  unsigned char trailer[4];
  in.seekg(size - 4);
  if (!in.read(reinterpret_cast<char*>(trailer), 4)) return bytes;
  const std::uint64_t isize = std::uint64_t{trailer[0]} | std::uint64_t{trailer[1]} << 8 |
                              std::uint64_t{trailer[2]} << 16 | std::uint64_t{trailer[3]} << 24;
  return std::max(isize, bytes);
}

std::uint64_t LineReader::run(LineSink& sink) {
  errno = 0;
  GzFile file(gzopen(path_.c_str(), "rb"));
  if (!file) {
    const int err = errno;
    throw InputError(path_, 0,
                     fmt::format("cannot open trace file: {}", err != 0 ? std::strerror(err) : "out of memory"));
  }
  gzbuffer(file.get(), 1 << 17);
  std::vector<char> buf(kChunk);
  std::string carry;  // a line split across chunks
  std::uint64_t line = 0;
  std::uint64_t hash = kFnvOffset;
  std::uint64_t total = 0;  // decompressed bytes so far
  auto too_long = [&] { throw InputError(path_, line + 1, fmt::format("line is longer than {} MiB", kMaxLine >> 20)); };
  for (;;) {
    const int n = gzread(file.get(), buf.data(), static_cast<unsigned>(buf.size()));
    if (n < 0) check_gz(file.get(), path_, line + 1);
    if (n == 0) break;
    // Bytes past the cap are not parsed: the lines before it are, so the error (at the line
    // holding the first byte over the cap) does not depend on the chunk size.
    const bool over = static_cast<std::uint64_t>(n) > max_bytes_ - total;
    const std::size_t usable = over ? static_cast<std::size_t>(max_bytes_ - total) : static_cast<std::size_t>(n);
    total += usable;
    const char* p = buf.data();
    const char* end = p + usable;
    // The hash is computed line by line, just before each line is parsed, so that the CPU can
    // overlap its serial multiply chain with the parsing work.
    while (p < end) {
      const auto* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
      if (nl == nullptr) {
        hash = fnv1a(hash, p, static_cast<std::size_t>(end - p));
        if (carry.size() + static_cast<std::size_t>(end - p) > kMaxLine) too_long();
        carry.append(p, end);
        break;
      }
      hash = fnv1a(hash, p, static_cast<std::size_t>(nl + 1 - p));
      if (carry.empty()) {
        sink.on_line(std::string_view(p, static_cast<std::size_t>(nl - p)), ++line, false);
      } else {
        if (carry.size() + static_cast<std::size_t>(nl - p) > kMaxLine) too_long();
        carry.append(p, nl);
        sink.on_line(carry, ++line, false);
        carry.clear();
      }
      p = nl + 1;
    }
    if (over) throw InputError(path_, line + 1, limit_problem(max_bytes_, "bytes of input", "max_input_bytes"));
  }
  check_gz(file.get(), path_, line + 1);  // a truncated or corrupt stream ends the reads early
  if (!carry.empty()) sink.on_line(carry, ++line, true);
  hash_ = hash;
  return line;
}

}  // namespace coopsim
