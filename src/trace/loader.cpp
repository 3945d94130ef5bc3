// Streaming, validating loader for coopsim trace format v1 (docs/trace-format.md).
//
// The file is read through zlib (gzip or plain, detected from the magic bytes) in fixed-size
// chunks; each line is parsed by a small strict JSON parser (json_line.hpp) and validated as it
// arrives, so memory use is bounded by the trace model plus one line. The header line is
// additionally parsed with nlohmann::json to keep its free-form parts verbatim.
#include <fmt/format.h>
#include <zlib.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <map>
#include <memory>

#include "coopsim/error.hpp"
#include "coopsim/trace.hpp"
#include "json_line.hpp"
#include "trace_detail.hpp"

namespace coopsim {
namespace {

using trace_detail::describe;
using trace_detail::JType;
using trace_detail::JValue;
using trace_detail::quote;

constexpr std::size_t kChunk = 1 << 18;             // bytes per gzread
constexpr std::size_t kMaxLine = std::size_t{64} << 20;  // longest accepted line

// ---- keys and kinds --------------------------------------------------------------------

enum Key : std::uint8_t {
  kKind, kId, kBytes, kRole, kName, kDuration, kInputs, kOutputs, kViews, kMutates, kRandom,
  kTensor, kT, kStream, kAddr, kMode, kOp, kIndex, kLabel,
  kNumKeys, kExtension, kUnknown,
};

// k == lit, for a literal whose length equals k.size() (checked by the caller's switch).
template <std::size_t N>
bool is(std::string_view k, const char (&lit)[N]) {
  return std::memcmp(k.data(), lit, N - 1) == 0;
}

Key classify(std::string_view k) {
  switch (k.size()) {
    case 1:
      if (k[0] == 't') return kT;
      break;
    case 2:
      if (is(k, "id")) return kId;
      if (is(k, "op")) return kOp;
      break;
    case 4:
      if (is(k, "kind")) return kKind;
      if (is(k, "name")) return kName;
      if (is(k, "role")) return kRole;
      if (is(k, "addr")) return kAddr;
      if (is(k, "mode")) return kMode;
      break;
    case 5:
      if (is(k, "bytes")) return kBytes;
      if (is(k, "views")) return kViews;
      if (is(k, "index")) return kIndex;
      if (is(k, "label")) return kLabel;
      break;
    case 6:
      if (is(k, "tensor")) return kTensor;
      if (is(k, "stream")) return kStream;
      if (is(k, "inputs")) return kInputs;
      if (is(k, "random")) return kRandom;
      break;
    case 7:
      if (is(k, "outputs")) return kOutputs;
      if (is(k, "mutates")) return kMutates;
      break;
    case 8:
      if (is(k, "duration")) return kDuration;
      break;
    default:
      break;
  }
  if (k.size() >= 2 && k[0] == 'x' && k[1] == '_') return kExtension;
  return kUnknown;
}

enum class Kind : std::uint8_t { Tensor, Op, Alloc, Free, Access, Compute, Iteration, Mark };

constexpr std::array<std::string_view, 8> kKindNames{"tensor", "op",      "alloc",     "free",
                                                     "access", "compute", "iteration", "mark"};

constexpr std::uint32_t bit(Key k) { return 1U << k; }

constexpr std::array<std::uint32_t, 8> kAllowed{
    bit(kKind) | bit(kId) | bit(kBytes) | bit(kRole) | bit(kName),
    bit(kKind) | bit(kId) | bit(kName) | bit(kDuration) | bit(kInputs) | bit(kOutputs) |
        bit(kViews) | bit(kMutates) | bit(kRandom),
    bit(kKind) | bit(kTensor) | bit(kT) | bit(kStream) | bit(kAddr),
    bit(kKind) | bit(kTensor) | bit(kT) | bit(kStream),
    bit(kKind) | bit(kTensor) | bit(kMode) | bit(kOp) | bit(kT) | bit(kStream),
    bit(kKind) | bit(kOp) | bit(kT) | bit(kStream),
    bit(kKind) | bit(kIndex) | bit(kT),
    bit(kKind) | bit(kLabel) | bit(kT),
};

std::optional<Kind> parse_kind(std::string_view s) {
  switch (s.size()) {
    case 2:
      if (is(s, "op")) return Kind::Op;
      break;
    case 4:
      if (is(s, "free")) return Kind::Free;
      if (is(s, "mark")) return Kind::Mark;
      break;
    case 5:
      if (is(s, "alloc")) return Kind::Alloc;
      break;
    case 6:
      if (is(s, "tensor")) return Kind::Tensor;
      if (is(s, "access")) return Kind::Access;
      break;
    case 7:
      if (is(s, "compute")) return Kind::Compute;
      break;
    case 9:
      if (is(s, "iteration")) return Kind::Iteration;
      break;
    default:
      break;
  }
  return std::nullopt;
}

// ---- numbers -----------------------------------------------------------------------------

// A JSON integer without sign, fraction or exponent that fits in 64 bits.
bool as_u64(const JValue& v, std::uint64_t& out) {
  if (v.type != JType::Number || !v.integer || v.negative) return false;
  std::uint64_t r = 0;
  for (const char c : v.text) {
    const auto d = static_cast<std::uint64_t>(c - '0');
    if (r > (std::numeric_limits<std::uint64_t>::max() - d) / 10) return false;
    r = r * 10 + d;
  }
  out = r;
  return true;
}

// Exact conversion of a non-negative JSON number in unit 10^unit_exp ns to integer ns, rounded
// to the nearest ns (halves up). False on overflow of int64.
bool to_ns(std::string_view text, int unit_exp, std::int64_t& out) {
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  std::size_t i = 0;
  const std::size_t n = text.size();
  const std::size_t int_begin = i;
  while (i < n && text[i] >= '0' && text[i] <= '9') ++i;
  const std::string_view ip = text.substr(int_begin, i - int_begin);
  std::string_view fp;
  if (i < n && text[i] == '.') {
    const std::size_t fb = ++i;
    while (i < n && text[i] >= '0' && text[i] <= '9') ++i;
    fp = text.substr(fb, i - fb);
  }
  std::int64_t exp = 0;
  if (i < n && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool neg = false;
    if (i < n && (text[i] == '+' || text[i] == '-')) neg = text[i++] == '-';
    for (; i < n; ++i) {
      if (exp < 1'000'000'000) exp = exp * 10 + (text[i] - '0');
    }
    if (neg) exp = -exp;
  }
  // value = D * 10^E, D = digits of ip followed by fp.
  const auto nd = static_cast<std::int64_t>(ip.size() + fp.size());
  auto digit = [&](std::int64_t k) {
    const auto u = static_cast<std::size_t>(k);
    return static_cast<std::uint64_t>((u < ip.size() ? ip[u] : fp[u - ip.size()]) - '0');
  };
  std::int64_t k0 = 0;
  while (k0 < nd && digit(k0) == 0) ++k0;
  if (k0 == nd) {
    out = 0;
    return true;
  }
  const std::int64_t e = exp - static_cast<std::int64_t>(fp.size()) + unit_exp;
  const std::int64_t int_end = nd + e;  // digits [k0, int_end) form the integer part
  std::uint64_t r = 0;
  for (std::int64_t k = k0; k < std::min(nd, int_end); ++k) {
    const std::uint64_t d = digit(k);
    if (r > (kMax - d) / 10) return false;
    r = r * 10 + d;
  }
  for (std::int64_t k = nd; k < int_end; ++k) {  // trailing zeros of a positive exponent
    if (r > kMax / 10) return false;
    r *= 10;
  }
  if (int_end >= 0 && int_end < nd && digit(int_end) >= 5) {
    if (r == kMax) return false;
    ++r;
  }
  out = static_cast<std::int64_t>(r);
  return true;
}

// ---- file id -> dense index ----------------------------------------------------------------

// Open addressing with linear probing; only used for lookups, never iterated.
class IdMap {
 public:
  [[nodiscard]] std::uint32_t find(std::uint64_t key) const {
    if (slots_.empty()) return kNoIndex;
    for (std::size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.value == kNoIndex) return kNoIndex;
      if (s.key == key) return s.value;
    }
  }
  void insert(std::uint64_t key, std::uint32_t value) {  // key must be absent
    if ((size_ + 1) * 2 > slots_.size()) grow();
    place(key, value);
    ++size_;
  }

 private:
  struct Slot {
    std::uint64_t key = 0;
    std::uint32_t value = kNoIndex;
  };
  static std::size_t hash(std::uint64_t x) {  // splitmix64 finalizer
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return static_cast<std::size_t>(x);
  }
  void place(std::uint64_t key, std::uint32_t value) {
    std::size_t i = hash(key) & mask_;
    while (slots_[i].value != kNoIndex) i = (i + 1) & mask_;
    slots_[i] = Slot{key, value};
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
    mask_ = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.value != kNoIndex) place(s.key, s.value);
    }
  }
  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
};

