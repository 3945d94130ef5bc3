// Streaming reads and writes of a sweep's result files (result_stream.hpp): `coopsim merge`
// checks every shard in a first pass that holds one row or one entry's few fields at a time, then
// writes the merged files in a second pass that holds one row or one entry per shard.
#include "result_stream.hpp"

#include <fmt/format.h>

#include <array>
#include <cstdio>
#include <exception>
#include <unordered_set>
#include <utility>
#include <vector>

#include "coopsim/base/schema_version.hpp"
#include "coopsim/base/error.hpp"
#include "coopsim/base/text.hpp"

namespace coopsim::sweep {
namespace {

namespace fs = std::filesystem;
using OJ = nlohmann::ordered_json;

constexpr std::size_t kBufferBytes = std::size_t{1} << 20;

// The line (1-based) of byte `offset` of `file`: 1 + the newlines before it. Read again from the
// start, only for an error's message.
std::uint64_t line_at(const fs::path& file, std::uint64_t offset) {
  std::ifstream in(file, std::ios::binary);
  std::array<char, 1 << 16> chunk{};
  std::uint64_t line = 1;
  while (offset > 0 && in) {
    in.read(chunk.data(), static_cast<std::streamsize>(std::min<std::uint64_t>(offset, chunk.size())));
    const auto n = static_cast<std::size_t>(in.gcount());
    if (n == 0) break;
    for (std::size_t i = 0; i < n; ++i) line += chunk[i] == '\n';
    offset -= n;
  }
  return line;
}

// True when `field` is what parse_index reads as `expected`.
bool index_is(const std::string& field, std::size_t expected) {
  std::size_t used = 0;
  try {
    return std::stoull(field, &used) == expected && used == field.size() && !field.empty();
  } catch (const std::exception&) {
    return false;
  }
}

struct DuplicateKey {
  std::string key;
  std::uint64_t offset;
};

// nlohmann SAX handler for a shard's results.json. It follows where each event is (the document,
// the "runs" list, an entry, a value inside one) and keeps, per entry, only whether it is an
// object with an unsigned "run" and a "report". Like parse_ordered_json_document it refuses a key
// given twice in one object, at once; the document's shape and the entries are judged as
// read_finished judges them, the first problem kept and thrown once the whole text has parsed
// (so invalid JSON further on is reported first, as before).
class EntrySax {
 public:
  EntrySax(const fs::path& file, std::streambuf* buf, std::size_t limit, Shard shard, std::size_t shard_runs)
      : file_(file), buf_(buf), limit_(limit), shard_(shard), shard_runs_(shard_runs) {}

  bool null() { return value(false); }
  bool boolean(bool /*v*/) { return value(false); }
  bool number_integer(std::int64_t /*v*/) { return value(false); }
  bool number_unsigned(std::uint64_t v) { return value(false, true, v); }
  bool number_float(double /*v*/, const std::string& /*text*/) { return value(false); }
  bool string(std::string& /*v*/) { return value(false); }
  bool binary(nlohmann::json::binary_t& /*v*/) { return value(false); }
  bool start_object(std::size_t /*n*/) {
    value(true);
    keys_.emplace_back();
    ++depth_;
    return true;
  }
  bool key(std::string& k) {
    // nlohmann's lexer has read the key up to its closing quote and no further.
    if (!keys_.back().insert(k).second) throw DuplicateKey{k, position() - 1};
    if (depth_ == 1) {
      top_key_ = k;
    } else if (depth_ == 3 && entry_open_) {
      entry_key_ = k;
      has_report_ = has_report_ || k == "report";
    }
    return true;
  }
  bool end_object() {
    keys_.pop_back();
    --depth_;
    if (depth_ == 2 && entry_open_) {
      entry_open_ = false;
      finish_entry(true);
    }
    return true;
  }
  bool start_array(std::size_t /*n*/) {
    value(false, false, 0, true);
    ++depth_;
    return true;
  }
  bool end_array() {
    --depth_;
    if (depth_ == 1) runs_open_ = false;
    return true;
  }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& /*token*/, const Exception& e) {
    error_at_ = position;
    throw e;
  }

  // After a successful parse: the first problem of the document or of an entry, if any.
  void finish(EntryScan& scan) {
    if (!top_object_ || !runs_array_) throw Error(file_.string() + ": expected an object with a \"runs\" list");
    if (problem_) std::rethrow_exception(problem_);
    if (!scan_.missing && next_ < shard_runs_) scan_.missing = expected(next_);
    scan = std::move(scan_);
  }
  [[nodiscard]] std::size_t error_at() const { return error_at_; }

 private:
  // A value starts at the current depth (containers open around it).
  bool value(bool object, bool is_unsigned = false, std::uint64_t v = 0, bool array = false) {
    if (depth_ == 0) {
      top_object_ = object;
    } else if (depth_ == 1 && top_object_ && top_key_ == "runs") {
      runs_array_ = array;
      if (array) {
        runs_open_ = true;
        scan_.runs_at = position();  // just past '[': the lexer reads a one-character token alone
      }
    } else if (depth_ == 2 && runs_open_) {
      has_run_ = run_unsigned_ = has_report_ = false;
      entry_key_.clear();
      entry_open_ = object;
      if (!object) finish_entry(false);
    } else if (depth_ == 3 && entry_open_ && entry_key_ == "run") {
      has_run_ = true;
      run_unsigned_ = is_unsigned;
      run_ = v;
    }
    return true;
  }

