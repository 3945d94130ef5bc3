// Human-readable report and comparison table.
#include <fmt/format.h>

#include <ostream>

#include "coopsim/model/report.hpp"
#include "coopsim/output/oom_verdict.hpp"

namespace coopsim {
namespace {
std::string pct(double x) { return fmt::format("{:.2f}%", 100.0 * x); }
}  // namespace

void write_text(std::ostream& os, const Report& r) {
  auto line = [&](std::string_view k, const std::string& v) { os << fmt::format("  {:<30} {}\n", k, v); };
  os << fmt::format("coopsim {} — {} on {} ({} iteration{})\n", r.coopsim_version, r.model.empty() ? "?" : r.model,
                    r.trace_path, r.iterations, r.iterations == 1 ? "" : "s");
  line("allocator / policy", r.allocator + " / " + r.policy);
  line("budget", format_bytes(r.budget));
  line("status", std::string(to_string(r.status)));
  if (r.oom) {
    const OomPoint& o = *r.oom;
    line("oom verdict", oom_verdict(o, r.budget).line);
    line("oom at event", fmt::format("{} (iteration {})", index_of(o.event), o.iteration));
    line("oom tensor", fmt::format("{}{}", o.tensor_file_id, o.tensor_name.empty() ? "" : " (" + o.tensor_name + ")"));
    line("oom op", o.has_op ? fmt::format("{} ({})", o.op_file_id, o.op_name) : std::string("-"));
    line("oom requested", format_bytes(o.requested));
    line("oom allocated / reserved", format_bytes(o.allocated) + " / " + format_bytes(o.reserved));
    line("oom largest free block", format_bytes(o.largest_free));
    // memory_viz's segsum view: where the reserved bytes went.
    const OomSegsum& s = o.segsum;
    line("oom fragmentation", fmt::format("requested {}; internal {} (allocated - requested); external {} cached "
                                          "free, {} of it inactive split (in segments that hold blocks)",
                                          format_bytes(s.requested_live), format_bytes(s.internal_fragmentation),
                                          format_bytes(s.cached_free), format_bytes(s.inactive_split)));
    for (const OomPool& p : s.pools) {
      line("oom pool " + p.pool, fmt::format("{} segment{}: reserved {}, allocated {}, largest free block {}",
                                             p.segments, p.segments == 1 ? "" : "s", format_bytes(p.reserved),
                                             format_bytes(p.allocated), format_bytes(p.largest_free)));
    }
    for (std::size_t i = 0; i < s.holders.size(); ++i) {
      const OomHolder& h = s.holders[i];
      line(i == 0 ? "oom largest holders" : "",
           fmt::format("{} tensor {}{} ({}{})", format_bytes(h.size), h.tensor_file_id,
                       h.name.empty() ? "" : " " + h.name, h.role, h.op_name.empty() ? "" : ", from " + h.op_name));
    }
  }
  if (r.limit) {
    line("limit at event", fmt::format("{} (iteration {}): victim searches examined more than {} candidates "
                                       "(limits.max_search_steps)",
                                       index_of(r.limit->event), r.limit->iteration, r.limit->search_steps));
  }
  if (r.thrash) {
    line("thrash at event",
         fmt::format("{} (iteration {}): recompute {} over op time {}", index_of(r.thrash->event), r.thrash->iteration,
                     format_time(r.thrash->recompute_time), format_time(r.thrash->op_time)));
  }
  if (r.infeasible) {
    line("infeasible", fmt::format("the recorded initial state ({} in {} segment{}) exceeds the budget; use a larger "
                                   "budget or --initial-state empty",
                                   format_bytes(r.infeasible->recorded_reserved), r.infeasible->segments,
                                   r.infeasible->segments == 1 ? "" : "s"));
  }
  line("memory ratio",
       fmt::format("{:.4f} of the no-eviction peak ({}), {:.4f} of the sweep's largest budget", r.memory_ratio_of_peak,
                   format_bytes(r.trace_peak_live), r.memory_ratio_of_sweep_max));
  const MemoryFigures& m = r.memory;
  os << " memory\n";
  line("peak allocated", format_bytes(m.peak_allocated) + " (max_memory_allocated)");
  line("peak reserved", format_bytes(m.peak_reserved) + " (max_memory_reserved)");
  line("peak requested", format_bytes(m.peak_requested));
  line("peak footprint", format_bytes(m.peak_footprint));
  line("peak internal waste", format_bytes(m.peak_internal_waste));
  line("fragmentation (reserved peak)", pct(m.reserved_fragmentation));
  line("fragmentation (Coop rate)",
       m.coop_fragmentation_samples
           ? fmt::format("{} over {} allocations", pct(m.coop_fragmentation), m.coop_fragmentation_samples)
           : std::string("n/a (no allocation needed eviction)"));
  if (r.pool) {
    const PoolFigures& p = *r.pool;
    line("pool",
         fmt::format("{} (iteration {}{}; {} pool / {} device allocs, {} mismatched; fallback peak {})",
                     format_bytes(p.pool_size), p.planned_iteration, p.pool_created ? "" : ", refused", p.pool_allocs,
                     p.fallback_allocs, p.mismatched_allocs, format_bytes(p.peak_fallback_live)));
  }
  const TimeFigures& t = r.time;
  os << " time\n";
  line("simulated", format_time(t.simulated));
  line("trace compute", format_time(t.trace_compute));
  line("compute overhead", fmt::format("{:.4f}x", t.compute_overhead));
  line("stall", format_time(t.stall));
  line("recomputes", fmt::format("{} ({})", t.recomputes, format_time(t.recompute_time)));
  if (t.op_time.count() > 0) {  // a trace without compute (an allocator-only snapshot) has no Coop clock
    line("recompute overhead (Coop)", fmt::format("{:.4f}x of op time {}", t.recompute_overhead, format_time(t.op_time)));
  }
  line("swap out / in", fmt::format("{} ({}) / {} ({})", t.swap_outs, format_bytes(t.swap_out_bytes), t.swap_ins,
                                    format_bytes(t.swap_in_bytes)));
  const CounterFigures& c = r.counters;
  os << " counters\n";
  line("events / allocs / frees", fmt::format("{} / {} / {}", c.events, c.allocs, c.frees));
  line("evictions (forced / eager)", fmt::format("{} / {}", c.forced_evictions, c.eager_evictions));
  line("device mallocs / frees", fmt::format("{} / {}", c.device_mallocs, c.device_frees));
  line("alloc failures / retries", fmt::format("{} / {}", c.alloc_failures, c.alloc_retries));
  line("num_alloc_retries / num_ooms", fmt::format("{} / {} (PyTorch's names)", c.alloc_retries, c.ooms));
  line("eviction search scanned", fmt::format("{} pieces/tensors", c.search_scanned));
  if (r.addresses.checked > 0) {
    const AddressCheck& a = r.addresses;
    line("recorded addresses", fmt::format("{} checked, {} mismatches", a.checked, a.mismatches));
    if (a.mismatches > 0) {
      line("first mismatch", fmt::format("event {}: recorded 0x{:x}, placed 0x{:x}", index_of(a.first_mismatch_event),
                                         a.first_expected, a.first_got));
    }
  }
  if (r.end_state) {
    const EndStateCheck& e = *r.end_state;
    line("recorded end state", fmt::format("segments {} ({} recorded, {} modelled), reserved {} ({} vs {})",
                                           e.segments_match ? "match" : "differ", e.recorded_segments, e.model_segments,
                                           e.reserved_match ? "match" : "differ", format_bytes(e.recorded_reserved),
                                           format_bytes(e.model_reserved)));
    if (!e.first_difference.empty()) line("first difference", e.first_difference);
  }
  if (r.search_latency) line("search latency", format_time(*r.search_latency));
}

void write_summary_table(std::ostream& os, const std::vector<Report>& reports) {
  os << fmt::format("{:<10} {:<8} {:>11} {:>6} {:>9} {:>12} {:>12} {:>12} {:>8} {:>10} {:>8}\n", "allocator", "policy",
                    "budget", "ratio", "status", "peak alloc", "peak resv", "footprint", "frag", "overhead", "recomp");
  for (const Report& r : reports) {
    os << fmt::format("{:<10} {:<8} {:>11} {:>6.3f} {:>9} {:>12} {:>12} {:>12} {:>8} {:>9.4f}x {:>8}\n", r.allocator,
                      r.policy, format_bytes(r.budget), r.memory_ratio_of_peak, to_string(r.status),
                      format_bytes(r.memory.peak_allocated), format_bytes(r.memory.peak_reserved),
                      format_bytes(r.memory.peak_footprint), pct(r.memory.reserved_fragmentation),
                      r.time.compute_overhead, r.time.recomputes);
  }
}

}  // namespace coopsim
