// ReportBuilder (coopsim/engine/report_builder.hpp): the parts that run once per run.
#include "coopsim/engine/report_builder.hpp"

#include "coopsim_config.h"

namespace coopsim {

namespace {

double ratio(Bytes part, Bytes whole) { return static_cast<double>(part.value) / static_cast<double>(whole.value); }

}  // namespace

void ReportBuilder::identify(const Trace& trace, const std::string& allocator, const std::string& policy, Bytes budget,
                             nlohmann::ordered_json config) {
  r_.coopsim_version = COOPSIM_VERSION;
  r_.trace_path = trace.path;
  r_.model = trace.header.model;
  r_.trace_hash = trace.content_hash;
  r_.iterations = trace.header.iterations;
  r_.allocator = allocator;
  r_.policy = policy;
  r_.budget = budget;
  r_.trace_peak_live = summarize(trace).peak_live;
  r_.memory_ratio_of_peak = r_.trace_peak_live.value == 0 ? 0.0 : ratio(budget, r_.trace_peak_live);
  r_.config = std::move(config);
}

void ReportBuilder::simulated_elsewhere(std::uint64_t recomputes, SimTime recompute_time,
                                        std::uint64_t forced_evictions, std::uint64_t eager_evictions, Bytes peak) {
  r_.time.recompute_time = recompute_time;
  r_.time.recomputes = recomputes;
  r_.counters.forced_evictions = forced_evictions;
  r_.counters.eager_evictions = eager_evictions;
  // simrd's one memory counter: what it holds is allocated and reserved alike.
  r_.memory.peak_requested = peak;
  r_.memory.peak_allocated = peak;
  r_.memory.peak_reserved = peak;
  r_.memory.allocated_at_reserved_peak = peak;
}

void ReportBuilder::finished(const AllocatorStats& s, const Clocks& clocks, std::optional<PoolFigures> pool,
                             bool search_latency_measured) {
  MemoryFigures& m = r_.memory;
  m.final_allocated = s.allocated;
  m.final_reserved = s.reserved;
  m.reserved_fragmentation =
      m.peak_reserved.value == 0 ? 0.0 : 1.0 - ratio(m.allocated_at_reserved_peak, m.peak_reserved);
  r_.counters.alloc_retries = s.alloc_retries;
  r_.counters.device_mallocs = s.device_mallocs;
  r_.counters.device_frees = s.device_frees;
  TimeFigures& t = r_.time;
  t.simulated = clocks.simulated;
  t.trace_compute = clocks.trace_compute;
  t.compute_overhead = clocks.trace_compute.count() == 0 ? 1.0
                                                         : static_cast<double>(clocks.simulated.count()) /
                                                               static_cast<double>(clocks.trace_compute.count());
  t.op_time = clocks.op_time;
  t.recompute_overhead = clocks.op_time.count() == 0
                             ? 1.0
                             : static_cast<double>((clocks.op_time + t.recompute_time).count()) /
                                   static_cast<double>(clocks.op_time.count());
  r_.counters.search_scanned = scanned_;
  r_.pool = pool;
  if (search_latency_measured) r_.search_latency = std::chrono::duration_cast<SimTime>(policy_time_);
}

void ReportBuilder::place_in_sweep(Report& r, Bytes largest_budget) {
  r.memory_ratio_of_sweep_max = largest_budget.value == 0 ? 1.0 : ratio(r.budget, largest_budget);
}

void ReportBuilder::place_in_sweep(std::span<Report> reports) {
  Bytes largest;
  for (const Report& r : reports) largest = std::max(largest, r.budget);
  for (Report& r : reports) place_in_sweep(r, largest);
}

}  // namespace coopsim
