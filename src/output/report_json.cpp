// JSON form of a Report. Key order is fixed (ordered_json) so reports are byte-identical.
#include "coopsim/model/report.hpp"
#include "coopsim/base/schema_version.hpp"
#include "coopsim/output/oom_verdict.hpp"

#include <fmt/format.h>

namespace coopsim {

std::string_view to_string(RunStatus s) {
  switch (s) {
    case RunStatus::Completed: return "completed";
    case RunStatus::OutOfMemory: return "oom";
    case RunStatus::Thrashed: return "thrash";
    case RunStatus::Infeasible: return "infeasible";
    case RunStatus::Limited: return "limit";
  }
  return "?";
}

nlohmann::ordered_json to_json(const Report& r) {
  using J = nlohmann::ordered_json;
  J j;
  j["schema_version"] = schema_version::kReport;
  j["coopsim_version"] = r.coopsim_version;
  j["trace"] = {{"path", r.trace_path},
                {"model", r.model},
                {"hash", fmt::format("{:016x}", r.trace_hash)},
                {"iterations", r.iterations}};
  j["allocator"] = r.allocator;
  j["policy"] = r.policy;
  j["budget_bytes"] = r.budget.value;
  j["status"] = std::string(to_string(r.status));
  if (r.oom) {
    const OomPoint& o = *r.oom;
    J oj;
    oj["event_index"] = index_of(o.event);
    oj["iteration"] = o.iteration;
    oj["tensor"] = o.tensor_file_id;
    oj["tensor_name"] = o.tensor_name;
    oj["op"] = o.has_op ? J(o.op_file_id) : J(nullptr);
    oj["op_name"] = o.has_op ? J(o.op_name) : J(nullptr);
    oj["requested_bytes"] = o.requested.value;
    oj["allocated_bytes"] = o.allocated.value;
    oj["reserved_bytes"] = o.reserved.value;
    oj["largest_free_bytes"] = o.largest_free.value;
    const OomVerdict verdict = oom_verdict(o, r.budget);
    oj["verdict"] = {{"kind", std::string(to_string(verdict.kind))},
                     {"free_bytes", verdict.free.value},
                     {"short_bytes", verdict.short_by.value},
                     {"line", verdict.line}};
    const OomSegsum& s = o.segsum;
    J pools = J::array();
    for (const OomPool& p : s.pools) {
      pools.push_back({{"pool", p.pool},
                       {"segments", p.segments},
                       {"reserved_bytes", p.reserved.value},
                       {"allocated_bytes", p.allocated.value},
                       {"largest_free_bytes", p.largest_free.value}});
    }
    J holders = J::array();
    for (const OomHolder& h : s.holders) {
      holders.push_back({{"tensor", h.tensor_file_id},
                         {"name", h.name},
                         {"role", h.role},
                         {"op_name", h.op_name.empty() ? J(nullptr) : J(h.op_name)},
                         {"block_bytes", h.size.value}});
    }
    oj["segsum"] = {{"requested_bytes", s.requested_live.value},
                    {"internal_fragmentation_bytes", s.internal_fragmentation.value},
                    {"cached_free_bytes", s.cached_free.value},
                    {"inactive_split_bytes", s.inactive_split.value},
                    {"pools", pools},
                    {"largest_holders", holders}};
    j["oom"] = oj;
  } else {
    j["oom"] = nullptr;
  }
  if (r.thrash) {
    j["thrash"] = {{"event_index", index_of(r.thrash->event)},
                   {"iteration", r.thrash->iteration},
                   {"recompute_ns", r.thrash->recompute_time.count()},
                   {"op_time_ns", r.thrash->op_time.count()}};
  } else {
    j["thrash"] = nullptr;
  }
  // Only runs that reach limits.max_search_steps have the key (other reports stay as they were).
  if (r.limit) {
    j["limit"] = {{"key", "limits.max_search_steps"},
                  {"event_index", index_of(r.limit->event)},
                  {"iteration", r.limit->iteration},
                  {"search_steps", r.limit->search_steps}};
  }
  // Only simulations of snapshots can be infeasible: the key is absent otherwise (reports of other
  // traces stay as they were).
  if (r.infeasible) {
    j["infeasible"] = {{"recorded_reserved_bytes", r.infeasible->recorded_reserved.value},
                       {"recorded_segments", r.infeasible->segments}};
  }
  j["memory_ratio"] = {{"trace_peak_live_bytes", r.trace_peak_live.value},
                       {"of_peak", r.memory_ratio_of_peak},
                       {"of_sweep_max", r.memory_ratio_of_sweep_max}};
  const MemoryFigures& m = r.memory;
  j["memory"] = {
      {"peak_allocated_bytes", m.peak_allocated.value},
      {"peak_reserved_bytes", m.peak_reserved.value},
      {"peak_requested_bytes", m.peak_requested.value},
      {"peak_footprint_bytes", m.peak_footprint.value},
      {"peak_internal_waste_bytes", m.peak_internal_waste.value},
      {"allocated_at_reserved_peak_bytes", m.allocated_at_reserved_peak.value},
      {"final_allocated_bytes", m.final_allocated.value},
      {"final_reserved_bytes", m.final_reserved.value},
      {"reserved_fragmentation", m.reserved_fragmentation},
      {"coop_fragmentation", m.coop_fragmentation_samples ? J(m.coop_fragmentation) : J(nullptr)},
      {"coop_fragmentation_samples", m.coop_fragmentation_samples},
  };
  // The peaks under the names torch.cuda.memory_stats() gives them (docs/user-guide.md).
  j["pytorch_memory_stats"] = {{"max_memory_allocated", m.peak_allocated.value},
                               {"max_memory_reserved", m.peak_reserved.value},
                               {"num_alloc_retries", r.counters.alloc_retries},
                               {"num_ooms", r.counters.ooms}};
  if (r.pool) {
    const PoolFigures& p = *r.pool;
    j["pool"] = {{"pool_bytes", p.pool_size.value},
                 {"pool_created", p.pool_created},
                 {"planned_iteration", p.planned_iteration},
                 {"pool_allocs", p.pool_allocs},
                 {"fallback_allocs", p.fallback_allocs},
                 {"fallback_bytes", p.fallback_bytes.value},
                 {"mismatched_allocs", p.mismatched_allocs},
                 {"mismatched_bytes", p.mismatched_bytes.value},
                 {"peak_fallback_live_bytes", p.peak_fallback_live.value}};
  } else {
    j["pool"] = nullptr;
  }
  const TimeFigures& t = r.time;
  j["time"] = {
      {"simulated_ns", t.simulated.count()},
      {"trace_compute_ns", t.trace_compute.count()},
      {"compute_overhead", t.compute_overhead},
      {"op_time_ns", t.op_time.count()},
      {"recompute_overhead", t.recompute_overhead},
      {"stall_ns", t.stall.count()},
      {"recomputes", t.recomputes},
      {"recompute_ns", t.recompute_time.count()},
      {"swap_outs", t.swap_outs},
      {"swap_out_bytes", t.swap_out_bytes.value},
      {"swap_ins", t.swap_ins},
      {"swap_in_bytes", t.swap_in_bytes.value},
  };
  const CounterFigures& c = r.counters;
  j["counters"] = {
      {"events", c.events},
      {"allocs", c.allocs},
      {"frees", c.frees},
      {"accesses", c.accesses},
      {"computes", c.computes},
      {"forced_evictions", c.forced_evictions},
      {"eager_evictions", c.eager_evictions},
      {"alloc_failures", c.alloc_failures},
      {"alloc_retries", c.alloc_retries},
      {"device_mallocs", c.device_mallocs},
      {"device_frees", c.device_frees},
      {"policy_decisions", c.policy_decisions},
      {"search_scanned", c.search_scanned},
  };
  const AddressCheck& a = r.addresses;
  j["address_check"] = {
      {"checked", a.checked},
      {"mismatches", a.mismatches},
      {"first_mismatch", a.mismatches == 0 ? J(nullptr)
                                           : J{{"event_index", index_of(a.first_mismatch_event)},
                                               {"recorded", fmt::format("0x{:x}", a.first_expected)},
                                               {"placed", fmt::format("0x{:x}", a.first_got)}}},
  };
  if (r.end_state) {
    const EndStateCheck& e = *r.end_state;
    j["end_state"] = {{"segments_match", e.segments_match},
                      {"reserved_match", e.reserved_match},
                      {"recorded_segments", e.recorded_segments},
                      {"model_segments", e.model_segments},
                      {"recorded_reserved_bytes", e.recorded_reserved.value},
                      {"model_reserved_bytes", e.model_reserved.value},
                      {"first_difference", e.first_difference.empty() ? J(nullptr) : J(e.first_difference)}};
  } else {
    j["end_state"] = nullptr;
  }
  j["search_latency_ns"] = r.search_latency ? J(r.search_latency->count()) : J(nullptr);
  j["config"] = r.config;
  return j;
}

}  // namespace coopsim
