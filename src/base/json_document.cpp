// One strict parser for whole JSON documents (coopsim/base/json_document.hpp): nlohmann's
// parser with a callback that refuses a key repeated in one object, fed through an iterator that
// remembers how far the parser has read, so that the duplicate is reported at its line.
#include "coopsim/base/json_document.hpp"

#include <cstddef>
#include <iterator>
#include <string>
#include <unordered_set>
#include <vector>

#include "coopsim/base/error.hpp"
#include "coopsim/base/text.hpp"

namespace coopsim {
namespace {

// A `const char*` that records, in *read, the last character the parser took. nlohmann's lexer
// reads a string token up to its closing quote and no further, so when the parser reports a key,
// *read is that key's closing quote.
class ReadingIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  ReadingIterator(const char* p, const char** read) : p_(p), read_(read) {}
  const char& operator*() const {
    *read_ = p_;
    return *p_;
  }
  ReadingIterator& operator++() {
    ++p_;
    return *this;
  }
  ReadingIterator operator++(int) {
    ReadingIterator old = *this;
    ++p_;
    return old;
  }
  bool operator==(const ReadingIterator& o) const { return p_ == o.p_; }
  bool operator!=(const ReadingIterator& o) const { return p_ != o.p_; }

 private:
  const char* p_;
  const char** read_;
};

struct DuplicateKey {
  std::string key;
  std::size_t offset;
};

template <class Json>
Json parse_document(std::string_view text, const std::string& source, std::uint64_t first_line) {
  const auto line_at = [&](std::size_t offset) { return first_line - 1 + line_of_offset(text, offset); };
  const char* read = text.data();
  std::vector<std::unordered_set<std::string>> keys;  // one set per open object
  const typename Json::parser_callback_t on_event = [&](int, typename Json::parse_event_t event, Json& parsed) {
    using E = typename Json::parse_event_t;
    if (event == E::object_start) {
      keys.emplace_back();
    } else if (event == E::object_end) {
      keys.pop_back();
    } else if (event == E::key && !keys.back().insert(parsed.template get<std::string>()).second) {
      throw DuplicateKey{parsed.template get<std::string>(), static_cast<std::size_t>(read - text.data())};
    }
    return true;
  };
  try {
    return Json::parse(ReadingIterator(text.data(), &read), ReadingIterator(text.data() + text.size(), &read),
                       on_event);
  } catch (const DuplicateKey& d) {
    throw InputError(source, line_at(d.offset), "duplicate key " + quote_excerpt(d.key));
  } catch (const typename Json::parse_error& e) {
    std::string msg = e.what();
    if (auto p = msg.find("syntax error"); p != std::string::npos) msg = msg.substr(p);
    throw InputError(source, line_at(e.byte == 0 ? 0 : e.byte - 1), "invalid JSON: " + one_line(msg));
  } catch (const typename Json::out_of_range& e) {  // InputError cuts the quoted token (cut_last_read)
    // A number beyond a double (1e999): the line where that literal first appears.
    const auto [msg, at] = locate_json_overflow(e.what(), text);
    throw InputError(source, line_at(at), "invalid JSON: " + one_line(msg));
  }
}

}  // namespace

nlohmann::json parse_json_document(std::string_view text, const std::string& source, std::uint64_t first_line) {
  return parse_document<nlohmann::json>(text, source, first_line);
}

nlohmann::ordered_json parse_ordered_json_document(std::string_view text, const std::string& source,
                                                   std::uint64_t first_line) {
  return parse_document<nlohmann::ordered_json>(text, source, first_line);
}

}  // namespace coopsim
