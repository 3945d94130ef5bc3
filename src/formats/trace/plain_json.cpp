// The trace header's JSON without nlohmann's parser (see plain_json.hpp). The value built is the
// one nlohmann::json::parse gives (nlohmann 3.11, detail/input/lexer.hpp and json_sax.hpp): an
// integer without '-' is number_unsigned and one with '-' number_integer, "-0" included; an
// object's repeated key keeps its last value; white space is space, tab, CR and LF.
#include "plain_json.hpp"

#include <cstdint>
#include <set>
#include <string>

namespace coopsim::trace_detail {
namespace {

class PlainJson {
 public:
  PlainJson(std::string_view text, int max_depth)
      : p_(text.data()), end_(text.data() + text.size()), max_depth_(max_depth) {}

  bool top_object(nlohmann::json& out) {
    skip_ws();
    if (p_ == end_ || *p_ != '{') return false;
    std::set<std::string_view> keys;  // a repeated top-level key is the strict parser's error
    if (!object(out, 1, &keys)) return false;
    skip_ws();
    return p_ == end_;
  }

 private:
  void skip_ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\r' || *p_ == '\n')) ++p_;
  }
  bool take(char c) {
    skip_ws();
    if (p_ == end_ || *p_ != c) return false;
    ++p_;
    return true;
  }

  bool value(nlohmann::json& out, int depth) {
    skip_ws();
    if (p_ == end_) return false;
    switch (*p_) {
      case '{': return object(out, depth + 1, nullptr);
      case '[': return array(out, depth + 1);
      case '"': {
        std::string_view s;
        if (!string(s)) return false;
        out = std::string(s);
        return true;
      }
      case 't': return literal("true", out, true);
      case 'f': return literal("false", out, false);
      case 'n': return literal("null", out, nullptr);
      default: return number(out);
    }
  }

  template <class T>
  bool literal(std::string_view word, nlohmann::json& out, T v) {
    if (static_cast<std::size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word) return false;
    p_ += word.size();
    out = v;
    return true;
  }

  // -?(0|[1-9][0-9]{0,17}), not followed by a fraction or an exponent.
  bool number(nlohmann::json& out) {
    const bool negative = *p_ == '-';
    const char* q = negative ? p_ + 1 : p_;
    const char* const digits = q;
    std::uint64_t v = 0;
    while (q < end_ && *q >= '0' && *q <= '9') v = v * 10 + static_cast<std::uint64_t>(*q++ - '0');
    const auto n = q - digits;
    if (n == 0 || n > 18 || (*digits == '0' && n > 1)) return false;
    if (q < end_ && (*q == '.' || *q == 'e' || *q == 'E')) return false;
    p_ = q;
    if (negative) {
      out = -static_cast<std::int64_t>(v);
    } else {
      out = v;
    }
    return true;
  }

  // At '"': printable ASCII but '"' and '\', then the closing quote.
  bool string(std::string_view& out) {
    const char* q = ++p_;
    while (q < end_ && *q >= 0x20 && *q < 0x7f && *q != '"' && *q != '\\') ++q;
    if (q == end_ || *q != '"') return false;
    out = std::string_view(p_, static_cast<std::size_t>(q - p_));
    p_ = q + 1;
    return true;
  }

  bool array(nlohmann::json& out, int depth) {
    if (depth > max_depth_) return false;
    ++p_;  // '['
    out = nlohmann::json::array();
    auto& elements = out.get_ref<nlohmann::json::array_t&>();
    skip_ws();
    if (p_ < end_ && *p_ == ']') {
      ++p_;
      return true;
    }
    do {
      if (!value(elements.emplace_back(), depth)) return false;
    } while (take(','));
    return take(']');
  }

  bool object(nlohmann::json& out, int depth, std::set<std::string_view>* keys) {
    if (depth > max_depth_) return false;
    ++p_;  // '{'
    out = nlohmann::json::object();
    auto& members = out.get_ref<nlohmann::json::object_t&>();
    skip_ws();
    if (p_ < end_ && *p_ == '}') {
      ++p_;
      return true;
    }
    do {
      skip_ws();
      std::string_view key;
      if (p_ == end_ || *p_ != '"' || !string(key) || !take(':')) return false;
      if (keys != nullptr && !keys->insert(key).second) return false;
      if (!value(members[std::string(key)], depth)) return false;
    } while (take(','));
    return take('}');
  }

  const char* p_;
  const char* end_;
  int max_depth_;
};

}  // namespace

std::optional<nlohmann::json> parse_plain_json_object(std::string_view line, int max_depth) {
  nlohmann::json out;
  if (!PlainJson(line, max_depth).top_object(out)) return std::nullopt;
  return out;
}

}  // namespace coopsim::trace_detail
