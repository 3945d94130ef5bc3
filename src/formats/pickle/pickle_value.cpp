// pickle::Value members, Python's dict-key hashing and equality, and reading a pickle file
// (plain or gzip, told apart by zlib from the magic bytes).
#include <fmt/format.h>

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "coopsim/base/capped_input.hpp"
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

[[noreturn]] void file_error(const std::string& path, const std::string& problem) {
  throw Error(fmt::format("{}: {}", path, problem));
}

}  // namespace

ValuePtr parse_file(const std::string& path, std::uint64_t max_bytes, MemoryCap& memory) {
  CappedInput in(path, max_bytes, "");
  if (!in.is_open()) file_error(path, in.problem());
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  std::string bytes;
  for (;;) {
    const std::size_t have = bytes.size();
    // The chunk is counted before it is read; a growing string copies itself.
    if ((bytes.capacity() < have + kChunk && !memory.fits(have)) || !memory.add(kChunk)) {
      file_error(path, memory.problem());
    }
    bytes.resize(have + kChunk);
    const std::size_t n = in.read(bytes.data() + have, kChunk);
    bytes.resize(have + n);
    if (in.over_cap()) file_error(path, in.cap_problem());
    if (n == 0) break;
    if (bytes.size() > kMaxInputBytes) {
      file_error(path, fmt::format("more than {} MiB of pickle data; refusing", kMaxInputBytes >> 20));
    }
  }
  // a truncated or corrupt stream ends the reads early
  if (!in.problem().empty()) file_error(path, in.problem());
  return parse(bytes, path, memory);
}

ValuePtr parse_file(const std::string& path, std::uint64_t max_bytes) {
  MemoryCap memory(Limits::default_max_memory());
  return parse_file(path, max_bytes, memory);
}

}  // namespace coopsim::pickle
