// Chunked zlib line reader for trace files (see line_reader.hpp).
#include "coopsim/base/line_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <vector>

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

std::uint64_t LineReader::run(LineSink& sink) {
  CappedInput in(path_, max_bytes_, "trace file");
  if (!in.is_open()) throw InputError(path_, 0, in.problem());
  std::vector<char> buf(kChunk);
  std::string carry;  // a line split across chunks
  std::uint64_t line = 0;
  std::uint64_t hash = kFnvOffset;
  auto too_long = [&] { throw InputError(path_, line + 1, fmt::format("line is longer than {} MiB", kMaxLine >> 20)); };
  for (;;) {
    // Bytes past the cap are not parsed: the lines before it are, so the error (at the line
    // holding the first byte over the cap) does not depend on the chunk size.
    const std::size_t usable = in.read(buf.data(), buf.size());
    if (usable == 0) break;
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
  }
  if (in.over_cap()) throw InputError(path_, line + 1, in.cap_problem());
  // a truncated or corrupt stream ends the reads early
  if (!in.problem().empty()) throw InputError(path_, line + 1, in.problem());
  if (!carry.empty()) sink.on_line(carry, ++line, true);
  hash_ = hash;
  return line;
}

}  // namespace coopsim
