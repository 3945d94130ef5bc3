// Trace v1 loader: line handling, the header, record dispatch, field helpers and the end-of-file
// checks (see loader.hpp for the split across files).
#include "loader.hpp"

#include <algorithm>
#include <cerrno>
#include <limits>
#include <new>
#include <utility>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "coopsim/base/text.hpp"
#include "plain_json.hpp"

namespace coopsim {
namespace trace_detail {

void IdMap::insert_sparse(std::uint64_t key, std::uint32_t value) {
  if (dense_) {
    // Keys 0 .. size_ - 1 were their own values: they go into the table first.
    dense_ = false;
    const std::size_t held = size_;
    size_ = 0;
    for (std::size_t k = 0; k < held; ++k) insert_sparse(k, static_cast<std::uint32_t>(k));
  }
  if ((size_ + 1) * 2 > slots_.size()) grow();
  place(key, value);
  ++size_;
}

void IdMap::place(std::uint64_t key, std::uint32_t value) {
  std::size_t i = hash(key) & mask_;
  while (slots_[i].value != kNoIndex) i = (i + 1) & mask_;
  slots_[i] = Slot{key, value};
}

void IdMap::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
  mask_ = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.value != kNoIndex) place(s.key, s.value);
  }
}

namespace {

// Fewest bytes of input per event for reserving (`{"kind":"free","tensor":1}` and a newline: 27).
constexpr std::uint64_t kEventBytesHint = 24;

// Asks for transparent huge pages over a large buffer about to be filled (Linux, THP in
// "madvise" mode, as Debian ships it): one fault per 2 MiB instead of per 4 KiB. First touches
// of the events vector's pages were a third of a parse's time in a VM. Only advice; errors are
// ignored.
void advise_huge_pages(void* data, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  const auto begin = (reinterpret_cast<std::uintptr_t>(data) + kHuge - 1) & ~(kHuge - 1);
  const auto end = (reinterpret_cast<std::uintptr_t>(data) + bytes) & ~(kHuge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)data;
  (void)bytes;
#endif
}

constexpr const char* kMissingHeader =
    R"(missing header: the first line must be the {"format":"coopsim-trace","version":1,...} object)";

std::string describe_json(const nlohmann::json& j) {
  if (j.is_string()) return quote(j.get_ref<const std::string&>());
  std::string s = j.dump();
  if (s.size() > 40) s = s.substr(0, 40) + "...";
  return s;
}

}  // namespace

Trace Loader::run() {
  // Reserving the events from the input's size spares the vector's regrowth (copies and fresh
  // pages), which took 40 % of a 1 M-event parse (docs/performance.md). An event line has at
  // least ~26 bytes; pages reserved beyond the events read are never touched.
  // The reservation is address space only until events fill it; it is still kept within the
  // memory cap, and the events are counted as they arrive.
  const std::uint64_t size = text_ ? text_->size() : LineReader::size_hint(path_);
  const std::uint64_t hint = std::min(size, limits_.max_input_bytes) / kEventBytesHint;
  try {
    trace_.events.reserve(
        static_cast<std::size_t>(std::min({hint, limits_.max_events, limits_.max_memory / memory_cost::kEvent})));
    advise_huge_pages(trace_.events.data(), trace_.events.capacity() * sizeof(TraceEvent));
  } catch (const std::bad_alloc&) {
    // Only a hint: the vector grows as it would have.
  }
  LineReader reader =
      text_ ? LineReader(path_, *text_, limits_.max_input_bytes) : LineReader(path_, limits_.max_input_bytes);
  line_ = reader.run(*this);
  finish();
  trace_.content_hash = reader.hash();
  return std::move(trace_);
}

