// Chrome trace / Perfetto JSON export of a run's event log: the Trace Event Format's "JSON Object
// Format" ({"traceEvents": [...]}, "X" complete events, "i" instant events, "C" counters, "M"
// metadata), which ui.perfetto.dev and chrome://tracing both open. Tracks (docs/timeline.md):
// the compute stream (ops, recomputes, stalls), evictions, and the device-to-host and
// host-to-device copy streams (one lane each, more lanes only where transfers overlap because
// the link is not serial); counters of allocated and reserved bytes.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iterator>
#include <utility>
#include <vector>

#include "coopsim/output/chrome_trace.hpp"
#include "coopsim/output/export.hpp"
#include "coopsim/output/oom_verdict.hpp"

namespace coopsim {
namespace {

constexpr int kPid = 1;
constexpr int kComputeTid = 1;
constexpr int kEvictTid = 2;
constexpr int kD2HTid = 1000;  // + lane
constexpr int kH2DTid = 2000;  // + lane

using chrome_trace::json_text;
using chrome_trace::micros;

class Writer {
 public:
  Writer(const Trace& trace, const RunLog& log, const Report& report) : trace_(trace), log_(log), report_(report) {}

  std::string run() {
    std::string& out = events_.text();
    out = "{\"traceEvents\":[\n";
    const std::string process =
        fmt::format("coopsim {}: {} / {}, budget {}", report_.model.empty() ? trace_.header.model : report_.model,
                    report_.allocator, report_.policy, format_bytes(report_.budget));
    events_.process_name(kPid, process);
    thread(kComputeTid, "compute stream", 1);
    thread(kEvictTid, "evictions", 2);
    const auto d2h = lanes(LogKind::SwapOut);
    const auto h2d = lanes(LogKind::SwapIn);
    for (int lane = 0; lane < std::max(1, d2h.second); ++lane) {
      thread(kD2HTid + lane, lane == 0 ? std::string("device-to-host") : fmt::format("device-to-host {}", lane + 1),
             3 + lane);
    }
    for (int lane = 0; lane < std::max(1, h2d.second); ++lane) {
      thread(kH2DTid + lane, lane == 0 ? std::string("host-to-device") : fmt::format("host-to-device {}", lane + 1),
             3 + d2h.second + lane);
    }
    for (std::uint32_t i = 0; i < log_.records.size(); ++i) record(i, d2h.first, h2d.first);
    counters();
    if (report_.oom) oom();
    out += fmt::format(
        "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{{\"tool\":\"coopsim\",\"version\":{},\"trace\":{},\"model\":{},"
        "\"allocator\":{},\"policy\":{},\"budget_bytes\":{},\"status\":{},\"simulated_ns\":{}}}}}\n",
        json_text(report_.coopsim_version), json_text(report_.trace_path), json_text(report_.model),
        json_text(report_.allocator), json_text(report_.policy), report_.budget.value,
        json_text(to_string(report_.status)), report_.time.simulated.count());
    return std::move(out);
  }

