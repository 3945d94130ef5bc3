// The one place a run's Report (coopsim/model/report.hpp) is written. run_simulation tells the
// builder what ran (identify, end_state); the engine's event loop and its executors tell it what
// happens (an allocation, a free, a copy, a stall, a stop...) and, at the end, the allocator's and
// the clocks' final figures; the builder keeps the counters and peaks and works out the derived
// figures (fragmentation, overhead ratios, memory ratios), then hands out the finished Report.
// Output writers only read Reports.
//
// The notifications the engine sends per event or per allocation are inline and plain (no
// virtual call): the simulation rate is that of the engine writing the fields itself.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "coopsim/alloc/allocator.hpp"
#include "coopsim/base/units.hpp"
#include "coopsim/model/report.hpp"
#include "coopsim/model/trace.hpp"

namespace coopsim {

class ReportBuilder {
 public:
  // --- What ran (run_simulation, before the engine runs) ---

  // The run's identity: version, trace, components, budget, the resolved configuration, and
  // the budget as a fraction of the trace's no-eviction peak.
  void identify(const Trace& trace, const std::string& allocator, const std::string& policy, Bytes budget,
                nlohmann::ordered_json config);
  // The allocator named in identify(); empty when none was (run_engine called directly).
  [[nodiscard]] const std::string& allocator_name() const { return r_.allocator; }

  // --- What happens (the event loop and its executors) ---

  void event_done() { ++r_.counters.events; }
  void policy_decided() { ++r_.counters.policy_decisions; }
  void policy_call_took(std::chrono::steady_clock::duration d) { policy_time_ += d; }
  void scanned(std::uint64_t n) { scanned_ += n; }
  // An allocation that went through at once.
  void allocated() { ++r_.counters.allocs; }
  // An allocation that went through after the policy (or the copies in flight) made room:
  // samples Coop's fragmentation, the free fraction of the budget before the room was made.
  void allocated_after_making_room(Bytes budget, Bytes allocated_before) {
    ++r_.counters.allocs;
    MemoryFigures& m = r_.memory;
    const double frac = budget.value == 0
                            ? 0.0
                            : static_cast<double>(budget.value - std::min(budget, allocated_before).value) /
                                  static_cast<double>(budget.value);
    ++m.coop_fragmentation_samples;
    m.coop_fragmentation += (frac - m.coop_fragmentation) / static_cast<double>(m.coop_fragmentation_samples);
  }
  // The first failed attempt of an allocation (it needs the policy).
  void alloc_failed() { ++r_.counters.alloc_failures; }
  // Every allocate() call the allocator failed (an OOM it raised; PyTorch's num_ooms).
  void allocator_oom() { ++r_.counters.ooms; }
  void freed() { ++r_.counters.frees; }
  void accessed() { ++r_.counters.accesses; }
  void computed() { ++r_.counters.computes; }
  void evicted(bool forced) { ++(forced ? r_.counters.forced_evictions : r_.counters.eager_evictions); }
  void recomputed(SimTime cost) {
    ++r_.time.recomputes;
    r_.time.recompute_time += cost;
  }
  void swapped_out(Bytes size) {
    ++r_.time.swap_outs;
    r_.time.swap_out_bytes += size;
  }
  void swapped_in(Bytes size) {
    ++r_.time.swap_ins;
    r_.time.swap_in_bytes += size;
  }
  void stalled(SimTime d) { r_.time.stall += d; }
  // Recomputation so far, and the delay that stalls and recomputation add to every later event.
  [[nodiscard]] SimTime recompute_time() const { return r_.time.recompute_time; }
  [[nodiscard]] SimTime delay() const { return r_.time.stall + r_.time.recompute_time; }

  // The allocator after a change of memory: peaks, and the allocated bytes at the reserved peak.
  void observed(const AllocatorStats& s) {
    MemoryFigures& m = r_.memory;
    m.peak_allocated = std::max(m.peak_allocated, s.allocated);
    m.peak_requested = std::max(m.peak_requested, s.requested);
    m.peak_footprint = std::max(m.peak_footprint, s.footprint);
    if (s.allocated >= s.requested) m.peak_internal_waste = std::max(m.peak_internal_waste, s.allocated - s.requested);
    if (s.reserved > m.peak_reserved) {
      m.peak_reserved = s.reserved;
      m.allocated_at_reserved_peak = s.allocated;
    } else if (s.reserved == m.peak_reserved) {
      m.allocated_at_reserved_peak = std::max(m.allocated_at_reserved_peak, s.allocated);
    }
  }

  // A recorded device address (an alloc event's "addr") against the model's placement.
  void address_checked(std::uint64_t recorded, std::uint64_t placed, EventId event) {
    AddressCheck& a = r_.addresses;
    ++a.checked;
    if (recorded == placed) return;
    if (a.mismatches++ == 0) {
      a.first_mismatch_event = event;
      a.first_expected = recorded;
      a.first_got = placed;
    }
  }

  // How the run ended, and where.
  void stopped(RunStatus status) { r_.status = status; }
  [[nodiscard]] RunStatus status() const { return r_.status; }
  void out_of_memory_at(OomPoint p) { r_.oom = std::move(p); }
  // The recompute limit was passed at `event` (the recomputation time is the builder's).
  void thrashed_at(EventId event, std::uint32_t iteration, SimTime op_time) {
    r_.thrash = ThrashPoint{event, iteration, r_.time.recompute_time, op_time};
  }
  void infeasible_at(InfeasiblePoint p) { r_.infeasible = p; }
  void limited_at(LimitPoint p) { r_.limit = p; }
  [[nodiscard]] std::uint64_t scanned_so_far() const { return scanned_; }

  // dtr.compat=simrd: simrd::simulate ran the trace in its own model and hands over its figures
  // (its one memory counter is both the allocated and the requested peak).
  void simulated_elsewhere(std::uint64_t recomputes, SimTime recompute_time, std::uint64_t forced_evictions,
                           std::uint64_t eager_evictions, Bytes peak);

  // The end of the run: the allocator's last figures, the clocks (compute stream end, the
  // trace's own time, executed op time) and the offline pool's figures; the search latency when
  // it was measured (engine.measure_search_latency).
  struct Clocks {
    SimTime simulated{0}, trace_compute{0}, op_time{0};
  };
  void finished(const AllocatorStats& s, const Clocks& clocks, std::optional<PoolFigures> pool,
                bool search_latency_measured);

  // --- After the run (run_simulation) ---

  // A recorded end state compared with the model's (torch_snapshot::compare_end_state).
  void end_state(EndStateCheck check) { r_.end_state = std::move(check); }

  // The finished report.
  [[nodiscard]] Report take() && { return std::move(r_); }

  // Coop's memory ratio of finished reports: budget / the largest budget of the sweep the run
  // belongs to (a report that is its own sweep keeps 1). `reports` are the runs of one sweep.
  static void place_in_sweep(Report& r, Bytes largest_budget);
  static void place_in_sweep(std::span<Report> reports);

 private:
  Report r_;
  std::uint64_t scanned_ = 0;
  std::chrono::steady_clock::duration policy_time_{0};
};

}  // namespace coopsim
