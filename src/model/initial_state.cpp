// --initial-state empty: a recording that starts from a recorded allocator state (an imported
// memory snapshot) simulated from an empty allocator instead. The tensors the recorded state
// held are allocated first, as requests, in the order the state lists them (segment by
// segment, block by block in address order); the rest of the trace is unchanged. Recorded
// addresses and the recorded end state describe the recorded allocator and are dropped, so
// allocator settings and budgets can be compared on the requests alone.
#include "coopsim/model/trace.hpp"

namespace coopsim {

Trace simulated_from_empty(const Trace& trace) {
  Trace out;
  out.path = trace.path;
  out.header = trace.header;
  if (out.header.extra.is_object()) out.header.extra.erase("final_segments");
  out.tensors = trace.tensors;
  out.ops = trace.ops;
  out.labels = trace.labels;
  out.content_hash = trace.content_hash;
  std::size_t seeded = 0;
  for (const InitialSegment& s : trace.initial_segments) {
    for (const InitialBlock& b : s.blocks) seeded += b.is_free() ? 0 : 1;
  }
  out.events.reserve(trace.events.size() + seeded);
  // Timed traces stay timed: the requests come at time 0, before the first recorded event.
  const bool timed = !trace.events.empty() && trace.events.front().timed();
  for (const InitialSegment& s : trace.initial_segments) {
    for (const InitialBlock& b : s.blocks) {
      if (b.is_free()) continue;
      TraceEvent e = TraceEvent::alloc(b.tensor, s.stream);
      if (timed) e.time = SimTime::zero();
      out.events.push_back(e);
    }
  }
  for (TraceEvent e : trace.events) {
    if (e.kind == EventKind::Alloc) e.addr = 0;
    out.events.push_back(e);
  }
  return out;
}

}  // namespace coopsim
