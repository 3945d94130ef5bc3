// Hand-built event logs (RunLog) for the plan export, loader and checker tests and the GPU
// replay tests, with the trace and report they belong to.
//
// swap(): w (1000 B in a 1024 B block), x, y, z (1024 B) on a 3072 B arena; ops
//   f: x, w -> y (1000 ns), g: y -> z (500 ns), h: z, w -> writes w in place (300 ns).
//   f runs, w is swapped out after it (d2h [1000, 1200)) while g runs, w comes back before h
//   (h2d [1500, 1700), a stall), and h updates w.
// remat(): x -> f -> y; y is evicted, freed, reallocated and recomputed, then accessed.
// in_place(): init writes a (64 MiB) and b (1 KiB), then `steps` 3 us ops each read b and a and
//   write a in place: a check of a fits in no such op, so each reads a thinned (every 1024th word)
//   while the same kernel writes a's next version.
#pragma once

#include <set>

#include "coopsim/replay/replay_plan.hpp"
#include "coopsim/model/link.hpp"
#include "coopsim/model/report.hpp"
#include "coopsim/model/runlog.hpp"
#include "trace_builder.hpp"

namespace coopsim::test {

struct LogScenario {
  Trace trace;
  RunLog log;
  Report report;
  LinkModel link;
};

inline LogRecord log_record(LogKind kind, std::int64_t start, std::int64_t end = -1) {
  LogRecord r;
  r.kind = kind;
  r.start = SimTime{start};
  r.end = SimTime{end < 0 ? start : end};
  return r;
}

inline LogRecord log_op(LogKind kind, std::uint32_t op, std::int64_t start, std::int64_t end, std::uint16_t reads,
                        std::uint16_t writes, std::uint32_t origin = kNoRecord) {
  LogRecord r = log_record(kind, start, end);
  r.op = OpId{op};
  r.reads = reads;
  r.writes = writes;
  r.origin = RecordId{origin};
  return r;
}

inline LogRecord log_alloc(std::int64_t t, bool fresh) {
  LogRecord r = log_record(LogKind::Alloc, t);
  r.fresh = fresh;
  return r;
}

inline LogScenario scenario_base(TraceBuilder& b, std::uint64_t budget) {
  LogScenario s;
  s.trace = b.trace();
  s.trace.path = "traces/handmade.jsonl";
  s.trace.content_hash = 0x0123456789abcdefULL;
  s.log.budget = Bytes{budget};
  s.report.coopsim_version = "0.1.0";
  s.report.trace_path = s.trace.path;
  s.report.model = "handmade";
  s.report.trace_hash = s.trace.content_hash;
  s.report.iterations = 1;
  s.report.allocator = "bestfit";
  s.report.budget = Bytes{budget};
  s.link = LinkModel{"pcie4-x16", {0.0378, SimTime{47200}}, {0.04115, SimTime{9700}}, true};
  return s;
}

// Records of swap() that can be left out to corrupt it.
enum SwapRecord : std::uint32_t { kSwapInAlloc = 10, kSwapIn = 11 };

inline LogScenario swap_scenario(const std::set<std::uint32_t>& drop = {}) {
  TraceBuilder b("handmade");
  const auto w = b.tensor(1000, TensorRole::Parameter, "w");
  const auto x = b.tensor(1024, TensorRole::Input, "x");
  const auto y = b.tensor(1024, TensorRole::Activation, "y");
  const auto z = b.tensor(1024, TensorRole::Activation, "z");
  b.op("f", 1000, {x, w}, {y});
  b.op("g", 500, {y}, {z});
  b.op("h", 300, {z, w}, {});
  LogScenario s = scenario_base(b, 3072);
  s.report.policy = "autoswap";
  s.report.time.simulated = SimTime{2000};
  s.report.time.stall = SimTime{200};
  s.report.time.op_time = SimTime{1800};
  const Bytes kb{1024};
  std::vector<std::pair<LogRecord, std::vector<LogRef>>> recs = {
      {log_alloc(0, true), {{TensorId{w}, 0, 0, kb}}},
      {log_alloc(0, true), {{TensorId{x}, 0, 1024, kb}}},
      {log_alloc(0, true), {{TensorId{y}, 0, 2048, kb}}},
      {log_op(LogKind::Compute, 0, 0, 1000, 2, 1),
       {{TensorId{x}, 0, 1024, kb}, {TensorId{w}, 0, 0, kb}, {TensorId{y}, 1, 2048, kb}}},
      {log_record(LogKind::Free, 1000), {{TensorId{x}, 0, 1024, kb}}},
      {log_alloc(1000, true), {{TensorId{z}, 0, 1024, kb}}},
      {log_op(LogKind::Compute, 1, 1000, 1500, 1, 1), {{TensorId{y}, 1, 2048, kb}, {TensorId{z}, 1, 1024, kb}}},
      {log_record(LogKind::SwapOut, 1000, 1200), {{TensorId{w}, 0, 0, kb}}},
      {log_record(LogKind::Free, 1500), {{TensorId{w}, 0, 0, kb}}},
      {log_record(LogKind::Free, 1500), {{TensorId{y}, 0, 2048, kb}}},
      {log_alloc(1500, false), {{TensorId{w}, 0, 0, kb}}},
      {log_record(LogKind::SwapIn, 1500, 1700), {{TensorId{w}, 0, 0, kb}}},
      {log_record(LogKind::Stall, 1500, 1700), {}},
      {log_op(LogKind::Compute, 2, 1700, 2000, 2, 1),
       {{TensorId{z}, 1, 1024, kb}, {TensorId{w}, 0, 0, kb}, {TensorId{w}, 1, 0, kb}}},
      {log_record(LogKind::Free, 2000), {{TensorId{z}, 0, 1024, kb}}},
  };
  for (std::uint32_t i = 0; i < recs.size(); ++i) {
    if (drop.count(i) != 0) continue;
    LogRecord r = recs[i].first;
    r.first = static_cast<std::uint32_t>(s.log.refs.size());
    s.log.refs.insert(s.log.refs.end(), recs[i].second.begin(), recs[i].second.end());
    s.log.records.push_back(r);
  }
  // A Memory record as the engine writes them: it carries no step.
  LogRecord mem = log_record(LogKind::Memory, 0);
  mem.allocated = Bytes{3072};
  mem.reserved = Bytes{3072};
  s.log.add(mem);
  return s;
}

inline LogScenario remat_scenario(bool drop_recompute = false) {
  TraceBuilder b("handmade");
  const auto x = b.tensor(2048, TensorRole::Input, "x");
  const auto y = b.tensor(1024, TensorRole::Activation, "y");
  b.op("f", 400, {x}, {y});
  LogScenario s = scenario_base(b, 4096);
  s.report.policy = "coop";
  s.report.time.simulated = SimTime{800};
  s.report.time.op_time = SimTime{400};
  s.report.time.recompute_time = SimTime{400};
  const Bytes k2{2048}, k1{1024};
  s.log.add(log_alloc(0, true), {{TensorId{x}, 0, 0, k2}});
  s.log.add(log_alloc(0, true), {{TensorId{y}, 0, 2048, k1}});
  const std::uint32_t compute = index_of(
      s.log.add(log_op(LogKind::Compute, 0, 0, 400, 1, 1), {{TensorId{x}, 0, 0, k2}, {TensorId{y}, 1, 2048, k1}}));
  LogRecord evict = log_record(LogKind::Evict, 400);
  evict.forced = true;
  s.log.add(evict, {{TensorId{y}, 1, 2048, k1}});
  s.log.add(log_record(LogKind::Free, 400), {{TensorId{y}, 1, 2048, k1}});
  s.log.add(log_alloc(400, false), {{TensorId{y}, 1, 3072, k1}});
  if (!drop_recompute) {
    s.log.add(log_op(LogKind::Recompute, 0, 400, 800, 1, 1, compute),
              {{TensorId{x}, 0, 0, k2}, {TensorId{y}, 1, 3072, k1}});
  }
  s.log.add(log_record(LogKind::Access, 800), {{TensorId{y}, 1, 3072, k1}});
  return s;
}

// `wrong_read` > 0: the op of that number (1-based) claims to read a version a never had there.
inline LogScenario in_place_scenario(std::uint32_t steps, std::uint32_t wrong_read = 0) {
  TraceBuilder b("handmade");
  const Bytes big{64ULL << 20}, small{1024};
  const auto a = b.tensor(big.value, TensorRole::Activation, "a");
  const auto x = b.tensor(small.value, TensorRole::Input, "b");
  b.op("init", 100000, {}, {a, x});
  b.op("acc", 3000, {x, a}, {});
  LogScenario s = scenario_base(b, big.value + small.value);
  s.report.policy = "keep";
  const std::int64_t end = 100000 + 3000 * static_cast<std::int64_t>(steps);
  s.report.time.simulated = SimTime{end};
  s.report.time.op_time = SimTime{end};
  s.log.add(log_alloc(0, true), {{TensorId{a}, 0, 0, big}});
  s.log.add(log_alloc(0, true), {{TensorId{x}, 0, big.value, small}});
  s.log.add(log_op(LogKind::Compute, 0, 0, 100000, 0, 2), {{TensorId{a}, 1, 0, big}, {TensorId{x}, 1, big.value, small}});
  for (std::uint32_t k = 1; k <= steps; ++k) {
    const std::int64_t t = 100000 + 3000 * static_cast<std::int64_t>(k - 1);
    const std::uint32_t read = k == wrong_read ? k + 7 : k;
    s.log.add(log_op(LogKind::Compute, 1, t, t + 3000, 2, 1),
              {{TensorId{x}, 1, big.value, small}, {TensorId{a}, read, 0, big}, {TensorId{a}, k + 1, 0, big}});
  }
  return s;
}

inline gpu::Plan plan_of(const LogScenario& s) { return gpu::plan_from_runlog(s.trace, s.log, s.report, s.link); }

}  // namespace coopsim::test
