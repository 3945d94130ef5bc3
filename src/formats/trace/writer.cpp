// Writer for coopsim trace format v1 (docs/trace-format.md): header, all tensor definitions,
// all op definitions, then the events, times in the header's unit (exact decimals). gzip when
// the path ends in ".gz". Output goes through an OutputFile (temporary file, renamed at the end).
#include <fmt/compile.h>
#include <fmt/format.h>
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>

#include "coopsim/base/error.hpp"
#include "coopsim/base/output_file.hpp"
#include "coopsim/base/text.hpp"
#include "coopsim/model/trace.hpp"
#include "trace_detail.hpp"

namespace coopsim {
namespace {

// Written with fmt::format_to(fmt::appender(buf_), ...), straight into the buffer (a
// std::back_inserter would go through fmt's intermediate copying buffer at every call).
using Buffer = fmt::memory_buffer;

class Writer {
 public:
  Writer(const Trace& trace, const std::string& path) : trace_(trace), path_(path) {}

  // Rejects what the loader would not read back; nothing is opened.
  void check_all() {
    const auto exp = trace_detail::time_unit_exponent(trace_.header.time_unit);
    if (!exp) fail(fmt::format("unknown time_unit '{}'", trace_.header.time_unit));
    exp_ = *exp;
    check();
  }

  // Writes everything and commits `out`; check_all() must have passed.
  void run(OutputFile& out) {
    const bool gz = path_.size() >= 3 && path_.compare(path_.size() - 3, 3, ".gz") == 0;
    // zlib owns (and closes) a duplicate, so `out` keeps its own descriptor for commit().
    const int fd = ::fcntl(out.fd(), F_DUPFD_CLOEXEC, 0);
    if (fd < 0) io_fail(std::strerror(errno));
    file_ = gzdopen(fd, gz ? "wb6" : "wbT");
    if (file_ == nullptr) {
      ::close(fd);
      io_fail("out of memory");
    }
    try {
      header();
      lines(trace_.tensors.size(), [](Writer& w, std::size_t i) { w.tensor(w.trace_.tensors[i]); });
      for (const auto& op : trace_.ops) this->op(op);
      for (const auto& seg : trace_.initial_segments) segment(seg);
      for (const auto& a : trace_.segment_addresses) segment_address(a);
      lines(trace_.events.size(), [](Writer& w, std::size_t i) { w.event(w.trace_.events[i]); });
      flush();
      gzFile f = file_;
      file_ = nullptr;
      errno = 0;
      if (gzclose_w(f) != Z_OK) io_fail(errno != 0 ? std::strerror(errno) : "zlib could not finish the stream");
    } catch (...) {
      if (file_ != nullptr) gzclose_w(file_);
      file_ = nullptr;
      throw;
    }
    out.commit();
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw Error(fmt::format("cannot write trace '{}': {}", path_, why));
  }
  // The same words as OutputFile's own write errors.
  [[noreturn]] void io_fail(const std::string& why) const { throw Error(path_ + ": cannot write output file: " + why); }

