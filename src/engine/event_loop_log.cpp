// The engine's side of the run's event log (include/coopsim/model/runlog.hpp): one record per
// physical step, appended only when EngineOptions::log is set. The loop writes the records; the
// executors say which storage, version and block each one touches (SwapExecutor::storage_ref,
// RematExecutor::value_ref).
#include "event_loop.hpp"

namespace coopsim {

std::string_view to_string(LogKind k) {
  switch (k) {
    case LogKind::Alloc: return "alloc";
    case LogKind::Free: return "free";
    case LogKind::Compute: return "compute";
    case LogKind::Recompute: return "recompute";
    case LogKind::Access: return "access";
    case LogKind::SwapOut: return "swap_out";
    case LogKind::SwapIn: return "swap_in";
    case LogKind::Evict: return "evict";
    case LogKind::Stall: return "stall";
    case LogKind::Memory: return "memory";
  }
  return "?";
}

namespace engine_detail {

void EventLoop::log_alloc(TensorId storage, const Block& b, bool fresh) {
  if (!logging()) return;
  LogRecord r;
  r.kind = LogKind::Alloc;
  r.fresh = fresh;
  r.stream = b.stream;
  r.start = r.end = now_;
  r.event = EventId{static_cast<std::uint32_t>(index_)};
  opt_.log->add(r, {LogRef{storage, 0, b.addr, b.size}});
}

void EventLoop::log_free(TensorId storage, const Block& b) {
  log_point(LogKind::Free, LogRef{storage, 0, b.addr, b.size});
}

void EventLoop::log_transfer(LogKind kind, const Completion& c, const LogRef& ref) {
  if (!logging()) return;
  LogRecord r;
  r.kind = kind;
  r.start = c.start;
  r.end = c.time;
  r.event = EventId{static_cast<std::uint32_t>(index_)};
  opt_.log->add(r, {ref});
}

void EventLoop::log_point(LogKind kind, const LogRef& ref, bool forced) {
  if (!logging()) return;
  LogRecord r;
  r.kind = kind;
  r.forced = forced;
  r.start = r.end = now_;
  r.event = EventId{static_cast<std::uint32_t>(index_)};
  opt_.log->add(r, {ref});
}

void EventLoop::log_stall(SimTime from, SimTime to) {
  if (!logging()) return;
  LogRecord r;
  r.kind = LogKind::Stall;
  r.start = from;
  r.end = to;
  r.event = EventId{static_cast<std::uint32_t>(index_)};
  opt_.log->add(r);
}

void EventLoop::log_memory() {
  if (!logging()) return;
  const AllocatorStats s = alloc_.stats();
  if (s.allocated == logged_allocated_ && s.reserved == logged_reserved_) return;
  logged_allocated_ = s.allocated;
  logged_reserved_ = s.reserved;
  LogRecord r;
  r.kind = LogKind::Memory;
  r.start = r.end = now_;
  r.event = EventId{static_cast<std::uint32_t>(index_)};
  r.allocated = s.allocated;
  r.reserved = s.reserved;
  opt_.log->add(r);
}

void EventLoop::segment_changed(const SegmentChange& change) {
  RunLog& log = *opt_.log;  // observed only while logging
  log.segments.push_back(LogSegment{change, now_, static_cast<std::uint32_t>(log.records.size()),
                                    EventId{static_cast<std::uint32_t>(index_)}});
}

std::uint32_t EventLoop::log_op(LogKind kind, OpId op, SimTime start, const std::vector<LogRef>& reads,
                                const std::vector<LogRef>& writes, std::uint32_t origin) {
  if (!logging()) return kNoRecord;
  RunLog& log = *opt_.log;
  LogRecord r;
  r.kind = kind;
  r.start = start;
  r.end = now_;
  r.op = op;
  r.event = EventId{static_cast<std::uint32_t>(index_)};
  r.origin = RecordId{origin};
  r.reads = static_cast<std::uint32_t>(reads.size());
  r.writes = static_cast<std::uint32_t>(writes.size());
  r.first = static_cast<std::uint32_t>(log.refs.size());
  log.refs.insert(log.refs.end(), reads.begin(), reads.end());
  log.refs.insert(log.refs.end(), writes.begin(), writes.end());
  log.records.push_back(r);
  return static_cast<std::uint32_t>(log.records.size() - 1);
}

}  // namespace engine_detail
}  // namespace coopsim