void Loader::on_line(std::string_view line, std::uint64_t number, bool no_newline) {
  line_ = number;
  if (line_ == 1 && line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);  // UTF-8 byte order mark
  std::size_t i = 0;
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
  if (i == line.size()) return;  // blank
  if (line.size() > longest_line_) {
    hold((line.size() - longest_line_) * kLineBytes);
    longest_line_ = line.size();
  }
  if (have_header_ && plain_line(line)) return;
  if (!have_header_) {
    // Header lines deeper than this are rare enough to leave to nlohmann, whatever its limit.
    constexpr int kPlainHeaderDepth = 64;
    if (auto header = parse_plain_json_object(line, kPlainHeaderDepth)) {
      if (!header->contains("format")) fail(kMissingHeader);
      hold(line.size() * memory_cost::kJsonPerTextByte);  // its free-form parts are kept
      header_from(*header);
      return;
    }
  }
  switch (json_.parse(line)) {
    case JsonLine::Status::Ok: break;
    case JsonLine::Status::Malformed:
      fail("malformed JSON: " + json_.error() + (no_newline ? " (last line has no newline: truncated file?)" : ""));
    case JsonLine::Status::DuplicateKey: fail("duplicate key " + json_.error());
    case JsonLine::Status::NotObject: fail("line is not a JSON object");
  }
  if (have_header_) {
    on_record();
  } else {
    on_header(line);
  }
}

// ---- header ------------------------------------------------------------------------------

void Loader::on_header(std::string_view line) {
  bool has_format = false;
  for (const auto& f : json_.fields()) has_format |= f.key == "format";
  if (!has_format) fail(kMissingHeader);
  hold(line.size() * memory_cost::kJsonPerTextByte);  // its free-form parts are kept
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    fail(fmt::format("malformed JSON: {}", one_line(json_message(e.what()))));
  }
  header_from(j);
}

void Loader::header_from(nlohmann::json& j) {
  TraceHeader& h = trace_.header;
  const auto& format = j["format"];
  if (!format.is_string()) fail(fmt::format("header: field 'format' must be a string (got {})", describe_json(format)));
  if (format.get_ref<const std::string&>() != "coopsim-trace") {
    fail(fmt::format("unknown format {} (expected 'coopsim-trace')", describe_json(format)));
  }
  if (!j.contains("version")) fail("header: missing field 'version'");
  const auto& version = j["version"];
  if (!version.is_number_integer()) {
    fail(fmt::format("header: field 'version' must be an integer (got {})", describe_json(version)));
  }
  if (version != 1) fail(fmt::format("unsupported trace version {} (this build reads version 1)", version.dump()));
  h.format = "coopsim-trace";
  h.version = 1;
  h.extra = nlohmann::json::object();
  // Values are moved out of the parsed line, not copied: a header can carry a large free-form
  // object (the DTR importer's "simrd" tables), and a copy doubled the header's cost.
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    nlohmann::json& value = it.value();
    if (key == "format" || key == "version") continue;
    if (key == "model") {
      if (!value.is_string())
        fail(fmt::format("header: field 'model' must be a string (got {})", describe_json(value)));
      h.model = value.get<std::string>();
    } else if (key == "source") {
      if (!value.is_object())
        fail(fmt::format("header: field 'source' must be an object (got {})", describe_json(value)));
      h.source = std::move(value);
    } else if (key == "time_unit") {
      const auto exp = value.is_string() ? time_unit_exponent(value.get_ref<const std::string&>()) : std::nullopt;
      if (!exp)
        fail(fmt::format("header: field 'time_unit' must be one of ns, us, ms, s (got {})", describe_json(value)));
      h.time_unit = value.get<std::string>();
      unit_exp_ = *exp;
    } else if (key == "iterations") {
      if (!value.is_number_integer() || value < 1 || value > std::numeric_limits<std::uint32_t>::max()) {
        fail(fmt::format("header: field 'iterations' must be an integer in [1, 4294967295] (got {})",
                         describe_json(value)));
      }
      h.iterations = value.get<std::uint32_t>();
    } else {
      h.extra[key] = std::move(value);
    }
  }
  have_header_ = true;
}

// ---- records -----------------------------------------------------------------------------

