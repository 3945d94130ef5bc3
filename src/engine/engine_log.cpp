// The engine's side of the run's event log (include/coopsim/model/runlog.hpp): one record per
// physical step, appended only when EngineOptions::log is set. Versions count the trace's
// writes to a storage since its allocation (version_ per storage; value_version_ per value
// under recompute policies, where a recompute writes its value's version again).
#include "engine_impl.hpp"

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

LogRef Engine::storage_ref(std::uint32_t s) const { return LogRef{s, version_[s], blocks_[s].addr, blocks_[s].size}; }

LogRef Engine::value_ref(std::uint32_t v) const {
  const RematValue& x = graph_.value(v);
  return LogRef{x.storage, value_version_[v], x.block.addr, x.block.size};
}

void Engine::log_alloc(std::uint32_t storage, const Block& b, bool fresh) {
  if (!logging()) return;
  LogRecord r;
  r.kind = LogKind::Alloc;
  r.fresh = fresh;
  r.stream = b.stream;
  r.start = r.end = now_;
  r.event = static_cast<std::uint32_t>(index_);
  opt_.log->add(r, {LogRef{storage, 0, b.addr, b.size}});
}

void Engine::log_free(std::uint32_t storage, const Block& b) {
  if (!logging()) return;
  LogRecord r;
  r.kind = LogKind::Free;
  r.start = r.end = now_;
  r.event = static_cast<std::uint32_t>(index_);
  opt_.log->add(r, {LogRef{storage, 0, b.addr, b.size}});
}

void Engine::log_transfer(LogKind kind, const Completion& c, const LogRef& ref) {
  if (!logging()) return;
  LogRecord r;
  r.kind = kind;
  r.start = c.start;
  r.end = c.time;
  r.event = static_cast<std::uint32_t>(index_);
  opt_.log->add(r, {ref});
}

void Engine::log_stall(SimTime from, SimTime to) {
  if (!logging()) return;
  LogRecord r;
  r.kind = LogKind::Stall;
  r.start = from;
  r.end = to;
  r.event = static_cast<std::uint32_t>(index_);
  opt_.log->add(r);
}

void Engine::log_memory() {
  if (!logging()) return;
  const AllocatorStats s = alloc_.stats();
  if (s.allocated.value == logged_allocated_ && s.reserved.value == logged_reserved_) return;
  logged_allocated_ = s.allocated.value;
  logged_reserved_ = s.reserved.value;
  LogRecord r;
  r.kind = LogKind::Memory;
  r.start = r.end = now_;
  r.event = static_cast<std::uint32_t>(index_);
  r.a = s.allocated.value;
  r.b = s.reserved.value;
  opt_.log->add(r);
}

// The op reads its inputs' storages and writes its non-view outputs and its mutated inputs
// (each storage once, in list order).
void Engine::log_compute(std::uint32_t op_index, SimTime start) {
  const OpInfo& op = trace_.ops[op_index];
  std::vector<LogRef> reads, writes;
  auto listed = [](const std::vector<LogRef>& v, std::uint32_t s) {
    return std::any_of(v.begin(), v.end(), [&](const LogRef& r) { return r.storage == s; });
  };
  for (TensorId x : op.inputs) {
    const std::uint32_t s = trace_.storage_of(index_of(x));
    if (!listed(reads, s)) reads.push_back(storage_ref(s));
  }
  auto write = [&](std::uint32_t s) {
    if (listed(writes, s)) return;
    ++version_[s];
    writes.push_back(storage_ref(s));
  };
  for (TensorId x : op.outputs) {
    if (!trace_.tensors[index_of(x)].is_view()) write(index_of(x));
  }
  for (TensorId x : op.mutated) write(trace_.storage_of(index_of(x)));
  log_op(LogKind::Compute, op_index, start, reads, writes);
}

std::uint32_t Engine::log_op(LogKind kind, std::uint32_t op, SimTime start, const std::vector<LogRef>& reads,
                             const std::vector<LogRef>& writes, std::uint32_t origin) {
  if (!logging()) return kNoRecord;
  RunLog& log = *opt_.log;
  LogRecord r;
  r.kind = kind;
  r.start = start;
  r.end = now_;
  r.op = op;
  r.event = static_cast<std::uint32_t>(index_);
  r.origin = origin;
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