  void check() const {
    const auto nt = trace_.tensors.size();
    for (const auto& t : trace_.tensors) {
      if (!is_utf8(t.name)) fail(fmt::format("tensor {}: name is not valid UTF-8", t.file_id));
      if (t.size.value > trace_detail::kMaxTensorBytes) fail(fmt::format("tensor {}: size above 2^53", t.file_id));
      if (t.is_view() && index_of(t.view_of) >= nt) fail(fmt::format("tensor {}: view_of out of range", t.file_id));
    }
    for (const auto& op : trace_.ops) {
      if (!is_utf8(op.name)) fail(fmt::format("op {}: name is not valid UTF-8", op.file_id));
      if (op.duration.count() < 0) fail(fmt::format("op {}: negative duration", op.file_id));
      for (const auto* list : {&op.inputs, &op.outputs, &op.mutated}) {
        for (const TensorId t : *list) {
          if (index_of(t) >= nt) fail(fmt::format("op {}: tensor index out of range", op.file_id));
        }
      }
      for (const auto& [out, in] : op.views) {
        if (index_of(out) >= nt || index_of(in) >= nt) {
          fail(fmt::format("op {}: view tensor index out of range", op.file_id));
        }
      }
    }
    for (const auto& seg : trace_.initial_segments) {
      if (seg.blocks.empty()) fail(fmt::format("initial segment {}: no blocks", seg.addr));
      for (const auto& b : seg.blocks) {
        if (b.size.value == 0) fail(fmt::format("initial segment {}: empty block", seg.addr));
        if (!b.is_free() && index_of(b.tensor) >= nt)
          fail(fmt::format("initial segment {}: tensor index out of range", seg.addr));
      }
    }
    for (const auto& a : trace_.segment_addresses) {
      if (a.size.value == 0 || a.stream > 65535)
        fail(fmt::format("segment address {}: size 0 or stream above 65535", a.addr));
    }
    for (const auto& l : trace_.labels) {
      if (!is_utf8(l)) fail("a mark label is not valid UTF-8");
    }
    for (const auto& e : trace_.events) {
      const bool out_of_range =
          (e.has_tensor() && index_of(e.tensor()) >= nt) ||
          (e.kind == EventKind::Compute && index_of(e.compute_op()) >= trace_.ops.size()) ||
          (e.kind == EventKind::Mark && e.label_index() >= trace_.labels.size()) ||
          (e.kind == EventKind::Access && e.access_op() && index_of(*e.access_op()) >= trace_.ops.size());
      if (out_of_range) {
        fail(fmt::format("{} event refers to an index out of range", to_string(e.kind)));
      }
    }
    if (trace_.header.extra.is_object()) {
      for (const auto& [key, value] : trace_.header.extra.items()) {
        if (key == "format" || key == "version" || key == "model" || key == "source" || key == "time_unit" ||
            key == "iterations") {
          fail(fmt::format("header extra key '{}' is reserved", key));
        }
      }
    } else if (!trace_.header.extra.is_null()) {
      fail("header extra must be an object");
    }
    if (!trace_.header.source.is_null() && !trace_.header.source.is_object()) fail("header source must be an object");
    if (trace_.header.iterations < 1) fail("header iterations must be >= 1");
  }

  void string(std::string_view s) {
    buf_.push_back('"');
    for (const char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      switch (ch) {
        case '"': buf_.append(std::string_view("\\\"")); break;
        case '\\': buf_.append(std::string_view("\\\\")); break;
        case '\n': buf_.append(std::string_view("\\n")); break;
        case '\r': buf_.append(std::string_view("\\r")); break;
        case '\t': buf_.append(std::string_view("\\t")); break;
        default:
          if (c < 0x20) {
            fmt::format_to(fmt::appender(buf_), "\\u{:04x}", c);
          } else {
            buf_.push_back(ch);
          }
      }
    }
    buf_.push_back('"');
  }

  void time(SimTime t) { buf_.append(trace_detail::format_in_unit(t.count(), exp_)); }

  void json(const nlohmann::json& j) {
    try {
      buf_.append(j.dump());
    } catch (const nlohmann::json::exception& e) {
      fail(fmt::format("header: {}", e.what()));
    }
  }

  void header() {
    const TraceHeader& h = trace_.header;
    buf_.append(std::string_view(R"({"format":"coopsim-trace","version":1)"));
    if (!h.model.empty()) {
      buf_.append(std::string_view(R"(,"model":)"));
      json(nlohmann::json(h.model));
    }
    if (!h.source.is_null()) {
      buf_.append(std::string_view(R"(,"source":)"));
      json(h.source);
    }
    fmt::format_to(fmt::appender(buf_), R"(,"time_unit":"{}","iterations":{})", h.time_unit, h.iterations);
    if (h.extra.is_object()) {
      for (const auto& [key, value] : h.extra.items()) {
        buf_.push_back(',');
        json(nlohmann::json(key));
        buf_.push_back(':');
        json(value);
      }
    }
    end_line();
  }

