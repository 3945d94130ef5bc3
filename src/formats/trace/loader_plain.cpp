// Trace v1 loader: the lines the writer emits most (src/formats/trace/writer.cpp), read in its exact
// bytes without the JSON parser. They give the same fields the parser would, and go through the
// same record handlers and checks; a line that differs in any byte (spacing, key order, an escape,
// a number the parser must judge) is left to the parser.
#include "loader.hpp"

namespace coopsim::trace_detail {
namespace {

// Reads a line left to right; each step consumes what it expects or reports false.
class PlainCursor {
 public:
  explicit PlainCursor(std::string_view line) : p_(line.data()), end_(line.data() + line.size()) {}

  bool literal(std::string_view s) {
    if (static_cast<std::size_t>(end_ - p_) < s.size() || std::string_view(p_, s.size()) != s) return false;
    p_ += s.size();
    return true;
  }
  // 1 to 19 digits without a leading zero: a JSON integer below 2^64, as the parser's `exact`.
  bool integer(JValue& v) {
    const char* q = p_;
    std::uint64_t value = 0;
    while (q < end_ && *q >= '0' && *q <= '9') value = value * 10 + static_cast<std::uint64_t>(*q++ - '0');
    const auto n = static_cast<std::size_t>(q - p_);
    if (n == 0 || n > 19 || (*p_ == '0' && n > 1)) return false;
    v = JValue{};
    v.type = JType::Number;
    v.integer = v.exact = true;
    v.value = value;
    v.text = std::string_view(p_, n);
    p_ = q;
    return true;
  }
  // After an opening quote: printable ASCII but '"' and '\', then the closing quote. Such a
  // string's content is its bytes.
  bool plain_string(JValue& v) {
    const char* q = p_;
    while (q < end_ && *q >= 0x20 && *q < 0x7f && *q != '"' && *q != '\\') ++q;
    if (q == end_ || *q != '"') return false;
    v = JValue{};
    v.type = JType::String;
    v.text = std::string_view(p_, static_cast<std::size_t>(q - p_));
    p_ = q + 1;
    return true;
  }
  // [N,N,...] of at least one integer, its elements appended to `elements`.
  bool integers(JValue& v, std::vector<JValue>& elements) {
    const char* const start = p_;
    if (!literal("[")) return false;
    v = JValue{};
    v.type = JType::Array;
    v.first = static_cast<std::uint32_t>(elements.size());
    do {
      if (!integer(elements.emplace_back())) return false;
    } while (literal(","));
    if (!literal("]")) return false;
    v.count = static_cast<std::uint32_t>(elements.size() - v.first);
    v.text = std::string_view(start, static_cast<std::size_t>(p_ - start));
    return true;
  }
  // [[N,N],[N,N],...] of at least one pair: the pairs' elements first, then the pairs.
  bool pairs(JValue& v, std::vector<JValue>& elements) {
    const char* const start = p_;
    if (!literal("[")) return false;
    std::vector<JValue>& pairs = pairs_;
    pairs.clear();
    do {
      JValue& pair = pairs.emplace_back();
      if (!integers(pair, elements) || pair.count != 2) return false;
    } while (literal(","));
    if (!literal("]")) return false;
    v = JValue{};
    v.type = JType::Array;
    v.first = static_cast<std::uint32_t>(elements.size());
    v.count = static_cast<std::uint32_t>(pairs.size());
    elements.insert(elements.end(), pairs.begin(), pairs.end());
    v.text = std::string_view(start, static_cast<std::size_t>(p_ - start));
    return true;
  }
  [[nodiscard]] bool at_end() const { return p_ == end_; }