// ---- gzip file --------------------------------------------------------------------------

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose_r(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// ---- the loader -------------------------------------------------------------------------

class Loader {
 public:
  explicit Loader(const std::string& path) : path_(path) { trace_.path = path; }

  Trace run() {
    errno = 0;
    GzFile file(gzopen(path_.c_str(), "rb"));
    if (!file) {
      const int err = errno;
      throw TraceError(path_, 0,
                       fmt::format("cannot open trace file: {}",
                                   err != 0 ? std::strerror(err) : "out of memory"));
    }
    gzbuffer(file.get(), 1 << 17);
    std::vector<char> buf(kChunk);
    std::string carry;  // a line split across chunks
    std::uint64_t hash = trace_detail::kFnvOffset;
    for (;;) {
      const int n = gzread(file.get(), buf.data(), static_cast<unsigned>(buf.size()));
      if (n < 0) gz_failure(file.get());
      if (n == 0) break;
      const char* p = buf.data();
      const char* end = p + n;
      // The hash is computed line by line, just before each line is parsed, so that the
      // CPU can overlap its serial multiply chain with the parsing work.
      while (p < end) {
        const auto* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
        if (nl == nullptr) {
          hash = trace_detail::fnv1a(hash, p, static_cast<std::size_t>(end - p));
          if (carry.size() + static_cast<std::size_t>(end - p) > kMaxLine) line_too_long();
          carry.append(p, end);
          break;
        }
        hash = trace_detail::fnv1a(hash, p, static_cast<std::size_t>(nl + 1 - p));
        if (carry.empty()) {
          on_line(std::string_view(p, static_cast<std::size_t>(nl - p)), false);
        } else {
          if (carry.size() + static_cast<std::size_t>(nl - p) > kMaxLine) line_too_long();
          carry.append(p, nl);
          on_line(carry, false);
          carry.clear();
        }
        p = nl + 1;
      }
    }
    gz_failure(file.get());  // a truncated or corrupt stream ends the reads early
    if (!carry.empty()) on_line(carry, true);
    finish();
    trace_.content_hash = hash;
    return std::move(trace_);
  }

 private:
  enum class State : std::uint8_t { Never, Live, Freed };
  struct Life {
    State state = State::Never;
    std::uint64_t alloc_line = 0;  // of the latest alloc
    std::uint64_t free_line = 0;   // of the latest free
  };

  [[noreturn]] void fail(const std::string& problem) const { throw TraceError(path_, line_, problem); }

  [[noreturn]] void line_too_long() {
    ++line_;
    fail(fmt::format("line is longer than {} MiB", kMaxLine >> 20));
  }

  // Throws if zlib reports an error (other than a clean end of file).
  void gz_failure(gzFile f) {
    int err = Z_OK;
    const char* msg = gzerror(f, &err);
    if (err == Z_OK || err == Z_STREAM_END) return;
    ++line_;
    if (err == Z_BUF_ERROR) fail("gzip stream is truncated (unexpected end of compressed data)");
    if (err == Z_ERRNO) fail(fmt::format("read error: {}", std::strerror(errno)));
    std::string_view why = msg != nullptr ? msg : "unknown error";
    // zlib prefixes its messages with the file name.
    if (const std::string prefix = path_ + ": "; why.substr(0, prefix.size()) == prefix) why.remove_prefix(prefix.size());
    fail(fmt::format("gzip stream is corrupt: {}", why));
  }

  void on_line(std::string_view line, bool no_newline) {
    ++line_;
    if (line_ == 1 && line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);  // UTF-8 byte order mark
    std::size_t i = 0;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    if (i == line.size()) return;  // blank
    switch (json_.parse(line)) {
      case trace_detail::JsonLine::Status::Ok: break;
      case trace_detail::JsonLine::Status::Malformed:
        fail("malformed JSON: " + json_.error() +
             (no_newline ? " (last line has no newline: truncated file?)" : ""));
      case trace_detail::JsonLine::Status::DuplicateKey: fail("duplicate key " + json_.error());
      case trace_detail::JsonLine::Status::NotObject: fail("line is not a JSON object");
    }
    if (have_header_) {
      on_record();
    } else {
      on_header(line);
    }
  }

  // ---- header --------------------------------------------------------------------------

  static std::string describe_json(const nlohmann::json& j) {
    if (j.is_string()) return quote(j.get_ref<const std::string&>());
    std::string s = j.dump();
    if (s.size() > 40) s = s.substr(0, 40) + "...";
    return s;
  }

  void on_header(std::string_view line) {
    bool has_format = false;
    for (const auto& f : json_.fields()) has_format |= f.key == "format";
    if (!has_format) {
      fail(R"(missing header: the first line must be the {"format":"coopsim-trace","version":1,...} object)");
    }
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail(fmt::format("malformed JSON: {}", e.what()));
    }
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
    for (const auto& [key, value] : j.items()) {
      if (key == "format" || key == "version") continue;
      if (key == "model") {
        if (!value.is_string()) fail(fmt::format("header: field 'model' must be a string (got {})", describe_json(value)));
        h.model = value.get<std::string>();
      } else if (key == "source") {
        if (!value.is_object()) fail(fmt::format("header: field 'source' must be an object (got {})", describe_json(value)));
        h.source = value;
      } else if (key == "time_unit") {
        const auto exp = value.is_string() ? trace_detail::time_unit_exponent(value.get_ref<const std::string&>())
                                           : std::nullopt;
        if (!exp) {
          fail(fmt::format("header: field 'time_unit' must be one of ns, us, ms, s (got {})", describe_json(value)));
        }
        h.time_unit = value.get<std::string>();
        unit_exp_ = *exp;
      } else if (key == "iterations") {
        if (!value.is_number_integer() || value < 1 || value > std::numeric_limits<std::uint32_t>::max()) {
          fail(fmt::format("header: field 'iterations' must be an integer in [1, 4294967295] (got {})",
                           describe_json(value)));
        }
        h.iterations = value.get<std::uint32_t>();
      } else {
        h.extra[key] = value;
      }
    }
    have_header_ = true;
  }

  // ---- field helpers -----------------------------------------------------------------------

  [[noreturn]] void missing(std::string_view prefix, Key k) const {
    fail(fmt::format("{}: missing field '{}'", prefix, key_name(k)));
  }
  [[noreturn]] void bad(std::string_view prefix, Key k, std::string_view what, const JValue& v) const {
    fail(fmt::format("{}: field '{}' must be {} (got {})", prefix, key_name(k), what, describe(v)));
  }
  static std::string_view key_name(Key k) {
    static constexpr std::array<std::string_view, kNumKeys> kNames{
        "kind", "id",     "bytes",  "role", "name", "duration", "inputs", "outputs", "views", "mutates",
        "random", "tensor", "t", "stream", "addr", "mode",     "op",     "index",   "label"};
    return kNames[k];
  }
  std::string record_prefix() const { return fmt::format("{} record", kKindNames[static_cast<int>(kind_)]); }

  // Required non-negative integer field.
  std::uint64_t req_u64(Key k) const {
    const JValue* v = slot_[k];
    if (v == nullptr) missing(record_prefix(), k);
    std::uint64_t out = 0;
    if (!as_u64(*v, out)) bad(record_prefix(), k, "a non-negative integer", *v);
    return out;
  }

  // `prefix` is only called to build an error message.
  template <typename Prefix>
  std::int64_t read_time(const JValue& v, Prefix&& prefix, Key k) const {
    if (v.type != JType::Number || v.negative) bad(prefix(), k, "a non-negative number", v);
    std::int64_t ns = 0;
    if (!to_ns(v.text, unit_exp_, ns)) {
      fail(fmt::format("{}: field '{}' is too large ({} {} overflows 64-bit nanoseconds)", prefix(), key_name(k),
                       describe(v), trace_.header.time_unit));
    }
    return ns;
  }

  // Optional "t" and "stream" of an event; also enforces non-decreasing timestamps.
  void read_t_stream(TraceEvent& e) {
    if (const JValue* v = slot_[kStream]) {
      std::uint64_t s = 0;
      if (!as_u64(*v, s) || s > 65535) bad(record_prefix(), kStream, "an integer in [0, 65535]", *v);
      e.stream = static_cast<std::uint16_t>(s);
    }
    if (const JValue* v = slot_[kT]) {
      e.time = read_time(*v, [this] { return record_prefix(); }, kT);
      if (e.time < last_time_) {
        fail(fmt::format("timestamp {} goes backwards (previous timestamp {} at line {})", describe(*v),
                         trace_detail::format_in_unit(last_time_, unit_exp_), last_time_line_));
      }
      last_time_ = e.time;
      last_time_line_ = line_;
    }
  }

  std::uint32_t tensor_ref(std::uint64_t id, std::string_view what) const {
    const std::uint32_t idx = tensor_ids_.find(id);
    if (idx == kNoIndex) fail(fmt::format("{} of undefined tensor {}", what, id));
    return idx;
  }

  // ---- records -----------------------------------------------------------------------------

  void on_record() {
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
      fail(fmt::format("unknown record kind {} (expected tensor, op, alloc, free, access, compute, iteration or mark)",
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
    }
  }

  void on_tensor() {
    const std::uint64_t id = req_u64(kId);
    if (const std::uint32_t prev = tensor_ids_.find(id); prev != kNoIndex) {
      fail(fmt::format("duplicate tensor id {} (first defined at line {})", id, tensor_def_line_[prev]));
    }
    auto prefix = [id] { return fmt::format("tensor {}", id); };
    const JValue* bytes = slot_[kBytes];
    if (bytes == nullptr) missing(prefix(), kBytes);
    std::uint64_t size = 0;
    if (!as_u64(*bytes, size) || size > trace_detail::kMaxTensorBytes) {
      bad(prefix(), kBytes, "an integer in [0, 2^53]", *bytes);
    }
    TensorInfo t;
    if (const JValue* role = slot_[kRole]) {
      const auto r = role->type == JType::String ? parse_role(role->text) : std::nullopt;
      if (!r) {
        bad(prefix(), kRole, "one of parameter, input, activation, gradient, optimizer_state, workspace, other",
            *role);
      }
      t.role = *r;
    }
    if (const JValue* name = slot_[kName]) {
      if (name->type != JType::String) bad(prefix(), kName, "a string", *name);
      t.name = std::string(name->text);
    }
    if (trace_.tensors.size() >= kNoIndex - 1) fail("too many tensors (at most 4294967294)");
    const auto idx = static_cast<std::uint32_t>(trace_.tensors.size());
    t.id = TensorId{idx};
    t.file_id = id;
    t.size = Bytes{size};
    trace_.tensors.push_back(std::move(t));
    tensor_ids_.insert(id, idx);
    tensor_def_line_.push_back(line_);
    life_.emplace_back();
    is_base_.push_back(0);
  }

  // Reads an optional array of defined tensor ids.
  void tensor_list(Key k, std::uint64_t op_id, std::vector<TensorId>& out) const {
    const JValue* v = slot_[k];
    if (v == nullptr) return;
    if (v->type != JType::Array) bad(fmt::format("op {}", op_id), k, "an array of tensor ids", *v);
    out.reserve(v->count);
    for (std::uint32_t i = 0; i < v->count; ++i) {
      const JValue& el = json_.element(v->first + i);
      std::uint64_t id = 0;
      if (!as_u64(el, id)) {
        fail(fmt::format("op {}: field '{}' must be an array of tensor ids (element {} is {})", op_id, key_name(k),
                         i, describe(el)));
      }
      const std::uint32_t idx = tensor_ids_.find(id);
      if (idx == kNoIndex) fail(fmt::format("op {}: {} refers to undefined tensor {}", op_id, key_name(k), id));
      out.push_back(TensorId{idx});
    }
  }

  static bool contains(const std::vector<TensorId>& v, TensorId t) {
    for (const TensorId x : v) {
      if (x == t) return true;
    }
    return false;
  }

  void on_op() {
    const std::uint64_t id = req_u64(kId);
    if (const std::uint32_t prev = op_ids_.find(id); prev != kNoIndex) {
      fail(fmt::format("duplicate op id {} (first defined at line {})", id, op_def_line_[prev]));
    }
    const std::string prefix = fmt::format("op {}", id);
    OpInfo op;
    op.file_id = id;
    if (const JValue* name = slot_[kName]) {
      if (name->type != JType::String) bad(prefix, kName, "a string", *name);
      op.name = std::string(name->text);
    }
    if (const JValue* d = slot_[kDuration]) op.duration = SimTime{read_time(*d, [&] { return prefix; }, kDuration)};
    tensor_list(kInputs, id, op.inputs);
    tensor_list(kOutputs, id, op.outputs);
    tensor_list(kMutates, id, op.mutated);
    for (const TensorId m : op.mutated) {
      if (!contains(op.inputs, m)) {
        fail(fmt::format("op {}: mutates tensor {}, which is not an input of the op", id,
                         trace_.tensors[index_of(m)].file_id));
      }
    }
    if (const JValue* views = slot_[kViews]) {
      constexpr std::string_view kWhat = "an array of [output, input] tensor id pairs";
      if (views->type != JType::Array) bad(prefix, kViews, kWhat, *views);
      for (std::uint32_t i = 0; i < views->count; ++i) {
        const JValue& pair = json_.element(views->first + i);
        std::uint64_t out_id = 0, in_id = 0;
        if (pair.type != JType::Array || pair.count != 2 || !as_u64(json_.element(pair.first), out_id) ||
            !as_u64(json_.element(pair.first + 1), in_id)) {
          fail(fmt::format("op {}: field 'views' must be {} (element {} is {})", id, kWhat, i,
                           pair.type == JType::Array ? std::string(pair.text) : describe(pair)));
        }
        const std::uint32_t out = tensor_ids_.find(out_id), in = tensor_ids_.find(in_id);
        if (out == kNoIndex) fail(fmt::format("op {}: views refers to undefined tensor {}", id, out_id));
        if (in == kNoIndex) fail(fmt::format("op {}: views refers to undefined tensor {}", id, in_id));
        add_view(op, id, out, in, out_id, in_id);
      }
    }
    if (const JValue* r = slot_[kRandom]) {
      if (r->type != JType::Bool) bad(prefix, kRandom, "true or false", *r);
      op.random = r->boolean;
    }
    if (trace_.ops.size() >= kNoIndex - 1) fail("too many ops (at most 4294967294)");
    const auto idx = static_cast<std::uint32_t>(trace_.ops.size());
    op.id = OpId{idx};
    trace_.ops.push_back(std::move(op));
    op_ids_.insert(id, idx);
    op_def_line_.push_back(line_);
  }

  void add_view(OpInfo& op, std::uint64_t op_id, std::uint32_t out, std::uint32_t in, std::uint64_t out_id,
                std::uint64_t in_id) {
    auto pair_fail = [&](const std::string& why) {
      fail(fmt::format("op {}: view pair [{}, {}]: {}", op_id, out_id, in_id, why));
    };
    if (!contains(op.outputs, TensorId{out})) pair_fail(fmt::format("tensor {} is not an output of the op", out_id));
    if (!contains(op.inputs, TensorId{in})) pair_fail(fmt::format("tensor {} is not an input of the op", in_id));
    const std::uint32_t root = trace_.storage_of(in);
    TensorInfo& t = trace_.tensors[out];
    if (root == out) pair_fail(fmt::format("tensor {} would become a view of itself", out_id));
    if (life_[out].state != State::Never) {
      pair_fail(fmt::format("tensor {} was already allocated (line {})", out_id, life_[out].alloc_line));
    }
    if (t.is_view() && t.view_of != root) {
      pair_fail(fmt::format("tensor {} is already a view of tensor {}", out_id, trace_.tensors[t.view_of].file_id));
    }
    if (is_base_[out] != 0) pair_fail(fmt::format("tensor {} is the base of other views", out_id));
    t.view_of = root;
    t.size = Bytes{0};
    is_base_[root] = 1;
    op.views.emplace_back(TensorId{out}, TensorId{in});
  }

  void on_alloc() {
    const std::uint64_t id = req_u64(kTensor);
    const std::uint32_t idx = tensor_ref(id, "alloc");
    TraceEvent e;
    e.kind = EventKind::Alloc;
    e.target = idx;
    if (const JValue* a = slot_[kAddr]) {
      if (!as_u64(*a, e.addr)) bad(record_prefix(), kAddr, "a non-negative integer", *a);
    }
    read_t_stream(e);
    const TensorInfo& t = trace_.tensors[idx];
    if (t.is_view()) {
      fail(fmt::format("alloc of view tensor {} (views share the storage of tensor {})", id,
                       trace_.tensors[t.view_of].file_id));
    }
    if (t.size.value == 0) fail(fmt::format("alloc of tensor {} with 0 bytes (only views may have 0 bytes)", id));
    Life& life = life_[idx];
    if (life.state == State::Live) {
      fail(fmt::format("alloc of tensor {}, which is already live (allocated at line {})", id, life.alloc_line));
    }
    life.state = State::Live;
    life.alloc_line = line_;
    trace_.events.push_back(e);
  }

  void on_free() {
    const std::uint64_t id = req_u64(kTensor);
    const std::uint32_t idx = tensor_ref(id, "free");
    TraceEvent e;
    e.kind = EventKind::Free;
    e.target = idx;
    read_t_stream(e);
    const TensorInfo& t = trace_.tensors[idx];
    if (t.is_view()) {
      fail(fmt::format("free of view tensor {} (views share the storage of tensor {})", id,
                       trace_.tensors[t.view_of].file_id));
    }
    Life& life = life_[idx];
    if (life.state == State::Never) fail(fmt::format("free of tensor {}, which was never allocated", id));
    if (life.state == State::Freed) {
      fail(fmt::format("double free of tensor {} (already freed at line {})", id, life.free_line));
    }
    life.state = State::Freed;
    life.free_line = line_;
    trace_.events.push_back(e);
  }

  template <typename Describe>
  void check_live(std::uint32_t idx, Describe&& what) const {
    const std::uint32_t root = trace_.storage_of(idx);
    const Life& life = life_[root];
    if (life.state == State::Live) return;
    const std::string via =
        trace_.tensors[idx].is_view() ? fmt::format("view of tensor {}", trace_.tensors[root].file_id) : "";
    if (life.state == State::Never) {
      fail(fmt::format("use before allocation: {}{}", what(), via.empty() ? "" : " (" + via + ")"));
    }
    fail(fmt::format("use after free: {} ({}freed at line {})", what(), via.empty() ? "" : via + ", ",
                     life.free_line));
  }

  void on_access() {
    const std::uint64_t id = req_u64(kTensor);
    const std::uint32_t idx = tensor_ref(id, "access");
    TraceEvent e;
    e.kind = EventKind::Access;
    e.target = idx;
    const JValue* mode = slot_[kMode];
    if (mode == nullptr) missing(record_prefix(), kMode);
    if (mode->type == JType::String && mode->text == "write") {
      e.write = true;
    } else if (!(mode->type == JType::String && mode->text == "read")) {
      bad(record_prefix(), kMode, "'read' or 'write'", *mode);
    }
    if (slot_[kOp] != nullptr) {
      const std::uint64_t op_id = req_u64(kOp);
      e.op = op_ids_.find(op_id);
      if (e.op == kNoIndex) fail(fmt::format("access by undefined op {}", op_id));
    }
    read_t_stream(e);
    check_live(idx, [&] { return fmt::format("access of tensor {}", id); });
    trace_.events.push_back(e);
  }

  void on_compute() {
    const std::uint64_t id = req_u64(kOp);
    const std::uint32_t idx = op_ids_.find(id);
    if (idx == kNoIndex) fail(fmt::format("compute of undefined op {}", id));
    TraceEvent e;
    e.kind = EventKind::Compute;
    e.target = idx;
    read_t_stream(e);
    const OpInfo& op = trace_.ops[idx];
    for (const TensorId t : op.inputs) {
      check_live(index_of(t), [&] {
        return fmt::format("compute of op {} reads tensor {}", id, trace_.tensors[index_of(t)].file_id);
      });
    }
    for (const TensorId t : op.outputs) {
      check_live(index_of(t), [&] {
        return fmt::format("compute of op {} writes tensor {}", id, trace_.tensors[index_of(t)].file_id);
      });
    }
    trace_.events.push_back(e);
  }

  void on_iteration() {
    const std::uint64_t index = req_u64(kIndex);
    TraceEvent e;
    e.kind = EventKind::Iteration;
    read_t_stream(e);
    if (index != iterations_seen_) {
      fail(fmt::format("iteration index {} out of order (expected {})", index, iterations_seen_));
    }
    if (index >= trace_.header.iterations) {
      fail(fmt::format("iteration index {} exceeds the {} iterations declared in the header", index,
                       trace_.header.iterations));
    }
    e.target = static_cast<std::uint32_t>(index);
    ++iterations_seen_;
    trace_.events.push_back(e);
  }

  void on_mark() {
    const JValue* label = slot_[kLabel];
    if (label == nullptr) missing(record_prefix(), kLabel);
    if (label->type != JType::String) bad(record_prefix(), kLabel, "a string", *label);
    TraceEvent e;
    e.kind = EventKind::Mark;
    read_t_stream(e);
    auto it = label_index_.find(label->text);
    if (it == label_index_.end()) {
      it = label_index_.emplace(std::string(label->text), static_cast<std::uint32_t>(trace_.labels.size())).first;
      trace_.labels.emplace_back(label->text);
    }
    e.target = it->second;
    trace_.events.push_back(e);
  }

  void finish() {
    ++line_;  // end-of-file problems are reported at the line after the last one
    if (!have_header_) fail("empty trace: no header line");
    const std::uint32_t want = trace_.header.iterations;
    if (iterations_seen_ != want && !(iterations_seen_ == 0 && want == 1)) {
      fail(fmt::format("trace ends after {} of {} iterations (truncated?)", iterations_seen_, want));
    }
  }

  std::string path_;
  Trace trace_;
  trace_detail::JsonLine json_;
  std::uint64_t line_ = 0;
  bool have_header_ = false;
  int unit_exp_ = 0;
  Kind kind_ = Kind::Tensor;
  std::array<const JValue*, kNumKeys> slot_{};
  IdMap tensor_ids_, op_ids_;
  std::vector<std::uint64_t> tensor_def_line_, op_def_line_;
  std::vector<Life> life_;
  std::vector<std::uint8_t> is_base_;  // tensor is the storage root of at least one view
  std::int64_t last_time_ = 0;
  std::uint64_t last_time_line_ = 0;
  std::uint64_t iterations_seen_ = 0;
  std::map<std::string, std::uint32_t, std::less<>> label_index_;
};

}  // namespace

Trace load_trace(const std::string& path) { return Loader(path).run(); }

}  // namespace coopsim
