// Chunked zlib line reader for trace files (see line_reader.hpp).
#include "coopsim/base/line_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <vector>

#include "coopsim/base/byte_buffer.hpp"
#include "coopsim/base/capped_input.hpp"
#include "coopsim/base/error.hpp"
#include "coopsim/base/limits.hpp"
#include "coopsim/base/hash.hpp"

namespace coopsim {
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

namespace {

// Splits chunks into lines for a sink: hashes each line just before it is parsed (so that the CPU
// can overlap its serial multiply chain with the parsing work) and carries a line split across
// chunks.
class Splitter {
 public:
  Splitter(const std::string& name, LineSink& sink) : name_(name), sink_(sink) {}

  void feed(const char* p, const char* end) {
    while (p < end) {
      const auto* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
      if (nl == nullptr) {
        hash_ = fnv1a(hash_, p, static_cast<std::size_t>(end - p));
        if (carry_.size() + static_cast<std::size_t>(end - p) > LineReader::kMaxLine) too_long();
        carry_.append(p, end);
        return;
      }
      hash_ = fnv1a(hash_, p, static_cast<std::size_t>(nl + 1 - p));
      if (carry_.empty()) {
        sink_.on_line(std::string_view(p, static_cast<std::size_t>(nl - p)), ++line_, false);
      } else {
        if (carry_.size() + static_cast<std::size_t>(nl - p) > LineReader::kMaxLine) too_long();
        carry_.append(p, nl);
        sink_.on_line(carry_, ++line_, false);
        carry_.clear();
      }
      p = nl + 1;
    }
  }
  void finish() {
    if (!carry_.empty()) sink_.on_line(carry_, ++line_, true);
  }
  [[nodiscard]] std::uint64_t line() const { return line_; }
  [[nodiscard]] std::uint64_t hash() const { return hash_; }

 private:
  [[noreturn]] void too_long() const {
    throw InputError(name_, line_ + 1, fmt::format("line is longer than {} MiB", LineReader::kMaxLine >> 20));
  }
  const std::string& name_;
  LineSink& sink_;
  std::string carry_;
  std::uint64_t line_ = 0;
  std::uint64_t hash_ = kFnvOffset;
};

}  // namespace

std::uint64_t LineReader::run(LineSink& sink) {
  Splitter split(path_, sink);
  if (text_) {
    // Bytes past the cap are not parsed, as for a file: the error names the line holding the
    // first byte over it.
    const std::string_view text = *text_;
    const std::size_t usable = static_cast<std::size_t>(std::min<std::uint64_t>(text.size(), max_bytes_));
    split.feed(text.data(), text.data() + usable);
    if (usable < text.size()) {
      throw InputError(path_, split.line() + 1,
                       fmt::format("trace text is larger than {} bytes (limits.max_input_bytes)", max_bytes_));
    }
    split.finish();
    hash_ = split.hash();
    return split.line();
  }
  CappedInput in(path_, max_bytes_, "trace file");
  if (!in.is_open()) throw InputError(path_, 0, in.problem());
  UninitVector<char> buf(kChunk);
  for (;;) {
    // Bytes past the cap are not parsed: the lines before it are, so the error (at the line
    // holding the first byte over the cap) does not depend on the chunk size.
    const std::size_t usable = in.read(buf.data(), buf.size());
    if (usable == 0) break;
    split.feed(buf.data(), buf.data() + usable);
  }
  if (in.over_cap()) throw InputError(path_, split.line() + 1, in.cap_problem());
  // a truncated or corrupt stream ends the reads early
  if (!in.problem().empty()) throw InputError(path_, split.line() + 1, in.problem());
  split.finish();
  hash_ = split.hash();
  return split.line();
}

}  // namespace coopsim