void Loader::on_record() {
  plain_elements_active_ = false;
  slot_.fill(nullptr);
  std::uint32_t present = 0;
  bool unknown = false;
  for (const auto& f : json_.fields()) {
    const Key k = classify(f.key);
    if (k < kNumKeys) {
      slot_[k] = &f.value;
      present |= bit(k);
    } else if (k == kUnknown) {
      unknown = true;
    }
  }
  const JValue* kind = slot_[kKind];
  if (kind == nullptr) {
    for (const auto& f : json_.fields()) {
      if (f.key == "format") fail("unexpected header: the header must be the first line and appear only once");
    }
    fail("record: missing field 'kind'");
  }
  if (kind->type != JType::String) bad("record", kKind, "a string", *kind);
  const auto k = parse_kind(kind->text);
  if (!k) {
    fail(fmt::format(
        "unknown record kind {} (expected tensor, op, alloc, free, access, compute, iteration, mark, segment or "
        "segment_address)",
        quote(kind->text)));
  }
  kind_ = *k;
  const std::uint32_t allowed = kAllowed[static_cast<int>(kind_)];
  if (unknown || (present & ~allowed) != 0) {
    for (const auto& f : json_.fields()) {
      const Key key = classify(f.key);
      if (key == kUnknown || (key < kNumKeys && (allowed & bit(key)) == 0)) {
        fail(fmt::format("{}: unknown key {} (extension keys must start with x_)", record_prefix(), quote(f.key)));
      }
    }
  }
  switch (kind_) {
    case Kind::Tensor: on_tensor(); break;
    case Kind::Op: on_op(); break;
    case Kind::Alloc: on_alloc(); break;
    case Kind::Free: on_free(); break;
    case Kind::Access: on_access(); break;
    case Kind::Compute: on_compute(); break;
    case Kind::Iteration: on_iteration(); break;
    case Kind::Mark: on_mark(); break;
    case Kind::Segment: on_segment(); break;
    case Kind::SegmentAddress: on_segment_address(); break;
  }
}

void Loader::finish() {
  ++line_;  // end-of-file problems are reported at the line after the last one
  if (!have_header_) fail("empty trace: no header line");
  const std::uint32_t want = trace_.header.iterations;
  if (iterations_seen_ != want && !(iterations_seen_ == 0 && want == 1)) {
    fail(fmt::format("trace ends after {} of {} iterations (truncated?)", iterations_seen_, want));
  }
}

// ---- field helpers -----------------------------------------------------------------------

void Loader::missing(std::string_view prefix, Key k) const {
  fail(fmt::format("{}: missing field '{}'", prefix, key_name(k)));
}

void Loader::bad(std::string_view prefix, Key k, std::string_view what, const JValue& v) const {
  fail(fmt::format("{}: field '{}' must be {} (got {})", prefix, key_name(k), what, describe(v)));
}

std::uint64_t Loader::req_u64(Key k) const {
  const JValue* v = slot_[k];
  if (v == nullptr) missing(record_prefix(), k);
  std::uint64_t out = 0;
  if (!as_u64(*v, out)) bad(record_prefix(), k, "a non-negative integer", *v);
  return out;
}

std::uint16_t Loader::read_stream() const {
  std::uint64_t s = 0;
  if (const JValue* v = slot_[kStream]) {
    if (!as_u64(*v, s) || s > 65535) bad(record_prefix(), kStream, "an integer in [0, 65535]", *v);
  }
  return static_cast<std::uint16_t>(s);
}

void Loader::read_t_stream(TraceEvent& e) {
  e.stream = read_stream();
  if (const JValue* v = slot_[kT]) {
    const std::int64_t t = read_time(
        *v, [this] { return record_prefix(); }, kT);
    if (t < last_time_) {
      fail(fmt::format("timestamp {} goes backwards (previous timestamp {} at line {})", describe(*v),
                       format_in_unit(last_time_, unit_exp_), last_time_line_));
    }
    e.time = SimTime{t};
    last_time_ = t;
    last_time_line_ = line_;
  }
}

void Loader::push_event(const TraceEvent& e) {
  if (trace_.events.size() >= limits_.max_events) fail(limit_problem(limits_.max_events, "events", "max_events"));
  room_to_append(trace_.events);
  hold(memory_cost::kEvent);
  trace_.events.push_back(e);
}

std::uint32_t Loader::tensor_ref(std::uint64_t id, std::string_view what) const {
  const std::uint32_t idx = tensor_ids_.find(id);
  if (idx == kNoIndex) fail(fmt::format("{} of undefined tensor {}", what, id));
  return idx;
}

}  // namespace trace_detail

Trace load_trace(const std::string& path, const Limits& limits) {
  try {
    return trace_detail::Loader(path, limits).run();
  } catch (const std::bad_alloc&) {
    throw out_of_memory(path, limits.max_memory);
  }
}

Trace parse_trace(std::string_view text, const std::string& name, const Limits& limits) {
  try {
    return trace_detail::Loader(name, text, limits).run();
  } catch (const std::bad_alloc&) {
    throw out_of_memory(name, limits.max_memory);
  }
}

}  // namespace coopsim