  void tensor(const TensorInfo& t) {
    fmt::format_to(fmt::appender(buf_), FMT_COMPILE(R"({{"kind":"tensor","id":{},"bytes":{},"role":"{}")"), t.file_id,
                   t.size.value, to_string(t.role));  // one line per tensor: compiled, as event()
    if (!t.name.empty()) {
      buf_.append(std::string_view(R"(,"name":)"));
      string(t.name);
    }
    end_line();
  }

  void ids(std::string_view key, const std::vector<TensorId>& list) {
    if (list.empty()) return;
    fmt::format_to(fmt::appender(buf_), R"(,"{}":[)", key);
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (i > 0) buf_.push_back(',');
      fmt::format_to(fmt::appender(buf_), "{}", file_id(list[i]));
    }
    buf_.push_back(']');
  }

  std::uint64_t file_id(TensorId t) const { return trace_.tensors[index_of(t)].file_id; }

  void op(const OpInfo& op) {
    fmt::format_to(fmt::appender(buf_), R"({{"kind":"op","id":{})", op.file_id);
    if (!op.name.empty()) {
      buf_.append(std::string_view(R"(,"name":)"));
      string(op.name);
    }
    buf_.append(std::string_view(R"(,"duration":)"));
    time(op.duration);
    ids("inputs", op.inputs);
    ids("outputs", op.outputs);
    if (!op.views.empty()) {
      buf_.append(std::string_view(R"(,"views":[)"));
      for (std::size_t i = 0; i < op.views.size(); ++i) {
        if (i > 0) buf_.push_back(',');
        fmt::format_to(fmt::appender(buf_), "[{},{}]", file_id(op.views[i].first), file_id(op.views[i].second));
      }
      buf_.push_back(']');
    }
    ids("mutates", op.mutated);
    if (op.random) buf_.append(std::string_view(R"(,"random":true)"));
    end_line();
  }

  void segment(const InitialSegment& seg) {
    fmt::format_to(fmt::appender(buf_), R"({{"kind":"segment","addr":{},"size":{})", seg.addr, seg.size().value);
    if (seg.stream != 0) fmt::format_to(fmt::appender(buf_), R"(,"stream":{})", seg.stream);
    fmt::format_to(fmt::appender(buf_), R"(,"pool":"{}")", to_string(seg.pool));
    if (seg.expandable) buf_.append(std::string_view(R"(,"expandable":true)"));
    buf_.append(std::string_view(R"(,"blocks":[)"));
    for (std::size_t i = 0; i < seg.blocks.size(); ++i) {
      const InitialBlock& b = seg.blocks[i];
      if (i > 0) buf_.push_back(',');
      if (b.is_free()) {
        fmt::format_to(fmt::appender(buf_), R"({{"size":{},"free":true}})", b.size.value);
      } else {
        fmt::format_to(fmt::appender(buf_), R"({{"size":{},"tensor":{}}})", b.size.value,
                       trace_.tensor(b.tensor).file_id);
      }
    }
    buf_.push_back(']');
    end_line();
  }

  void segment_address(const SegmentAddress& a) {
    fmt::format_to(fmt::appender(buf_), R"({{"kind":"segment_address","addr":{},"size":{})", a.addr, a.size.value);
    if (a.stream != 0) fmt::format_to(fmt::appender(buf_), R"(,"stream":{})", a.stream);
    fmt::format_to(fmt::appender(buf_), R"(,"pool":"{}")", to_string(a.pool));
    if (a.expandable) buf_.append(std::string_view(R"(,"expandable":true)"));
    end_line();
  }

