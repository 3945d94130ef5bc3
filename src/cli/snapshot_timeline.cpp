// `coopsim snapshot timeline FILE [--from T] [--to T]`: a Chrome trace / Perfetto JSON timeline
// of a recording's memory (docs/snapshot-diff.md): counter tracks of the allocator's allocated
// and reserved bytes and of the live requested bytes after every event, and the recording's
// marks (annotations, segment actions, OOMs) as instant events. Written with the same pieces as
// the run timeline (coopsim/output/chrome_trace.hpp).
#include "snapshot_commands.hpp"

#include <fmt/format.h>

#include <limits>

#include "coopsim/output/chrome_trace.hpp"

namespace coopsim::snapshot_cli {
namespace {

using chrome_trace::json_text;
using chrome_trace::micros;

constexpr int kPid = 1;
constexpr int kMarksTid = 1;

void counters(chrome_trace::EventList& ev, SimTime at, const MemorySample& s) {
  for (const auto& [name, bytes] : {std::pair{"allocated", s.allocated}, std::pair{"reserved", s.reserved},
                                    std::pair{"live", s.live}}) {
    ev.add(fmt::format(R"({{"ph":"C","pid":{},"name":"{}","ts":{},"args":{{"bytes":{}}}}})", kPid, name, micros(at),
                       bytes.value));
  }
}

}  // namespace

std::string timeline_json(const MemoryProfile& p, const std::string& path, const TimeWindow& window) {
  const SimTime from = window.from.value_or(SimTime{0});
  const SimTime to = window.to.value_or(SimTime{std::numeric_limits<std::int64_t>::max()});
  chrome_trace::EventList ev;
  std::string& out = ev.text();
  out = "{\"traceEvents\":[\n";
  ev.process_name(kPid, fmt::format("coopsim snapshot timeline: {}", p.trace.header.model.empty() ? path
                                                                                                  : p.trace.header.model));
  ev.thread_name(kPid, kMarksTid, "marks", 1);

  // Counters: the state on entry to the window at `from`, then every sample inside it.
  MemorySample before;
  bool have_before = false;  // a sample before the window that the window has not shown yet
  std::size_t shown = 0;
  for (std::size_t k = 0; k < p.samples.size(); ++k) {
    const MemorySample& s = p.samples[k];
    // Of several samples at one time (snapshot times are whole µs), the last is the one in force.
    if (k + 1 < p.samples.size() && p.samples[k + 1].time == s.time) continue;
    if (s.time < from) {
      before = s;
      have_before = true;
      continue;
    }
    if (s.time > to) break;
    if (have_before && s.time > from) counters(ev, from, before);
    have_before = false;
    counters(ev, s.time, s);
    ++shown;
  }
  if (have_before) counters(ev, from, before);  // nothing changed inside the window

  // Marks at their event's time: recorded, or the clock of the last sample at or before them.
  std::size_t next = 0;
  SimTime clock{0};
  for (std::uint32_t i = 0; i < p.trace.events.size(); ++i) {
    while (next < p.samples.size() && p.samples[next].event <= i) clock = p.samples[next++].time;
    const TraceEvent& e = p.trace.events[i];
    if (e.kind != EventKind::Mark) continue;
    const SimTime at = p.recorded_time ? e.time : clock;
    if (at < from || at > to) continue;
    ev.add(fmt::format(R"({{"ph":"i","s":"t","pid":{},"tid":{},"cat":"mark","name":{},"ts":{},"args":{{"event":{}}}}})",
                       kPid, kMarksTid, json_text(p.trace.labels[e.label_index()]), micros(at), i));
  }
  out += fmt::format(
      "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{{\"tool\":\"coopsim snapshot timeline\",\"input\":{},"
      "\"time\":\"{}\",\"from_ns\":{},\"to_ns\":{},\"samples\":{},\"allocator_settings\":{},"
      "\"peak_allocated_bytes\":{},\"peak_reserved_bytes\":{}}}}}\n",
      json_text(path), p.recorded_time ? "recorded" : "simulated", from.count(),
      window.to ? std::to_string(window.to->count()) : std::string("null"), shown,
      json_text(fmt::format("{}", fmt::join(p.overrides, " "))), p.report.memory.peak_allocated.value,
      p.report.memory.peak_reserved.value);
  return std::move(out);
}

}  // namespace coopsim::snapshot_cli
