// Strict one-line JSON object parser for trace v1 records (see json_line.hpp).
#include "json_line.hpp"

#include <fmt/format.h>

#include <array>
#include <bit>
#include <cstring>

#include "coopsim/base/text.hpp"

namespace coopsim::trace_detail {
namespace {

constexpr bool is_digit(char c) { return c >= '0' && c <= '9'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// The bytes that end a run of plain characters in a string: the closing quote, a backslash, a
// control character or a UTF-8 lead or continuation byte.
constexpr std::array<bool, 256> kStringStop = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 256; ++c) t[static_cast<std::size_t>(c)] = c == '"' || c == '\\' || c < 0x20 || c >= 0x80;
  return t;
}();

}  // namespace

bool JsonLine::fail(const char* what) {
  error_ = fmt::format("{} at column {}", what, (p_ - begin_) + 1);
  return false;
}

JsonLine::Status JsonLine::parse(std::string_view line) {
  begin_ = p_ = line.data();
  end_ = begin_ + line.size();
  fields_.clear();
  elements_.clear();
  if (scratch_big_) {  // a long escaped string of the previous line: give its buffers back
    scratch_.clear();
    scratch_big_ = false;
  }
  scratch_used_ = 0;
  error_.clear();
  duplicate_ = false;
  skipping_ = 0;
  if (stage_.empty()) stage_.resize(kMaxDepth + 2);

  skip_ws();
  if (p_ < end_ && *p_ == '{') {
    if (!parse_top_object()) return duplicate_ ? Status::DuplicateKey : Status::Malformed;
    skip_ws();
    if (p_ != end_) {
      fail("unexpected text after the object");
      return Status::Malformed;
    }
    return Status::Ok;
  }
  JValue v;
  if (!parse_value(v, 0)) return Status::Malformed;
  skip_ws();
  if (p_ != end_) {
    fail("unexpected text after the value");
    return Status::Malformed;
  }
  return Status::NotObject;
}

template <class Member>
bool JsonLine::parse_members(Member&& member) {
  ++p_;  // '{'
  skip_ws();
  if (p_ < end_ && *p_ == '}') {
    ++p_;
    return true;
  }
  for (;;) {
    skip_ws();
    if (p_ >= end_) return fail("unexpected end of line");
    if (*p_ != '"') return fail("expected a key string");
    std::string_view key;
    if (!parse_short_string(key)) return false;
    skip_ws();
    if (p_ >= end_) return fail("unexpected end of line");
    if (*p_ != ':') return fail("expected ':' after a key");
    ++p_;
    skip_ws();
    if (!member(key)) return false;
    skip_ws();
    if (p_ >= end_) return fail("unexpected end of line");
    if (*p_ == ',') {
      ++p_;
      continue;
    }
    if (*p_ == '}') {
      ++p_;
      return true;
    }
    return fail("expected ',' or '}'");
  }
}

bool JsonLine::parse_top_object() {
  // Records have a handful of keys, checked by a linear scan; a line with many keys (hostile or
  // broken input) switches to a hash set, so that the check stays linear in the line length.
  constexpr std::size_t kLinearKeys = 16;
  auto repeated = [this](std::string_view key) {
    if (fields_.size() < kLinearKeys) {
      for (const auto& f : fields_) {
        if (f.key.size() == key.size() &&
            (key.empty() || (f.key[0] == key[0] && std::memcmp(f.key.data(), key.data(), key.size()) == 0))) {
          return true;
        }
      }
      return false;
    }
    if (fields_.size() == kLinearKeys) {
      seen_keys_.clear();
      for (const auto& f : fields_) seen_keys_.insert(f.key);
    }
    return !seen_keys_.insert(key).second;
  };
  return parse_members([this, &repeated](std::string_view key) {
    if (repeated(key)) {
      duplicate_ = true;
      error_ = quote(key);
      return false;
    }
    JField& f = fields_.emplace_back();
    f.key = key;
    return parse_value(f.value, 1);
  });
}

bool JsonLine::parse_value(JValue& out, int depth) {
  if (p_ >= end_) return fail("unexpected end of line");
  switch (*p_) {
    case '"': out.type = JType::String; return parse_short_string(out.text);
    case '{': {
      if (depth >= kMaxDepth) return fail("nesting too deep");
      const char* start = p_;
      if (!parse_object_skip(depth + 1)) return false;
      out.type = JType::Object;
      out.text = std::string_view(start, static_cast<std::size_t>(p_ - start));
      return true;
    }
    case '[': return parse_array(out, depth);
    case 't':
      if (end_ - p_ >= 4 && std::memcmp(p_, "true", 4) == 0) {
        p_ += 4;
        out.type = JType::Bool;
        out.boolean = true;
        return true;
      }
      break;
    case 'f':
      if (end_ - p_ >= 5 && std::memcmp(p_, "false", 5) == 0) {
        p_ += 5;
        out.type = JType::Bool;
        out.boolean = false;
        return true;
      }
      break;
    case 'n':
      if (end_ - p_ >= 4 && std::memcmp(p_, "null", 4) == 0) {
        p_ += 4;
        out.type = JType::Null;
        return true;
      }
      break;
    default:
      if (*p_ == '-' || is_digit(*p_)) return parse_number(out);
      break;
  }
  return fail("expected a value");
}

