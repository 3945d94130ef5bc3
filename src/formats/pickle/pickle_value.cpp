// pickle::Value members, Python's dict-key hashing and equality, and reading a pickle file
// (plain or gzip, told apart by zlib from the magic bytes).
#include <fmt/format.h>
#include <zlib.h>

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "coopsim/base/limits.hpp"
#include "coopsim/base/text.hpp"
#include "pickle_detail.hpp"

namespace coopsim::pickle {

PickleError::PickleError(const std::string& name, std::uint64_t offset, const std::string& problem)
    : Error(one_line(fmt::format("{}: byte {}: {}", name, offset, problem))), offset_(offset), problem_(problem) {}

const Value* Value::get(std::string_view key) const {
  if (kind != Kind::Dict) return nullptr;
  for (const auto& [k, v] : entries) {
    if (k->kind == Kind::String && k->text == key) return v.get();
  }
  return nullptr;
}

std::string_view Value::kind_name(Kind k) {
  switch (k) {
    case Kind::None: return "None";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::Bytes: return "bytes";
    case Kind::List: return "list";
    case Kind::Tuple: return "tuple";
    case Kind::Dict: return "dict";
  }
  return "?";
}

namespace detail {
namespace {

using Kind = Value::Kind;

std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

enum Tag : std::uint64_t { kTagNone = 1, kTagNumber, kTagFloat, kTagNan, kTagString, kTagBytes, kTagTuple };

std::uint64_t tagged(Tag tag, std::uint64_t payload) { return mix(mix(tag) ^ payload); }

bool is_number(Kind k) { return k == Kind::Bool || k == Kind::Int || k == Kind::Float; }

// A float that equals some int64 exactly.
bool float_as_int(double f, std::int64_t& out) {
  constexpr double kTwo63 = 9223372036854775808.0;
  if (!(f >= -kTwo63 && f < kTwo63) || std::trunc(f) != f) return false;
  out = static_cast<std::int64_t>(f);
  return true;
}

std::int64_t int_of(const Value& v) { return v.kind == Kind::Bool ? (v.boolean ? 1 : 0) : v.integer; }

bool numbers_equal(const Value& a, const Value& b) {
  if (a.kind == Kind::Float && b.kind == Kind::Float) return a.real == b.real;
  if (a.kind != Kind::Float && b.kind != Kind::Float) return int_of(a) == int_of(b);
  const Value& f = a.kind == Kind::Float ? a : b;
  const Value& i = a.kind == Kind::Float ? b : a;
  std::int64_t as_int = 0;
  return float_as_int(f.real, as_int) && as_int == int_of(i);
}

}  // namespace

std::uint64_t hash_scalar(const Value& v) {
  switch (v.kind) {
    case Kind::Bool:
    case Kind::Int: return tagged(kTagNumber, static_cast<std::uint64_t>(int_of(v)));
    case Kind::Float: {
      std::int64_t as_int = 0;
      if (float_as_int(v.real, as_int)) return tagged(kTagNumber, static_cast<std::uint64_t>(as_int));
      if (std::isnan(v.real)) return tagged(kTagNan, 0);
      return tagged(kTagFloat, std::bit_cast<std::uint64_t>(v.real));
    }
    case Kind::String: return tagged(kTagString, std::hash<std::string_view>{}(v.text));
    case Kind::Bytes: return tagged(kTagBytes, std::hash<std::string_view>{}(v.text));
    default: return tagged(kTagNone, 0);
  }
}

std::uint64_t tuple_hash_seed(std::size_t size) { return tagged(kTagTuple, size); }

std::uint64_t hash_combine(std::uint64_t h, std::uint64_t item) { return mix(h ^ (item + (h << 6) + (h >> 2))); }

std::optional<bool> key_equal(const Value* a, const Value* b, std::uint64_t& budget) {
  std::vector<std::pair<const Value*, const Value*>> work{{a, b}};
  while (!work.empty()) {
    const auto [x, y] = work.back();
    work.pop_back();
    if (x == y) continue;
    if (budget == 0) return std::nullopt;
    --budget;
    if (is_number(x->kind) && is_number(y->kind)) {
      if (!numbers_equal(*x, *y)) return false;
      continue;
    }
    if (x->kind != y->kind) return false;
    switch (x->kind) {
      case Kind::None: continue;
      case Kind::String:
      case Kind::Bytes:
        if (x->text != y->text) return false;
        continue;
      case Kind::Tuple:
        if (x->items.size() != y->items.size()) return false;
        // Pushed in reverse so that items are compared first to last, as Python does.
        for (std::size_t i = x->items.size(); i-- > 0;) work.emplace_back(x->items[i].get(), y->items[i].get());
        continue;
      default: return false;  // list, dict: only identical objects are equal
    }
  }
  return true;
}

}  // namespace detail

namespace {

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose_r(f); }
};

[[noreturn]] void file_error(const std::string& path, const std::string& problem) {
  throw Error(fmt::format("{}: {}", path, problem));
}

void check_gz(gzFile f, const std::string& path) {
  int err = Z_OK;
  const char* msg = gzerror(f, &err);
  if (err == Z_OK || err == Z_STREAM_END) return;
  if (err == Z_BUF_ERROR) file_error(path, "gzip stream is truncated (unexpected end of compressed data)");
  if (err == Z_ERRNO) file_error(path, fmt::format("read error: {}", std::strerror(errno)));
  std::string_view why = msg != nullptr ? msg : "unknown error";
  // zlib prefixes its messages with the file name.
  if (const std::string prefix = path + ": "; why.substr(0, prefix.size()) == prefix) why.remove_prefix(prefix.size());
  file_error(path, fmt::format("gzip stream is corrupt: {}", why));
}

}  // namespace

ValuePtr parse_file(const std::string& path, std::uint64_t max_bytes, MemoryBudget& memory) {
  errno = 0;
  const std::unique_ptr<gzFile_s, GzCloser> file(gzopen(path.c_str(), "rb"));
  if (!file) {
    const int err = errno;
    file_error(path, fmt::format("cannot open: {}", err != 0 ? std::strerror(err) : "out of memory"));
  }
  gzbuffer(file.get(), 1 << 17);
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  std::string bytes;
  for (;;) {
    const std::size_t have = bytes.size();
    // The chunk is counted before it is read; a growing string copies itself.
    if ((bytes.capacity() < have + kChunk && !memory.fits(have)) || !memory.add(kChunk)) {
      file_error(path, memory.problem());
    }
    bytes.resize(have + kChunk);
    const int n = gzread(file.get(), bytes.data() + have, static_cast<unsigned>(kChunk));
    if (n < 0) check_gz(file.get(), path);
    bytes.resize(have + static_cast<std::size_t>(n > 0 ? n : 0));
    if (n <= 0) break;
    if (bytes.size() > max_bytes) file_error(path, limit_problem(max_bytes, "bytes of input", "max_input_bytes"));
    if (bytes.size() > kMaxInputBytes) {
      file_error(path, fmt::format("more than {} MiB of pickle data; refusing", kMaxInputBytes >> 20));
    }
  }
  check_gz(file.get(), path);  // a truncated or corrupt stream ends the reads early
  return parse(bytes, path, memory);
}

ValuePtr parse_file(const std::string& path, std::uint64_t max_bytes) {
  MemoryBudget memory(Limits::default_max_memory());
  return parse_file(path, max_bytes, memory);
}

}  // namespace coopsim::pickle
