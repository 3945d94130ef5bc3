// Builds event logs (include/coopsim/model/runlog.hpp) by hand for the auditor and export tests,
// record by record, the way the engine appends them.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "coopsim/model/runlog.hpp"
#include "trace_builder.hpp"

namespace coopsim::test {

// Tensors a (0), b (1), c (2) of 400 bytes; ops f: -> a (10 ns), g: a -> b (20 ns), h: b -> c
// (30 ns). Events: 0 alloc a, 1 f, 2 alloc b, 3 g, 4 free a, 5 alloc c, 6 h, 7 free b, 8 free c.
inline Trace chain_trace() {
  TraceBuilder b;
  const auto a = b.tensor(400, TensorRole::Activation, "a");
  const auto bb = b.tensor(400, TensorRole::Gradient, "b");
  const auto c = b.tensor(400, TensorRole::Activation, "c");
  const auto f = b.op("f", 10, {}, {a});
  const auto g = b.op("g", 20, {a}, {bb});
  const auto h = b.op("h", 30, {bb}, {c});
  b.alloc(a).compute(f).alloc(bb).compute(g).free(a).alloc(c).compute(h).free(bb).free(c);
  return b.trace();
}

inline LogRef ref(std::uint32_t storage, std::uint32_t version, std::uint64_t addr, std::uint64_t size = 512) {
  return LogRef{TensorId{storage}, version, addr, Bytes{size}};
}

class LogBuilder {
 public:
  explicit LogBuilder(std::uint64_t budget = 1024, bool address_aware = true) {
    log_.budget = Bytes{budget};
    log_.address_aware = address_aware;
  }
  LogBuilder& alloc(std::uint32_t ev, LogRef r, bool fresh = true, std::int64_t t = 0) {
    return add(LogKind::Alloc, ev, t, t, {r}, fresh);
  }
  LogBuilder& free(std::uint32_t ev, LogRef r, std::int64_t t = 0) { return add(LogKind::Free, ev, t, t, {r}); }
  LogBuilder& compute(std::uint32_t ev, std::uint32_t op, std::int64_t t0, std::int64_t t1, std::vector<LogRef> reads,
                      std::vector<LogRef> writes) {
    return op_record(LogKind::Compute, ev, op, kNoRecord, t0, t1, std::move(reads), std::move(writes));
  }
  LogBuilder& recompute(std::uint32_t ev, std::uint32_t op, std::uint32_t origin, std::int64_t t0, std::int64_t t1,
                        std::vector<LogRef> reads, std::vector<LogRef> writes) {
    return op_record(LogKind::Recompute, ev, op, origin, t0, t1, std::move(reads), std::move(writes));
  }
  LogBuilder& swap_out(std::uint32_t ev, std::int64_t t0, std::int64_t t1, LogRef r) {
    return add(LogKind::SwapOut, ev, t0, t1, {r});
  }
  LogBuilder& swap_in(std::uint32_t ev, std::int64_t t0, std::int64_t t1, LogRef r) {
    return add(LogKind::SwapIn, ev, t0, t1, {r});
  }
  LogBuilder& evict(std::uint32_t ev, LogRef r, std::int64_t t = 0, bool forced = true) {
    add(LogKind::Evict, ev, t, t, {r});
    log_.records.back().forced = forced;
    return *this;
  }
  LogBuilder& access(std::uint32_t ev, std::int64_t t, LogRef r) { return add(LogKind::Access, ev, t, t, {r}); }
  LogBuilder& stall(std::uint32_t ev, std::int64_t t0, std::int64_t t1) { return add(LogKind::Stall, ev, t0, t1, {}); }
  LogBuilder& memory(std::uint32_t ev, std::uint64_t allocated, std::uint64_t reserved, std::int64_t t = 0) {
    add(LogKind::Memory, ev, t, t, {});
    log_.records.back().allocated = Bytes{allocated};
    log_.records.back().reserved = Bytes{reserved};
    return *this;
  }
  [[nodiscard]] const RunLog& log() const { return log_; }

 private:
  LogBuilder& add(LogKind k, std::uint32_t ev, std::int64_t t0, std::int64_t t1, std::vector<LogRef> refs,
                  bool fresh = false) {
    LogRecord r;
    r.kind = k;
    r.fresh = fresh;
    r.event = EventId{ev};
    r.start = SimTime{t0};
    r.end = SimTime{t1};
    r.first = static_cast<std::uint32_t>(log_.refs.size());
    log_.refs.insert(log_.refs.end(), refs.begin(), refs.end());
    log_.records.push_back(r);
    return *this;
  }
  LogBuilder& op_record(LogKind k, std::uint32_t ev, std::uint32_t op, std::uint32_t origin, std::int64_t t0,
                        std::int64_t t1, std::vector<LogRef> reads, std::vector<LogRef> writes) {
    add(k, ev, t0, t1, {});
    LogRecord& r = log_.records.back();
    r.op = OpId{op};
    r.origin = RecordId{origin};
    r.reads = static_cast<std::uint16_t>(reads.size());
    r.writes = static_cast<std::uint16_t>(writes.size());
    log_.refs.insert(log_.refs.end(), reads.begin(), reads.end());
    log_.refs.insert(log_.refs.end(), writes.begin(), writes.end());
    return *this;
  }
  RunLog log_;
};

}  // namespace coopsim::test