  [[nodiscard]] std::size_t expected(std::size_t j) const { return j * shard_.count + shard_.index - 1U; }

  // read_finished's checks of one entry (add_entry), then merge's: in order, and which index of
  // the shard is the first without an entry (entries in order, every index of the shard once).
  void finish_entry(bool object) {
    const std::size_t k = entries_++;
    if (problem_) return;
    const std::string where = fmt::format("{}: runs[{}]", file_.string(), k);
    try {
      if (!object || !has_run_ || !run_unsigned_ || !has_report_) {
        throw Error(where + ": expected an object with \"run\" and \"report\"");
      }
      const std::size_t index = parse_index(std::to_string(run_), limit_, file_, 1, "run");
      if (scan_.count > 0 && index == prev_) {
        throw Error(fmt::format("{}: run {} is listed twice (also {}: runs[{}])", where, index, file_.string(), k - 1));
      }
      if (scan_.count > 0 && index < prev_ && scan_.disorder.empty()) {
        scan_.disorder = fmt::format("{}: run {} comes after run {}", where, index, prev_);
      }
      if (in_shard(index, shard_) && !scan_.missing) {
        if (next_ < shard_runs_ && expected(next_) < index) scan_.missing = expected(next_);
        if (next_ < shard_runs_ && expected(next_) == index) ++next_;
      }
      prev_ = index;
      ++scan_.count;
    } catch (const std::exception&) {
      problem_ = std::current_exception();
    }
  }

  std::uint64_t position() {
    const auto p = buf_->pubseekoff(0, std::ios::cur, std::ios::in);
    return p < 0 ? 0 : static_cast<std::uint64_t>(p);
  }

  const fs::path& file_;
  std::streambuf* buf_;
  std::size_t limit_;
  Shard shard_;
  std::size_t shard_runs_;

  std::vector<std::unordered_set<std::string>> keys_;  // one set per open object
  std::size_t depth_ = 0;
  bool top_object_ = false, runs_array_ = false, runs_open_ = false;
  std::string top_key_;
  // The entry being read.
  bool entry_open_ = false, has_run_ = false, run_unsigned_ = false, has_report_ = false;
  std::string entry_key_;
  std::uint64_t run_ = 0;
  // The entries so far.
  std::size_t entries_ = 0, prev_ = 0, next_ = 0;
  EntryScan scan_;
  std::exception_ptr problem_;
  std::size_t error_at_ = 0;
};

}  // namespace

// ---- writing ---------------------------------------------------------------------------------

BufferedOutput::BufferedOutput(const fs::path& path) : file_(path.string(), OutputFile::Target::Owned) {
  buffer_.reserve(kBufferBytes);
}

void BufferedOutput::write(std::string_view bytes) {
  if (buffer_.size() + bytes.size() > kBufferBytes) {
    file_.write(buffer_);
    buffer_.clear();
    if (bytes.size() >= kBufferBytes) {
      file_.write(bytes);
      return;
    }
  }
  buffer_ += bytes;
}

void BufferedOutput::commit() {
  file_.write(buffer_);
  buffer_.clear();
  file_.commit();
}

ResultsJsonWriter::ResultsJsonWriter(const fs::path& path, const Manifest& m) : out_(path) {
  out_.write("{\n  \"schema_version\": " + std::to_string(schema_version::kSweepResults) +
             ",\n  \"coopsim_version\": " + OJ(m.coopsim_version).dump() + ",\n  \"config_hash\": " + OJ(fmt::format("{:016x}", m.config_hash)).dump() + ",\n  \"runs\": [");
}

void ResultsJsonWriter::add(const OJ& entry) {
  const std::string text = entry.dump(2);  // no raw newline inside: dump escapes those in strings
  out_.write(empty_ ? "\n    " : ",\n    ");
  empty_ = false;
  std::size_t start = 0;
  for (std::size_t nl = text.find('\n'); nl != std::string::npos; nl = text.find('\n', start)) {
    out_.write(std::string_view(text).substr(start, nl + 1 - start));
    out_.write("    ");
    start = nl + 1;
  }
  out_.write(std::string_view(text).substr(start));
}

void ResultsJsonWriter::finish() { out_.write(empty_ ? "]\n}\n" : "\n  ]\n}\n"); }

// ---- pass 1 ----------------------------------------------------------------------------------

