// Streaming reader for Kineto / Chrome-trace JSON: zlib (gzip or plain) -> nlohmann::json SAX.
// Only one event is held in memory at a time (the files run to tens of MB), the literal text
// of fractional "ts" / "dur" values is kept (absolute microsecond timestamps carry nanosecond
// digits that a double cannot hold), and every event knows the line it starts on, so errors
// read "file:line: problem".
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <streambuf>
#include <istream>

#include "coopsim/base/capped_input.hpp"
#include "coopsim/base/error.hpp"
#include "coopsim/base/text.hpp"
#include "coopsim/base/limits.hpp"
#include "kineto_detail.hpp"

namespace coopsim::kineto_detail {
namespace {

using json = nlohmann::json;

constexpr std::size_t kBuffer = 1 << 18;
constexpr std::size_t kMaxDepth = 256;

// The capped input (coopsim/base/capped_input.hpp) as a streambuf that counts the lines it has
// handed out.
class GzInput : public std::streambuf {
 public:
  GzInput(const std::string& path, std::uint64_t max_bytes)
      : path_(path), in_(path, max_bytes, "trace file"), buf_(kBuffer) {
    if (!in_.is_open()) throw InputError(path, 0, in_.problem());
    counted_ = buf_.data();
    setg(buf_.data(), buf_.data(), buf_.data());
  }
  GzInput(const GzInput&) = delete;
  GzInput& operator=(const GzInput&) = delete;
  ~GzInput() override = default;

  // 1-based line of the next character to be read.
  std::uint64_t line() {
    count_to(gptr());
    return lines_ + 1;
  }
  std::uint64_t bytes() const { return in_.total() - static_cast<std::uint64_t>(egptr() - gptr()); }
  // Throws the problem that ended the input early (the cap, or a damaged stream), if any.
  void check() const {
    if (!problem_.empty()) throw InputError(path_, problem_line_, problem_);
  }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    count_to(egptr());
    if (!problem_.empty()) return traits_type::eof();
    const std::size_t n = in_.read(buf_.data(), buf_.size());
    if (n == 0) {
      // the bytes before the cap are consumed: the next one is over it
      if (in_.over_cap() || !in_.problem().empty()) {
        problem_line_ = lines_ + 1;
        problem_ = in_.over_cap() ? in_.cap_problem() : in_.problem();
      }
      return traits_type::eof();
    }
    setg(buf_.data(), buf_.data(), buf_.data() + n);
    counted_ = buf_.data();
    return traits_type::to_int_type(*gptr());
  }

 private:
  void count_to(const char* p) {
    for (const char* q = counted_; q < p; ++q) lines_ += (*q == '\n');
    counted_ = p;
  }

  std::string path_;
  CappedInput in_;
  std::vector<char> buf_;
  const char* counted_ = nullptr;
  std::uint64_t lines_ = 0;
  std::string problem_;
  std::uint64_t problem_line_ = 0;
};

// SAX handler: the top-level object (or array), traceEvents, and one DOM per event. Every
// value added to a DOM is counted in limits.max_memory before it is made; an event's count is
// given back once the event has been handed on (the top-level fields are kept).
class Sax {
 public:
  Sax(const std::string& path, GzInput& in, const ArrayFormat& f, const std::function<void(RawEvent&)>& on_event,
      MemoryCap& memory)
      : path_(path), in_(in), f_(f), on_event_(on_event), memory_(memory) {}

  TopLevel finish() { return std::move(top_); }