 private:
  void event(const std::string& json) { events_.add(json); }
  void thread(int tid, const std::string& name, int order) { events_.thread_name(kPid, tid, name, order); }
  // Lane of every transfer record of `kind` (by record index; -1 for other records) and the
  // number of lanes: the earliest-starting transfer takes the first lane that is free by then.
  [[nodiscard]] std::pair<std::vector<int>, int> lanes(LogKind kind) const {
    std::vector<std::uint32_t> order;
    for (std::uint32_t i = 0; i < log_.records.size(); ++i) {
      if (log_.records[i].kind == kind) order.push_back(i);
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return log_.records[a].start < log_.records[b].start; });
    std::vector<int> lane(log_.records.size(), -1);
    std::vector<SimTime> busy_until;
    for (const std::uint32_t i : order) {
      const LogRecord& r = log_.records[i];
      std::size_t l = 0;
      while (l < busy_until.size() && busy_until[l] > r.start) ++l;
      if (l == busy_until.size()) busy_until.push_back(r.end);
      busy_until[l] = std::max(r.start, r.end);
      lane[i] = static_cast<int>(l);
    }
    return {std::move(lane), static_cast<int>(busy_until.size())};
  }
  [[nodiscard]] std::string tensor_label(std::uint32_t s) const {
    if (s >= trace_.tensors.size()) return fmt::format("storage #{}", s);
    const TensorInfo& t = trace_.tensors[s];
    return t.name.empty() ? fmt::format("tensor {}", t.file_id) : t.name;
  }
  [[nodiscard]] std::string ref_args(const LogRef& r) const {
    const std::uint64_t fid =
        index_of(r.storage) < trace_.tensors.size() ? trace_.tensors[index_of(r.storage)].file_id : index_of(r.storage);
    return fmt::format(R"("tensor":{},"version":{},"bytes":{},"addr":"{:#x}")", fid, r.version, r.size.value, r.addr);
  }
  void slice(int tid, std::string_view cat, const std::string& name, const LogRecord& r, const std::string& args) {
    const SimTime dur = std::max(SimTime{0}, r.end - r.start);
    event(fmt::format(R"({{"ph":"X","pid":{},"tid":{},"cat":"{}","name":{},"ts":{},"dur":{},"args":{{{}}}}})", kPid,
                      tid, cat, json_text(name), micros(r.start), micros(dur), args));
  }
  void record(std::uint32_t i, const std::vector<int>& d2h, const std::vector<int>& h2d) {
    const LogRecord& r = log_.records[i];
    const std::string ev = r.event == kNoEvent ? std::string("null") : std::to_string(index_of(r.event));
    const std::uint32_t op = index_of(r.op);
    auto op_name = [&] { return op < trace_.ops.size() ? trace_.ops[op].name : fmt::format("op #{}", op); };
    auto op_id = [&] { return op < trace_.ops.size() ? trace_.ops[op].file_id : std::uint64_t{op}; };
    switch (r.kind) {
      case LogKind::Compute:
        slice(kComputeTid, "compute", op_name(), r, fmt::format(R"("op":{},"event":{})", op_id(), ev));
        break;
      case LogKind::Recompute: {
        const bool has_origin = index_of(r.origin) < log_.records.size() && log_.record(r.origin).event != kNoEvent;
        slice(kComputeTid, "recompute", "recompute " + op_name(), r,
              fmt::format(R"("op":{},"event":{},"origin_event":{})", op_id(), ev,
                          has_origin ? std::to_string(index_of(log_.record(r.origin).event)) : std::string("null")));
        break;
      }
      case LogKind::Stall: slice(kComputeTid, "stall", "stall", r, fmt::format(R"("event":{})", ev)); break;
      case LogKind::SwapOut:
      case LogKind::SwapIn: {
        const bool out = r.kind == LogKind::SwapOut;
        const LogRef& ref = log_.ref(r);
        slice((out ? kD2HTid : kH2DTid) + (out ? d2h : h2d)[i], out ? "swap-out" : "swap-in",
              (out ? "swap-out " : "swap-in ") + tensor_label(index_of(ref.storage)), r,
              fmt::format(R"({},"event":{})", ref_args(ref), ev));
        break;
      }
      case LogKind::Evict: {
        const LogRef& ref = log_.ref(r);
        event(fmt::format(
            R"({{"ph":"i","s":"t","pid":{},"tid":{},"cat":"evict","name":{},"ts":{},"args":{{{},"forced":{},"event":{}}}}})",
            kPid, kEvictTid, json_text("evict " + tensor_label(index_of(ref.storage))), micros(r.start), ref_args(ref),
            r.forced ? "true" : "false", ev));
        break;
      }
      case LogKind::Alloc:
      case LogKind::Free:
      case LogKind::Access:
      case LogKind::Memory: break;  // shown by the counters (Memory) or too fine-grained to draw
    }
  }
  // The run's out-of-memory point: a global instant event at the time it stopped, with the verdict.
  void oom() {
    const OomPoint& o = *report_.oom;
    const OomVerdict v = oom_verdict(o, report_.budget);
    event(fmt::format(
        R"({{"ph":"i","s":"g","pid":{},"tid":{},"cat":"oom","name":{},"ts":{},"args":{{"requested_bytes":{},)"
        R"("allocated_bytes":{},"reserved_bytes":{},"largest_free_bytes":{},"verdict":{},"tensor":{},"op":{},"event":{}}}}})",
        kPid, kComputeTid, json_text(v.line), micros(report_.time.simulated), o.requested.value,
        o.allocated.value, o.reserved.value, o.largest_free.value, json_text(std::string(to_string(v.kind))),
        o.tensor_file_id, o.has_op ? std::to_string(o.op_file_id) : std::string("null"), index_of(o.event)));
  }
  // Counter samples in time order; of several at the same time, the last one recorded.
  void counters() {
    std::vector<std::uint32_t> order;
    for (std::uint32_t i = 0; i < log_.records.size(); ++i) {
      if (log_.records[i].kind == LogKind::Memory) order.push_back(i);
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return log_.records[a].start < log_.records[b].start; });
    for (std::size_t k = 0; k < order.size(); ++k) {
      const LogRecord& r = log_.records[order[k]];
      if (k + 1 < order.size() && log_.records[order[k + 1]].start == r.start) continue;
      event(fmt::format(R"({{"ph":"C","pid":{},"name":"allocated","ts":{},"args":{{"bytes":{}}}}})", kPid,
                        micros(r.start), r.allocated.value));
      event(fmt::format(R"({{"ph":"C","pid":{},"name":"reserved","ts":{},"args":{{"bytes":{}}}}})", kPid,
                        micros(r.start), r.reserved.value));
    }
  }

  const Trace& trace_;
  const RunLog& log_;
  const Report& report_;
  chrome_trace::EventList events_;
};

}  // namespace

std::string perfetto_json(const Trace& trace, const RunLog& log, const Report& report) {
  return Writer(trace, log, report).run();
}

}  // namespace coopsim