 private:
  const char* p_;
  const char* end_;
  std::vector<JValue> pairs_;
};

// {"kind":"alloc","tensor":N}, {"kind":"free","tensor":N} and {"kind":"compute","op":N}.
struct PlainEvent {
  std::string_view prefix;
  Kind kind;
  Key key;
};
constexpr std::array<PlainEvent, 3> kPlainEvents{{
    {R"({"kind":"alloc","tensor":)", Kind::Alloc, kTensor},
    {R"({"kind":"free","tensor":)", Kind::Free, kTensor},
    {R"({"kind":"compute","op":)", Kind::Compute, kOp},
}};

}  // namespace

bool Loader::plain_line(std::string_view line) {
  // Every plain form starts {"kind":" and ends with '}'; the kind's first letter picks the form.
  if (line.size() < 12 || line.back() != '}' || line.substr(0, 9) != R"({"kind":")") return false;
  slot_.fill(nullptr);
  if (line[9] == 't') return plain_tensor(line);
  if (line[9] == 'o') return plain_op(line);
  for (const PlainEvent& shape : kPlainEvents) {
    if (line[9] != shape.prefix[9]) continue;
    PlainCursor in(line);
    if (!in.literal(shape.prefix) || !in.integer(plain_[1]) || !in.literal("}") || !in.at_end()) return false;
    plain_[0] = JValue{};
    plain_[0].type = JType::String;
    plain_[0].text = kKindNames[static_cast<int>(shape.kind)];
    slot_[kKind] = &plain_[0];
    slot_[shape.key] = &plain_[1];
    kind_ = shape.kind;
    plain_elements_active_ = true;
    switch (shape.kind) {
      case Kind::Alloc: on_alloc(); break;
      case Kind::Free: on_free(); break;
      default: on_compute(); break;
    }
    return true;
  }
  return false;
}

// {"kind":"tensor","id":N,"bytes":N,"role":"R"} with an optional ,"name":"S" before the brace.
bool Loader::plain_tensor(std::string_view line) {
  PlainCursor in(line);
  if (!in.literal(R"({"kind":"tensor","id":)") || !in.integer(plain_[1]) || !in.literal(R"(,"bytes":)") ||
      !in.integer(plain_[2]) || !in.literal(R"(,"role":")") || !in.plain_string(plain_[3])) {
    return false;
  }
  const bool named = in.literal(R"(,"name":")");
  if ((named && !in.plain_string(plain_[4])) || !in.literal("}") || !in.at_end()) return false;
  plain_[0] = JValue{};
  plain_[0].type = JType::String;
  plain_[0].text = kKindNames[static_cast<int>(Kind::Tensor)];
  slot_[kKind] = &plain_[0];
  slot_[kId] = &plain_[1];
  slot_[kBytes] = &plain_[2];
  slot_[kRole] = &plain_[3];
  if (named) slot_[kName] = &plain_[4];
  kind_ = Kind::Tensor;
  plain_elements_active_ = true;
  on_tensor();
  return true;
}

// {"kind":"op","id":N} then, in this order and each optional but "duration": ,"name":"S"
// ,"duration":N ,"inputs":[..] ,"outputs":[..] ,"views":[[..],..] ,"mutates":[..] ,"random":true.
bool Loader::plain_op(std::string_view line) {
  PlainCursor in(line);
  plain_elements_.clear();
  if (!in.literal(R"({"kind":"op","id":)") || !in.integer(plain_[1])) return false;
  const bool named = in.literal(R"(,"name":")");
  if ((named && !in.plain_string(plain_[2])) || !in.literal(R"(,"duration":)") || !in.integer(plain_[3])) {
    return false;
  }
  struct List {
    std::string_view prefix;
    Key key;
  };
  constexpr std::array<List, 4> kLists{{
      {R"(,"inputs":)", kInputs},
      {R"(,"outputs":)", kOutputs},
      {R"(,"views":)", kViews},
      {R"(,"mutates":)", kMutates},
  }};
  std::array<bool, kLists.size()> present{};
  for (std::size_t i = 0; i < kLists.size(); ++i) {
    present[i] = in.literal(kLists[i].prefix);
    if (present[i] && !(kLists[i].key == kViews ? in.pairs(plain_[4 + i], plain_elements_)
                                                : in.integers(plain_[4 + i], plain_elements_))) {
      return false;
    }
  }
  const bool random = in.literal(R"(,"random":true)");
  if (!in.literal("}") || !in.at_end()) return false;
  if (random) {  // the one field that is not a number, a string or an array
    plain_[0] = JValue{};
    plain_[0].type = JType::Bool;
    plain_[0].boolean = true;
    slot_[kRandom] = &plain_[0];
  }
  slot_[kId] = &plain_[1];
  if (named) slot_[kName] = &plain_[2];
  slot_[kDuration] = &plain_[3];
  for (std::size_t i = 0; i < kLists.size(); ++i) {
    if (present[i]) slot_[kLists[i].key] = &plain_[4 + i];
  }
  kind_ = Kind::Op;
  plain_elements_active_ = true;
  on_op();
  return true;
}

}  // namespace coopsim::trace_detail