namespace {

// The first byte of [q, end) that ends a plain run (kStringStop), or end. Eight bytes at a time
// where the machine is little-endian: each test below flags its bytes in bit 7 exactly up to its
// first hit (a borrow may flag bytes after it), so the lowest flag of all is the first stop byte.
const char* skip_plain(const char* q, const char* end) {
  if constexpr (std::endian::native == std::endian::little) {
    constexpr std::uint64_t k01 = 0x0101010101010101ULL, k80 = 0x8080808080808080ULL;
    constexpr std::uint64_t kQuote = k01 * '"', kBackslash = k01 * '\\', kSpace = k01 * 0x20;
    while (end - q >= 8) {
      std::uint64_t x = 0;
      std::memcpy(&x, q, 8);
      const std::uint64_t quote = x ^ kQuote, backslash = x ^ kBackslash;
      const std::uint64_t stop = ((quote - k01) & ~quote) | ((backslash - k01) & ~backslash) | ((x - kSpace) & ~x) | x;
      if ((stop & k80) != 0) return q + (std::countr_zero(stop & k80) >> 3);
      q += 8;
    }
  }
  while (q < end && !kStringStop[static_cast<unsigned char>(*q)]) ++q;
  return q;
}

}  // namespace

bool JsonLine::parse_short_string(std::string_view& out) {
  // Keys and most values are a few plain bytes: read them here, one at a time, and leave anything
  // longer or not plain to parse_string, from the opening quote again.
  const char* q = p_ + 1;
  const char* const stop = end_ - q > 16 ? q + 16 : end_;  // no pointer past the line's end
  while (q < stop && !kStringStop[static_cast<unsigned char>(*q)]) ++q;
  if (q < stop && *q == '"') {
    out = std::string_view(p_ + 1, static_cast<std::size_t>(q - p_ - 1));
    p_ = q + 1;
    return true;
  }
  return parse_string(out);
}

bool JsonLine::parse_string(std::string_view& out) {
  const char* const start = p_ + 1;  // after the opening quote
  for (const char* q = start;;) {
    q = skip_plain(q, end_);
    p_ = q;
    if (q == end_) break;
    const auto c = static_cast<unsigned char>(*q);
    if (c == '"') {
      out = std::string_view(start, static_cast<std::size_t>(q - start));
      p_ = q + 1;
      return true;
    }
    if (c == '\\') return parse_string_slow(start, out);
    if (c < 0x20) return fail("control character in string");
    if (!check_utf8()) return false;  // c >= 0x80
    q = p_;
  }
  return fail("unterminated string");
}

bool JsonLine::parse_string_slow(const char* start, std::string_view& out) {
  if (scratch_used_ == scratch_.size()) scratch_.emplace_back();
  std::string& buf = scratch_[scratch_used_++];
  buf.assign(start, p_);
  while (p_ < end_) {
    const auto c = static_cast<unsigned char>(*p_);
    if (c == '"') {
      ++p_;
      out = buf;
      scratch_big_ = scratch_big_ || buf.capacity() > kKeepScratch;
      return true;
    }
    if (c == '\\') {
      ++p_;
      if (p_ >= end_) break;
      switch (*p_) {
        case '"': buf += '"'; break;
        case '\\': buf += '\\'; break;
        case '/': buf += '/'; break;
        case 'b': buf += '\b'; break;
        case 'f': buf += '\f'; break;
        case 'n': buf += '\n'; break;
        case 'r': buf += '\r'; break;
        case 't': buf += '\t'; break;
        case 'u': {
          auto hex4 = [this](std::uint32_t& v) {
            if (end_ - p_ < 4) return false;
            v = 0;
            for (int i = 0; i < 4; ++i) {
              const int h = hex_value(p_[i]);
              if (h < 0) return false;
              v = v * 16 + static_cast<std::uint32_t>(h);
            }
            p_ += 4;
            return true;
          };
          const char* esc = p_ - 1;
          ++p_;
          std::uint32_t cp = 0;
          if (!hex4(cp)) {
            p_ = esc;
            return fail("invalid \\u escape");
          }
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            std::uint32_t lo = 0;
            if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') {
              p_ = esc;
              return fail("unpaired surrogate in \\u escape");
            }
            p_ += 2;
            if (!hex4(lo) || lo < 0xDC00 || lo > 0xDFFF) {
              p_ = esc;
              return fail("unpaired surrogate in \\u escape");
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            p_ = esc;
            return fail("unpaired surrogate in \\u escape");
          }
          append_utf8(buf, cp);
          continue;
        }
        default: --p_; return fail("invalid escape in string");
      }
      ++p_;
      continue;
    }
    if (c < 0x20) return fail("control character in string");
    if (c >= 0x80) {
      const char* q = p_;
      if (!check_utf8()) return false;
      buf.append(q, p_);
      continue;
    }
    buf += static_cast<char>(c);
    ++p_;
  }
  return fail("unterminated string");
}