RowScan scan_rows(const fs::path& file, const std::string& header, std::size_t limit, const char* what, Shard shard) {
  RowScan scan;
  if (!fs::exists(file)) return scan;
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(file.string() + ": cannot read");
  const std::size_t columns = split_csv_line(header).size();
  std::string line;
  std::size_t prev = 0;
  for (std::uint64_t n = 1; std::getline(in, line) && !in.eof(); ++n) {  // eof: no newline, cut
    if (n == 1) {
      if (line != header) {
        throw InputError(file.string(), 1, "the columns differ from this coopsim's " + file.filename().string());
      }
      continue;
    }
    const auto fields = split_csv_line(line);
    if (fields.size() != columns) {
      throw InputError(file.string(), n, fmt::format("expected {} columns, found {}", columns, fields.size()));
    }
    const std::size_t index = parse_index(fields[0], limit, file, n, what);
    if (scan.count > 0 && index == prev) {
      throw InputError(file.string(), n,
                       fmt::format("{} {} is listed twice (also {}:{})", what, index, file.string(), n - 1));
    }
    if (scan.count > 0 && index < prev && scan.disorder.empty()) {
      scan.disorder = fmt::format("{}:{}: {} {} comes after {} {}", file.string(), n, what, index, what, prev);
    }
    if (!in_shard(index, shard) && (!scan.outside || index < *scan.outside)) scan.outside = index;
    prev = index;
    ++scan.count;
  }
  if (in.bad()) throw Error(file.string() + ": cannot read");
  return scan;
}

EntryScan scan_entries(const fs::path& file, std::size_t limit, Shard shard, std::size_t shard_runs) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(file.string() + ": cannot read");
  EntrySax sax(file, in.rdbuf(), limit, shard, shard_runs);
  // As parse_ordered_json_document reports them: LINE is that of the problem.
  try {
    nlohmann::json::sax_parse(in, &sax);
  } catch (const DuplicateKey& d) {
    throw InputError(file.string(), line_at(file, d.offset), "duplicate key " + quote_excerpt(d.key));
  } catch (const nlohmann::json::parse_error& e) {
    if (in.bad()) throw Error(file.string() + ": cannot read");
    std::string msg = e.what();
    if (auto p = msg.find("syntax error"); p != std::string::npos) msg = msg.substr(p);
    throw InputError(file.string(), line_at(file, e.byte == 0 ? 0 : e.byte - 1), "invalid JSON: " + one_line(msg));
  } catch (const nlohmann::json::out_of_range& e) {  // a number beyond a double (1e999), just read
    const std::size_t at = sax.error_at();
    throw InputError(file.string(), line_at(file, at == 0 ? 0 : at - 1),
                     "invalid JSON: " + one_line(std::string(json_message(e.what()))));
  }
  EntryScan scan;
  sax.finish(scan);
  return scan;
}

// ---- pass 2 ----------------------------------------------------------------------------------

RowReader::RowReader(fs::path file, const char* what)
    : file_(std::move(file)), what_(what), in_(file_, std::ios::binary) {
  if (!in_ || !std::getline(in_, line_)) throw Error(file_.string() + ": cannot read");  // the header
}

const std::string& RowReader::next(std::size_t expected) {
  if (!std::getline(in_, line_) || in_.eof() || !index_is(split_csv_line(line_).front(), expected)) {
    throw Error(fmt::format("{}: changed during the merge ({} {} is not the next row): merge again", file_.string(),
                            what_, expected));
  }
  return line_;
}

EntryReader::EntryReader(fs::path file, std::streamoff runs_at) : file_(std::move(file)), in_(file_, std::ios::binary) {
  if (!in_ || !in_.seekg(runs_at)) throw Error(file_.string() + ": cannot read");
  buf_ = in_.rdbuf();
}

void EntryReader::changed(std::size_t expected) const {
  throw Error(fmt::format("{}: changed during the merge (run {} is not the next entry): merge again", file_.string(),
                          expected));
}

int EntryReader::skip_space() {
  int c = buf_->sgetc();
  while (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
    buf_->sbumpc();
    c = buf_->sgetc();
  }
  return c;
}

OJ EntryReader::next(std::size_t expected) {
  int c = skip_space();
  if (!first_) {
    if (c != ',') changed(expected);
    buf_->sbumpc();
    c = skip_space();
  }
  first_ = false;
  if (c != '{') changed(expected);
  // The object's text: up to the brace that closes it, braces and brackets inside strings aside.
  text_.clear();
  int depth = 0;
  bool quoted = false, escaped = false;
  do {
    c = buf_->sbumpc();
    if (c == std::char_traits<char>::eof()) changed(expected);
    const char ch = static_cast<char>(c);
    text_ += ch;
    if (quoted) {
      if (escaped) {
        escaped = false;
      } else if (ch == '\\') {
        escaped = true;
      } else if (ch == '"') {
        quoted = false;
      }
    } else if (ch == '"') {
      quoted = true;
    } else if (ch == '{' || ch == '[') {
      ++depth;
    } else if (ch == '}' || ch == ']') {
      --depth;
    }
  } while (depth > 0);
  OJ e;
  try {
    e = OJ::parse(text_);
  } catch (const nlohmann::json::exception&) {
    changed(expected);
  }
  if (!e.is_object() || !e.contains("run") || !e.at("run").is_number_unsigned() ||
      e.at("run").get<std::uint64_t>() != expected) {
    changed(expected);
  }
  return e;
}

}  // namespace coopsim::sweep
