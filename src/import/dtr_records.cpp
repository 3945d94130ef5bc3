// Record-level reading of DTR prototype logs (see dtr_records.hpp for the format's source).
// Values the writer (Logger.h: std::to_string of sizes, times and alias indices) always emits
// as decimal strings are checked to be exactly that; anything else is an error naming the line.
#include "dtr_records.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>
#include <unordered_set>
#include <utility>

#include "coopsim/base/error.hpp"
#include "coopsim/base/text.hpp"
#include "coopsim/base/limits.hpp"

namespace coopsim::dtr_detail {
namespace {

using nlohmann::json;

constexpr std::size_t kChunk = 1 << 18;                      // bytes per read
constexpr std::size_t kMaxLine = std::size_t{64} << 20;      // as the trace loader
constexpr std::uint64_t kMaxBytes = std::uint64_t{1} << 53;  // largest v1 tensor size

struct InstrName {
  std::string_view text;
  Instr instr;
};
constexpr InstrName kInstrs[] = {
    {"ANNOTATE", Instr::Annotate}, {"CONSTANT", Instr::Constant}, {"MEMORY", Instr::Memory},
    {"CALL", Instr::Call},         {"ALIAS", Instr::Alias},       {"COPY", Instr::Copy},
    {"RELEASE", Instr::Release},   {"MUTATE", Instr::Mutate},     {"COPY_FROM", Instr::CopyFrom},
};

// Decimal digits only (std::to_string output); nullopt on anything else or above `max`.
std::optional<std::uint64_t> parse_decimal(std::string_view s, std::uint64_t max) {
  if (s.empty()) return std::nullopt;
  std::uint64_t v = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    const auto d = static_cast<std::uint64_t>(c - '0');
    if (v > (max - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (const char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// Renders a JSON value for an error message.
std::string describe(const json& v) {
  if (v.is_string()) return quote(v.get_ref<const std::string&>());
  std::string text = v.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

// Parses the record fields of one JSON object. `fail` throws with the line number.
class RecordParser {
 public:
  RecordParser(const json& j, DtrRecord& out, const std::string& path) : j_(j), out_(out), path_(path) {}

  void run() {
    const auto it = j_.find("INSTRUCTION");
    if (it == j_.end()) fail("missing field 'INSTRUCTION'");
    if (!it->is_string()) fail(fmt::format("field 'INSTRUCTION' must be a string (got {})", describe(*it)));
    const auto& text = it->get_ref<const std::string&>();
    bool known = false;
    for (const auto& [name, instr] : kInstrs) {
      if (name == text) {
        out_.instr = instr;
        known = true;
      }
    }
    if (!known) {
      fail(
          fmt::format("unknown INSTRUCTION {} (expected ANNOTATE, CONSTANT, MEMORY, CALL, ALIAS, COPY, RELEASE, "
                      "MUTATE or COPY_FROM)",
                      quote(text)));
    }
    switch (out_.instr) {
      case Instr::Annotate: out_.annotation = string("ANNOTATION", false); break;
      case Instr::Constant:
      case Instr::Release: out_.name = string("NAME", true); break;
      case Instr::Memory: {
        out_.name = string("NAME", true);
        const std::string v = string("MEMORY", false);
        if (!all_digits(v)) bad_value("MEMORY", v, "a byte count in decimal digits");
        const auto bytes = parse_decimal(v, kMaxBytes);
        if (!bytes) bad_value("MEMORY", v, "at most 2^53 bytes");
        out_.memory = *bytes;
        break;
      }
      case Instr::Call:
        out_.name = string("NAME", false);
        out_.args = names("ARGS");
        out_.result = names("RESULT");
        out_.time_ns = time();
        break;
      case Instr::Alias: {
        out_.name = string("NAME", true);
        const std::string v = string("ALIAS", false);
        if (v == "-1") {
          out_.alias = -1;
        } else {
          const auto index = parse_decimal(v, std::numeric_limits<std::uint32_t>::max());
          if (!index) bad_value("ALIAS", v, "-1 or an argument index in decimal digits");
          out_.alias = static_cast<std::int64_t>(*index);
        }
        break;
      }
      case Instr::Copy:
      case Instr::CopyFrom:
        out_.dst = string("DST", true);
        out_.src = string("SRC", true);
        break;
      case Instr::Mutate:
        out_.name = string("NAME", false);
        out_.args = names("ARGS");
        out_.mutate = indices("MUTATE");
        out_.time_ns = time();
        break;
    }
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const { throw InputError(path_, out_.line, problem); }
  std::string prefix() const { return fmt::format("{} record", instr_name(out_.instr)); }

  const json& field(const char* key) const {
    const auto it = j_.find(key);
    if (it == j_.end()) fail(fmt::format("{}: missing field '{}'", prefix(), key));
    return *it;
  }

  [[noreturn]] void bad_value(const char* key, const std::string& v, const char* expected) const {
    fail(fmt::format("{}: field '{}' must be {} (got {})", prefix(), key, expected, quote(v)));
  }

  std::string string(const char* key, bool handle) const {
    const json& v = field(key);
    if (!v.is_string() || (handle && v.get_ref<const std::string&>().empty())) {
      fail(fmt::format("{}: field '{}' must be a {}string (got {})", prefix(), key, handle ? "non-empty " : "",
                       describe(v)));
    }
    return v.get<std::string>();
  }

  std::vector<std::string> names(const char* key) const {
    const json& v = field(key);
    if (!v.is_array()) {
      fail(fmt::format("{}: field '{}' must be an array of names (got {})", prefix(), key, describe(v)));
    }
    std::vector<std::string> out;
    out.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      const json& e = v[i];
      if (!e.is_string() || e.get_ref<const std::string&>().empty()) {
        fail(fmt::format("{}: field '{}' must be an array of names (element {} is {})", prefix(), key, i, describe(e)));
      }
      out.push_back(e.get<std::string>());
    }
    return out;
  }

  std::vector<std::uint64_t> indices(const char* key) const {
    const json& v = field(key);
    if (!v.is_array()) {
      fail(fmt::format("{}: field '{}' must be an array of argument indices (got {})", prefix(), key, describe(v)));
    }
    std::vector<std::uint64_t> out;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const json& e = v[i];
      if (!e.is_number_unsigned()) {  // nlohmann parses non-negative integers as unsigned
        fail(fmt::format("{}: field '{}' must be an array of argument indices (element {} is {})", prefix(), key, i,
                         describe(e)));
      }
      out.push_back(e.get<std::uint64_t>());
    }
    return out;
  }

  std::int64_t time() const {
    const std::string v = string("TIME", false);
    if (!all_digits(v)) bad_value("TIME", v, "nanoseconds in decimal digits");
    const auto ns = parse_decimal(v, static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()));
    if (!ns) bad_value("TIME", v, "at most 2^63-1 nanoseconds");
    return static_cast<std::int64_t>(*ns);
  }

  const json& j_;
  DtrRecord& out_;
  const std::string& path_;
};

// "[json.exception.parse_error.101] parse error at line 1, column 7: syntax error ..." ->
// "column 7: syntax error ..." (each line is parsed alone, so "line 1" says nothing).
std::string parse_error_detail(const json::exception& e) {
  std::string_view what = e.what();
  const auto col = what.find("column ");
  if (col != std::string_view::npos) return one_line(what.substr(col));
  const auto colon = what.find("] ");
  return one_line(colon == std::string_view::npos ? what : what.substr(colon + 2));
}

}  // namespace

std::string_view instr_name(Instr i) {
  for (const auto& [name, instr] : kInstrs) {
    if (instr == i) return name;
  }
  return "?";
}

std::string quote(std::string_view s) {
  std::string out = "'";
  std::size_t n = 0;
  for (const char ch : s) {
    if (++n > 40) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f || ch == '\'' || ch == '\\') {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += ch;
    }
  }
  return out + "'";
}

DtrLogReader::DtrLogReader(std::string path, std::uint64_t max_bytes, std::uint64_t max_memory)
    : path_(std::move(path)), memory_(max_memory), in_(path_, max_bytes, "DTR log"), buf_(kChunk) {
  if (!in_.is_open()) throw InputError(path_, 0, in_.problem());
}

void DtrLogReader::fail(const std::string& problem) const { throw InputError(path_, line_, problem); }

bool DtrLogReader::read_line(std::string& line, bool& no_newline) {
  line.clear();
  no_newline = false;
  for (;;) {
    if (pos_ == len_) {
      if (eof_) {
        if (line.empty()) return false;
        no_newline = true;
        return true;
      }
      const std::size_t n = in_.read(buf_.data(), buf_.size());
      if (n == 0) {
        // the line holding the first byte over the cap, or the one a damaged stream cut short
        if (in_.over_cap() || !in_.problem().empty()) {
          ++line_;
          fail(in_.over_cap() ? in_.cap_problem() : in_.problem());
        }
        eof_ = true;
        continue;
      }
      pos_ = 0;
      len_ = n;
    }
    const char* p = buf_.data() + pos_;
    const auto avail = len_ - pos_;
    const auto* nl = static_cast<const char*>(std::memchr(p, '\n', avail));
    const std::size_t take = nl == nullptr ? avail : static_cast<std::size_t>(nl - p);
    if (line.size() + take > kMaxLine) {
      ++line_;
      fail(fmt::format("line is longer than {} MiB", kMaxLine >> 20));
    }
    line.append(p, take);
    pos_ += take;
    if (nl != nullptr) {
      ++pos_;
      return true;
    }
  }
}

bool DtrLogReader::next(DtrRecord& out) {
  std::string line;
  bool no_newline = false;
  for (;;) {
    if (!read_line(line, no_newline)) return false;
    ++line_;
    std::string_view text = line;
    if (line_ == 1 && text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // UTF-8 byte order mark
    if (text.find_first_not_of(" \t\r") == std::string_view::npos) continue;       // blank line

    // The line's document, its keys and the record read from it exist only until the next line.
    if (!memory_.fits(text.size() * (memory_cost::kJsonPerTextByte + 2))) fail(memory_.problem());
    // Duplicate top-level keys are refused: Python's json keeps the last one silently.
    // A hash set keeps the check linear in the line length, however many keys a line has.
    std::unordered_set<std::string> keys;
    std::string duplicate;
    const json::parser_callback_t on_event = [&](int depth, json::parse_event_t event, json& parsed) {
      if (event == json::parse_event_t::key && depth == 1 && duplicate.empty()) {
        const auto& key = parsed.get_ref<const std::string&>();
        if (!keys.insert(key).second) duplicate = key;
      }
      return true;
    };
    json j;
    try {
      j = json::parse(text.begin(), text.end(), on_event);
    } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e999
      fail("malformed JSON: " + parse_error_detail(e) +
           (no_newline ? " (last line has no newline: truncated file?)" : ""));
    }
    if (!j.is_object()) fail("line is not a JSON object");
    if (!duplicate.empty()) fail("duplicate key " + quote(duplicate));
    out = DtrRecord{};
    out.line = line_;
    RecordParser(j, out, path_).run();
    return true;
  }
}

std::optional<LogName> parse_log_name(std::string name) {
  if (name.size() > 3 && name.compare(name.size() - 3, 3, ".gz") == 0) name.resize(name.size() - 3);
  if (name.size() <= 4 || name.compare(name.size() - 4, 4, ".log") != 0) return std::nullopt;
  name.resize(name.size() - 4);
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const auto dash = name.find('-', start);
    parts.push_back(name.substr(start, dash == std::string::npos ? std::string::npos : dash - start));
    if (dash == std::string::npos) break;
    start = dash + 1;
  }
  const auto digits = [](const std::string& s) {
    return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
  };
  if (parts.size() < 3 || parts[0].empty() || !digits(parts[1]) || parts[1].size() > 18) return std::nullopt;
  const std::string& b = parts[2];
  const auto dot = b.find('.');
  if (!digits(b.substr(0, dot)) || (dot != std::string::npos && !digits(b.substr(dot + 1)))) return std::nullopt;
  return LogName{parts[0], parts[1], parts[2]};
}

}  // namespace coopsim::dtr_detail
