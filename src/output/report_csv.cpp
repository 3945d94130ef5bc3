// CSV rows with a fixed, documented column set (docs/architecture.md, "Report columns").
#include <fmt/format.h>

#include "coopsim/model/report.hpp"

namespace coopsim {
namespace {
// Quote a field when it holds a separator, a quote or a newline (RFC 4180).
std::string field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}
}  // namespace

std::string csv_header() {
  return "trace,model,trace_hash,allocator,policy,budget_bytes,status,peak_allocated_bytes,"
         "peak_reserved_bytes,peak_requested_bytes,peak_footprint_bytes,reserved_fragmentation,"
         "coop_fragmentation,simulated_ns,trace_compute_ns,compute_overhead,stall_ns,recomputes,"
         "recompute_ns,swap_outs,swap_out_bytes,swap_ins,swap_in_bytes,forced_evictions,"
         "eager_evictions,allocs,frees,device_mallocs,alloc_retries,oom_event,oom_requested_bytes,"
         "search_latency_ns,addresses_checked,address_mismatches,op_time_ns,recompute_overhead,"
         "search_scanned,memory_ratio_of_peak,memory_ratio_of_sweep_max,thrash_event,pool_bytes,"
         "peak_fallback_live_bytes,mismatched_allocs";
}

std::string csv_row(const Report& r) {
  const auto& m = r.memory;
  const auto& t = r.time;
  const auto& c = r.counters;
  return fmt::format(
      "{},{},{:016x},{},{},{},{},{},{},{},{},{:.6f},{},{},{},{:.6f},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},"
      "{},{},{:.6f},{},{:.6f},{:.6f},{},{},{},{}",
      field(r.trace_path), field(r.model), r.trace_hash, r.allocator, r.policy, r.budget.value, to_string(r.status),
      m.peak_allocated.value, m.peak_reserved.value, m.peak_requested.value, m.peak_footprint.value,
      m.reserved_fragmentation,
      m.coop_fragmentation_samples ? fmt::format("{:.6f}", m.coop_fragmentation) : std::string(), t.simulated.count(),
      t.trace_compute.count(), t.compute_overhead, t.stall.count(), t.recomputes, t.recompute_time.count(), t.swap_outs,
      t.swap_out_bytes.value, t.swap_ins, t.swap_in_bytes.value, c.forced_evictions, c.eager_evictions, c.allocs,
      c.frees, c.device_mallocs, c.alloc_retries, r.oom ? std::to_string(index_of(r.oom->event)) : std::string(),
      r.oom ? std::to_string(r.oom->requested.value) : std::string(),
      r.search_latency ? std::to_string(r.search_latency->count()) : std::string(), r.addresses.checked,
      r.addresses.mismatches, t.op_time.count(), t.recompute_overhead, c.search_scanned, r.memory_ratio_of_peak,
      r.memory_ratio_of_sweep_max, r.thrash ? std::to_string(index_of(r.thrash->event)) : std::string(),
      r.pool ? std::to_string(r.pool->pool_size.value) : std::string(),
      r.pool ? std::to_string(r.pool->peak_fallback_live.value) : std::string(),
      r.pool ? std::to_string(r.pool->mismatched_allocs) : std::string());
}

}  // namespace coopsim