  bool null() { return value(json(nullptr)); }
  bool boolean(bool v) { return value(json(v)); }
  bool number_integer(json::number_integer_t v) { return value(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return value(json(v)); }
  bool number_float(json::number_float_t v, const std::string& text) {
    if (stack_.size() == 1 && in_event_) {
      if (key_ == "ts") event_.ts_text = text;
      if (key_ == "dur") event_.dur_text = text;
    }
    return value(json(v));
  }
  bool string(std::string& v) { return value(json(std::move(v))); }
  bool binary(json::binary_t&) { return value(json()); }  // not produced by the text parser

  bool start_object(std::size_t) { return open(json::object()); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(std::string& k) {
    if (building()) {
      if (stack_.back()->contains(k)) fail(in_.line(), fmt::format("{}duplicate key {}", where(), quote(k)));
      key_ = std::move(k);
      return true;
    }
    // A key of the top-level object.
    if (k == f_.key ? saw_events_ : top_.fields.contains(k)) {
      fail(in_.line(), fmt::format("duplicate top-level key {}", quote(k)));
    }
    top_key_ = std::move(k);
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) {
    in_.check();  // a damaged gzip stream explains the JSON error
    if (in_.bytes() == 0) fail(1, fmt::format("empty file (expected {}: a JSON object with '{}')", f_.what, f_.key));
    // nlohmann: "[json.exception.parse_error.101] parse error at line L, column C: detail"
    std::string_view msg = ex.what();
    if (msg.rfind("[json.exception.", 0) == 0 && msg.find("] ") != std::string_view::npos) {
      msg.remove_prefix(msg.find("] ") + 2);
    }
    std::uint64_t line = in_.line();
    std::string column;
    if (msg.rfind("parse error", 0) == 0) {
      const auto colon = msg.find(": ");
      const auto at = msg.find(" at line ");
      if (at != std::string_view::npos && colon != std::string_view::npos && at < colon) {
        const std::string where(msg.substr(at + 9, colon - at - 9));  // "L, column C"
        line = std::strtoull(where.c_str(), nullptr, 10);
        if (const auto c = where.find("column "); c != std::string::npos) column = where.substr(c + 7);
      }
      if (colon != std::string_view::npos) msg.remove_prefix(colon + 2);
    }
    std::string problem =
        fmt::format("malformed JSON{}: {}", column.empty() ? "" : " at column " + column, one_line(msg));
    if (msg.find("unexpected end of input") != std::string_view::npos) problem += " (truncated file?)";
    fail(line, problem);
  }

 private:
  [[noreturn]] void fail(std::uint64_t line, const std::string& problem) const {
    throw InputError(path_, line, problem);
  }

  bool building() const { return !stack_.empty(); }
  std::string where() const { return in_event_ ? fmt::format("{}[{}]: ", f_.key, event_.index) : ""; }

  // A new value in a container being built, or at a slot of the top-level structure.
  bool value(json v) {
    if (building()) {
      insert(std::move(v));
      return true;
    }
    if (depth_ == 0)
      fail(in_.line(),
           fmt::format("not {}: the top level must be a JSON object with '{}' (got {})", f_.what, f_.key, describe(v)));
    if (in_events_)
      fail(in_.line(),
           fmt::format("{}[{}]: {} must be a JSON object (got {})", f_.key, top_.events, f_.element, describe(v)));
    if (top_key_ == f_.key) fail(in_.line(), fmt::format("field '{}' must be an array (got {})", f_.key, describe(v)));
    hold_top_field(v.is_string() ? v.get_ref<const std::string&>().size() : 0);
    top_.fields[top_key_] = std::move(v);
    return true;
  }

  // Counts a value about to be added to the DOM being built: its slot, a container's heap, a
  // member's map node and key, a string's text.
  void hold(const json& v) {
    const json& parent = *stack_.back();
    std::uint64_t bytes = memory_cost::kJsonValue;
    if (v.is_object() || v.is_array()) bytes += memory_cost::kJsonContainer;
    if (v.is_string()) bytes += memory_cost::text(v.get_ref<const std::string&>().size());
    if (parent.is_object()) bytes += memory_cost::kJsonMember + memory_cost::text(key_.size());
    if (!memory_.add(bytes)) fail(in_.line(), where() + memory_.problem());
    if (in_event_) event_bytes_ += bytes;
  }

  // Counts a top-level field (kept to the end): its map node, key and value.
  void hold_top_field(std::size_t text) {
    const std::uint64_t bytes = memory_cost::kJsonMember + memory_cost::text(top_key_.size()) +
                                memory_cost::kJsonValue + memory_cost::kJsonContainer + memory_cost::text(text);
    if (!memory_.add(bytes)) fail(in_.line(), memory_.problem());
  }

  json* insert(json v) {
    hold(v);
    json& parent = *stack_.back();
    if (parent.is_object()) return &(parent[key_] = std::move(v));
    parent.push_back(std::move(v));
    return &parent.back();
  }

  bool open(json container) {
    if (building()) {
      if (stack_.size() >= kMaxDepth)
        fail(in_.line(), fmt::format("{}nesting too deep (over {} levels)", where(), kMaxDepth));
      stack_.push_back(insert(std::move(container)));
      return true;
    }
    if (depth_ == 0) {  // the top level
      ++depth_;
      if (container.is_array()) {
        if (!f_.bare_array)
          fail(in_.line(),
               fmt::format("not {}: the top level must be a JSON object with '{}' (got an array)", f_.what, f_.key));
        top_.array_form = true;
        saw_events_ = in_events_ = true;
      }
      return true;
    }
    if (in_events_) {
      if (!container.is_object())
        fail(in_.line(),
             fmt::format("{}[{}]: {} must be a JSON object (got an array)", f_.key, top_.events, f_.element));
      in_event_ = true;
      event_bytes_ = 0;
      event_ = RawEvent{};
      event_.index = top_.events;
      event_.line = in_.line();
      event_.value = std::move(container);
      stack_.push_back(&event_.value);
      return true;
    }
    if (top_key_ == f_.key) {
      if (!container.is_array()) fail(in_.line(), fmt::format("field '{}' must be an array (got an object)", f_.key));
      ++depth_;
      saw_events_ = in_events_ = true;
      return true;
    }
    // Any other top-level field: kept whole.
    hold_top_field(0);
    root_ = std::move(container);
    stack_.push_back(&root_);
    return true;
  }

  bool close() {
    if (building()) {
      stack_.pop_back();
      if (!stack_.empty()) return true;
      if (in_event_) {
        in_event_ = false;
        ++top_.events;
        on_event_(event_);
        event_.value = json();
        memory_.remove(event_bytes_);
      } else {
        top_.fields[top_key_] = std::move(root_);
      }
      return true;
    }
    --depth_;
    if (in_events_) {  // end of traceEvents (or of the top-level array)
      in_events_ = false;
      return true;
    }
    if (depth_ == 0 && !saw_events_)
      fail(in_.line(), fmt::format("not {}: the top-level object has no '{}' array", f_.what, f_.key));
    return true;
  }

  const std::string& path_;
  GzInput& in_;
  const ArrayFormat& f_;
  const std::function<void(RawEvent&)>& on_event_;
  MemoryCap& memory_;
  std::uint64_t event_bytes_ = 0;  // counted for the event being built
  TopLevel top_;
  int depth_ = 0;  // open containers of the top-level structure (object/array, traceEvents)
  bool in_events_ = false, saw_events_ = false, in_event_ = false;
  std::string top_key_, key_;
  std::vector<json*> stack_;  // containers being built
  json root_;                 // a top-level field being built
  RawEvent event_;
};

}  // namespace

// Quotes a string for an error message: '...', control characters, quotes and backslashes as
// \xNN, shortened to about 40 bytes (the style of the trace loader's messages).
TopLevel read_kineto_json(const std::string& path, std::uint64_t max_bytes, MemoryCap& memory,
                          const std::function<void(RawEvent&)>& on_event) {
  return read_json_array(path, max_bytes, memory, ArrayFormat{}, on_event);
}

TopLevel read_json_array(const std::string& path, std::uint64_t max_bytes, MemoryCap& memory,
                         const ArrayFormat& format, const std::function<void(RawEvent&)>& on_event) {
  GzInput in(path, max_bytes);
  std::istream stream(&in);
  Sax sax(path, in, format, on_event, memory);
  const bool ok = json::sax_parse(stream, &sax, json::input_format_t::json, true, false);
  in.check();
  if (!ok) throw InputError(path, in.line(), "malformed JSON");
  return sax.finish();
}

std::string describe(const nlohmann::json& j) {
  if (j.is_string()) return quote(j.get_ref<const std::string&>());
  if (j.is_array()) return "an array";
  if (j.is_object()) return "an object";
  std::string s = j.dump();
  if (s.size() > 40) s = s.substr(0, 40) + "...";
  return s;
}

}  // namespace coopsim::kineto_detail