bool JsonLine::check_utf8() {
  const std::size_t n = utf8_length(std::string_view(p_, static_cast<std::size_t>(end_ - p_)), 0);
  if (n == 0) return fail("invalid UTF-8 in string");
  p_ += n;
  return true;
}

bool JsonLine::parse_number(JValue& out) {
  const char* start = p_;
  out.type = JType::Number;
  out.negative = false;
  out.integer = true;
  if (*p_ == '-') {
    out.negative = true;
    ++p_;
  }
  std::uint64_t value = 0;
  if (p_ < end_ && *p_ == '0') {
    ++p_;
  } else if (p_ < end_ && is_digit(*p_)) {
    const char* q = p_;
    while (q < end_ && is_digit(*q)) value = value * 10 + static_cast<std::uint64_t>(*q++ - '0');
    p_ = q;
  } else {
    p_ = start;
    return fail("invalid number");
  }
  if (p_ < end_ && *p_ == '.') {
    out.integer = false;
    ++p_;
    if (!(p_ < end_ && is_digit(*p_))) {
      p_ = start;
      return fail("invalid number");
    }
    while (p_ < end_ && is_digit(*p_)) ++p_;
  }
  if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
    out.integer = false;
    ++p_;
    if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
    if (!(p_ < end_ && is_digit(*p_))) {
      p_ = start;
      return fail("invalid number");
    }
    while (p_ < end_ && is_digit(*p_)) ++p_;
  }
  out.text = std::string_view(start, static_cast<std::size_t>(p_ - start));
  // 19 digits stay below 2^64; longer integers are converted from the text, with their check.
  out.exact = out.integer && !out.negative && out.text.size() <= 19;
  out.value = out.exact ? value : 0;
  return true;
}

bool JsonLine::parse_array(JValue& out, int depth) {
  if (depth >= kMaxDepth) return fail("nesting too deep");
  const char* start = p_;
  ++p_;  // '['
  const auto d = static_cast<std::size_t>(depth);
  stage_[d].clear();
  skip_ws();
  if (p_ < end_ && *p_ == ']') {
    ++p_;
  } else {
    for (;;) {
      skip_ws();
      JValue v;
      if (!parse_value(v, depth + 1)) return false;
      if (skipping_ == 0) stage_[d].push_back(v);  // inside a nested object: validated only
      skip_ws();
      if (p_ >= end_) return fail("unexpected end of line");
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      if (*p_ == ']') {
        ++p_;
        break;
      }
      return fail("expected ',' or ']'");
    }
  }
  out.type = JType::Array;
  out.first = static_cast<std::uint32_t>(elements_.size());
  out.count = static_cast<std::uint32_t>(stage_[d].size());
  elements_.insert(elements_.end(), stage_[d].begin(), stage_[d].end());
  // Each depth keeps its own staging buffer: a long array at every depth on successive lines
  // would otherwise keep all of them at once.
  if (stage_[d].capacity() > kKeepStaged) stage_[d] = std::vector<JValue>();
  out.text = std::string_view(start, static_cast<std::size_t>(p_ - start));
  return true;
}

bool JsonLine::parse_object_skip(int depth) {
  ++skipping_;  // arrays inside keep no elements: the object is kept as raw text only
  const bool ok = parse_members([this, depth](std::string_view) {
    JValue v;
    return parse_value(v, depth);
  });
  --skipping_;
  return ok;
}

std::string describe(const JValue& v) {
  switch (v.type) {
    case JType::Null: return "null";
    case JType::Bool: return v.boolean ? "true" : "false";
    case JType::Number: return v.text.size() > 40 ? std::string(v.text.substr(0, 40)) + "..." : std::string(v.text);
    case JType::String: return quote(v.text);
    case JType::Array: return "an array";
    case JType::Object: return "an object";
  }
  return "?";
}

}  // namespace coopsim::trace_detail
