// A small, strict JSON parser for one line holding one flat JSON object (trace v1 records).
// Private to src/formats/trace. It fully validates the JSON grammar (RFC 8259, including UTF-8 and
// \u escapes), stores the top-level fields, and keeps arrays (of numbers or of arrays) as
// elements so records can read `[1,2]` and `[[8,1]]`. Nested objects are validated and kept as
// raw text only. Numbers stay as their raw text; callers convert them exactly.
#pragma once

#include "coopsim/base/error.hpp"

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace coopsim::trace_detail {

enum class JType : std::uint8_t { Null, Bool, Number, String, Array, Object };

struct JValue {
  JType type = JType::Null;
  bool boolean = false;   // Bool
  bool negative = false;  // Number: has a leading '-'
  bool integer = false;   // Number: no fraction and no exponent
  // Number: `value` holds it, a non-negative integer of at most 19 digits (which cannot
  // overflow), so that readers need not convert the text again; otherwise false and 0.
  bool exact = false;
  std::uint32_t first = 0;  // Array: index of the first element (JsonLine::element)
  std::uint32_t count = 0;  // Array: number of elements
  std::uint64_t value = 0;
  std::string_view text;  // Number: raw text; String: decoded content; Array/Object: raw text
};

struct JField {
  std::string_view key;  // decoded
  JValue value;
};

class JsonLine {
 public:
  enum class Status : std::uint8_t {
    Ok,
    Malformed,     // not JSON; error() = "<detail> at column N"
    NotObject,     // valid JSON, but not an object
    DuplicateKey,  // error() = the key
  };

  // Parses `line` (without its newline). Views returned afterwards point into `line` or into
  // this parser's scratch storage; they stay valid until the next parse().
  Status parse(std::string_view line);

  [[nodiscard]] const std::vector<JField>& fields() const { return fields_; }
  [[nodiscard]] const JValue& element(std::uint32_t i) const { return elements_[i]; }
  [[nodiscard]] const std::string& error() const { return error_; }

  static constexpr int kMaxDepth = 512;

 private:
  bool parse_value(JValue& out, int depth);
  bool parse_short_string(std::string_view& out);  // at '"': a short plain string, else parse_string
  bool parse_string(std::string_view& out);
  bool parse_string_slow(const char* start, std::string_view& out);
  bool parse_number(JValue& out);
  bool parse_array(JValue& out, int depth);
  bool parse_object_skip(int depth);
  bool parse_top_object();
  // The '{' ... '}' grammar shared by both: `member(key)` parses each member's value.
  template <class Member>
  bool parse_members(Member&& member);
  bool check_utf8();
  bool fail(const char* what);
  void skip_ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\r' || *p_ == '\n')) ++p_;
  }

  const char* begin_ = nullptr;
  const char* p_ = nullptr;
  const char* end_ = nullptr;
  std::vector<JField> fields_;
  std::vector<JValue> elements_;
  std::vector<std::vector<JValue>> stage_;  // per-depth staging of array elements
  std::deque<std::string> scratch_;         // decoded strings that contained escapes
  std::size_t scratch_used_ = 0;
  bool scratch_big_ = false;  // one of them is long: free them before the next line
  // Buffers kept from line to line up to these sizes; larger ones are freed, so that the
  // parser holds at most one line's worth (the loader counts it in limits.max_memory).
  static constexpr std::size_t kKeepStaged = 4096;       // staged elements of one depth
  static constexpr std::size_t kKeepScratch = 64 << 10;  // bytes of one decoded string
  std::string error_;
  bool duplicate_ = false;
  // The depth of nested objects being read (their arrays stage nothing).
  int skipping_ = 0;
  std::unordered_set<std::string_view> seen_keys_;  // a line with many keys: those read so far
};

// Quotes a string for an error message: '...' with control characters, quotes and backslashes
// as \xNN, shortened to about 40 bytes.
inline std::string quote(std::string_view s) { return quote_excerpt(s); }

// Renders a value for an error message: numbers as written, strings quoted with '...'
// (control characters escaped, long strings shortened), otherwise the literal or "an array"/"an
// object".
std::string describe(const JValue& v);

}  // namespace coopsim::trace_detail