  // Millions of lines: the formats are compiled (FMT_COMPILE), not parsed at every call; the
  // text is the same.
  void event(const TraceEvent& e) {
    fmt::format_to(fmt::appender(buf_), FMT_COMPILE(R"({{"kind":"{}")"), to_string(e.kind));
    switch (e.kind) {
      case EventKind::Alloc:
      case EventKind::Free:
        fmt::format_to(fmt::appender(buf_), FMT_COMPILE(R"(,"tensor":{})"), trace_.tensor(e.tensor()).file_id);
        break;
      case EventKind::Access:
        fmt::format_to(fmt::appender(buf_), FMT_COMPILE(R"(,"tensor":{},"mode":"{}")"),
                       trace_.tensor(e.tensor()).file_id, e.write ? "write" : "read");
        if (const auto by = e.access_op()) {
          fmt::format_to(fmt::appender(buf_), FMT_COMPILE(R"(,"op":{})"), trace_.op(*by).file_id);
        }
        break;
      case EventKind::Compute:
        fmt::format_to(fmt::appender(buf_), FMT_COMPILE(R"(,"op":{})"), trace_.op(e.compute_op()).file_id);
        break;
      case EventKind::Iteration:
        fmt::format_to(fmt::appender(buf_), FMT_COMPILE(R"(,"index":{})"), e.iteration_index());
        break;
      case EventKind::Mark:
        buf_.append(std::string_view(R"(,"label":)"));
        string(trace_.labels[e.label_index()]);
        break;
    }
    if (e.timed()) {
      buf_.append(std::string_view(R"(,"t":)"));
      time(e.time);
    }
    const bool has_stream = e.kind == EventKind::Alloc || e.kind == EventKind::Free || e.kind == EventKind::Access ||
                            e.kind == EventKind::Compute;
    if (has_stream && e.stream != 0) fmt::format_to(fmt::appender(buf_), FMT_COMPILE(R"(,"stream":{})"), e.stream);
    if (e.kind == EventKind::Alloc && e.addr != 0)
      fmt::format_to(fmt::appender(buf_), FMT_COMPILE(R"(,"addr":{})"), e.addr);
    end_line();
  }

  // Lines 0..n-1, each written by `line(writer, i)`. Millions of them (a large snapshot's
  // tensors and events) are formatted in blocks by two threads: this one takes the even
  // blocks and writes every block in order; a helper, which only formats, takes the odd ones.
  // The bytes are those of one thread.
  template <class Line>
  void lines(std::size_t n, Line line) {
    constexpr std::size_t kBlock = std::size_t{1} << 15;
    if (n < 2 * kBlock) {
      for (std::size_t i = 0; i < n; ++i) line(*this, i);
      return;
    }
    Writer helper(trace_, path_);  // no file: its lines stay in its buffer
    helper.exp_ = exp_;
    auto format = [&](Writer& w, std::size_t block) {
      for (std::size_t i = block * kBlock; i < std::min(n, (block + 1) * kBlock); ++i) line(w, i);
    };
    const std::size_t blocks = (n + kBlock - 1) / kBlock;
    for (std::size_t b = 0; b < blocks; b += 2) {
      std::future<void> odd;
      if (b + 1 < blocks) odd = std::async(std::launch::async, [&, b] { format(helper, b + 1); });
      format(*this, b);
      if (!odd.valid()) continue;
      odd.get();
      flush();
      write(helper.buf_);
      helper.buf_.clear();
    }
  }

  void end_line() {
    buf_.append(std::string_view("}\n"));
    if (file_ != nullptr && buf_.size() >= (1U << 20)) flush();
  }

  void flush() {
    write(buf_);
    buf_.clear();
  }

  void write(const Buffer& b) {
    std::size_t done = 0;
    while (done < b.size()) {
      const auto n = static_cast<unsigned>(std::min<std::size_t>(b.size() - done, 1U << 30));
      if (gzwrite(file_, b.data() + done, n) != static_cast<int>(n)) {
        int err = Z_OK;
        const char* msg = gzerror(file_, &err);
        io_fail(err == Z_ERRNO ? std::strerror(errno) : msg);
      }
      done += n;
    }
  }

  const Trace& trace_;
  std::string path_;
  int exp_ = 0;
  gzFile file_ = nullptr;
  Buffer buf_;
};

}  // namespace

void write_trace(const Trace& trace, const std::string& path) {
  Writer writer(trace, path);
  writer.check_all();  // before creating any file
  OutputFile out(path);
  writer.run(out);
}

void write_trace(const Trace& trace, OutputFile& out) {
  Writer writer(trace, out.path());
  writer.check_all();
  writer.run(out);
}

}  // namespace coopsim
