// A run's results as plain data. Nothing here computes: ReportBuilder
// (coopsim/engine/report_builder.hpp) fills it in, the writers (coopsim/output/) read it.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "coopsim/base/units.hpp"

namespace coopsim {

// Thrashed: a recompute policy reached its compute-overhead limit (simrd's "thrash"), distinct
// from OutOfMemory (nothing evictable could make room). Infeasible: the trace starts from a
// recorded allocator state (an imported snapshot) larger than the budget, so the simulation could
// not start; a failed run like an OOM, never an error.
// Limited: the run's victim searches examined more candidates than limits.max_search_steps
// allows (a bound on the work of one run, docs/limits.md); a stopped run like an OOM.
enum class RunStatus : std::uint8_t { Completed, OutOfMemory, Thrashed, Infeasible, Limited };
std::string_view to_string(RunStatus s);

// PyTorch memory_viz's "segsum" view of the allocator when a request failed: why it did not
// fit. Internal fragmentation = allocated - requested (rounding inside blocks); external = the
// cached free bytes (reserved - allocated), of which inactive_split sits in segments that also
// hold allocated blocks (PyTorch's inactive_split_bytes: it cannot be given back).
struct OomPool {
  std::string pool;  // "small" / "large" (models with PyTorch's pools), else "device"
  std::uint64_t segments = 0;
  Bytes reserved, allocated, largest_free;
};
struct OomHolder {  // a live block, largest first
  std::uint64_t tensor_file_id = 0;
  std::string name, role;
  std::string op_name;  // the op that produces the tensor (empty: none, e.g. a parameter)
  Bytes size;           // block bytes
};
struct OomSegsum {
  Bytes requested_live;  // requested bytes of the live blocks
  Bytes internal_fragmentation, cached_free, inactive_split;
  std::vector<OomPool> pools;
  std::vector<OomHolder> holders;  // at most kOomHolders
};
inline constexpr std::size_t kOomHolders = 10;

// Where a keep run (or any policy that gave up) ran out of memory.
struct OomPoint {
  EventId event{};  // the trace event being processed (0-based index into the event stream)
  std::uint32_t iteration = 0;
  std::uint64_t tensor_file_id = 0;
  std::string tensor_name;
  std::string op_name;  // op that the allocation is for (next compute), if any
  std::uint64_t op_file_id = 0;
  bool has_op = false;
  Bytes requested;
  Bytes allocated, reserved, largest_free;
  OomSegsum segsum;
};

// Where a recompute policy hit its thrash limit.
struct ThrashPoint {
  EventId event{};
  std::uint32_t iteration = 0;
  SimTime recompute_time{0};  // when it stopped
  SimTime op_time{0};         // trace op time executed so far
};

// Where a run reached limits.max_search_steps.
struct LimitPoint {
  EventId event{};
  std::uint32_t iteration = 0;
  std::uint64_t search_steps = 0;  // the cap it went past
};

// Why a run was infeasible: the recorded initial state does not fit the budget.
struct InfeasiblePoint {
  Bytes recorded_reserved;  // bytes of the recorded segments
  std::uint64_t segments = 0;
};

// Offline pools (smartpool): the planned pool and what fell back to the device.
struct PoolFigures {
  Bytes pool_size;
  bool pool_created = false;  // false: it did not fit the budget; everything fell back
  std::uint32_t planned_iteration = 0;
  std::uint64_t pool_allocs = 0, fallback_allocs = 0, mismatched_allocs = 0;
  Bytes fallback_bytes, mismatched_bytes, peak_fallback_live;
};

struct MemoryFigures {
  Bytes peak_allocated, peak_reserved, peak_requested, peak_footprint;
  Bytes final_allocated, final_reserved;
  double reserved_fragmentation = 0.0;  // 1 - allocated/reserved at the reserved peak
  Bytes allocated_at_reserved_peak;
  double coop_fragmentation = 0.0;               // mean free/arena at allocations that needed eviction
  std::uint64_t coop_fragmentation_samples = 0;  // 0 => not defined for this run
  Bytes peak_internal_waste;                     // max of allocated - requested
};

struct TimeFigures {
  SimTime simulated{0};             // compute stream end, stalls included
  SimTime trace_compute{0};         // the trace's own time: the same simulation with no stalls
  double compute_overhead = 1.0;    // simulated / trace_compute (1 when both are 0)
  SimTime op_time{0};               // executed trace ops, no recomputation (Coop's baseline clock)
  double recompute_overhead = 1.0;  // Coop's compute overhead: (op_time + recompute) / op_time
  SimTime stall{0};
  std::uint64_t recomputes = 0;
  SimTime recompute_time{0};
  std::uint64_t swap_outs = 0, swap_ins = 0;
  Bytes swap_out_bytes, swap_in_bytes;
};

struct CounterFigures {
  std::uint64_t events = 0, allocs = 0, frees = 0, accesses = 0, computes = 0;
  std::uint64_t forced_evictions = 0, eager_evictions = 0;
  std::uint64_t alloc_failures = 0;  // allocations that needed the policy
  std::uint64_t alloc_retries = 0, device_mallocs = 0, device_frees = 0;
  std::uint64_t ooms = 0;  // allocate() calls the allocator failed (PyTorch's num_ooms)
  std::uint64_t policy_decisions = 0;
  std::uint64_t search_scanned = 0;  // pieces/tensors examined by eviction searches
};

// Recorded device addresses (alloc events with "addr") compared with the model's placements.
struct AddressCheck {
  std::uint64_t checked = 0;
  std::uint64_t mismatches = 0;
  EventId first_mismatch_event{};  // valid when mismatches > 0
  std::uint64_t first_expected = 0, first_got = 0;
};

// A recorded end state (e.g. a PyTorch snapshot's final segments) compared with the model's.
// Adjacent free blocks are merged on both sides before comparing.
struct EndStateCheck {
  bool segments_match = false;  // addresses, sizes, streams, pools and block layouts
  bool reserved_match = false;  // total segment bytes
  std::uint64_t recorded_segments = 0, model_segments = 0;
  Bytes recorded_reserved, model_reserved;
  std::string first_difference;  // empty when everything matches
};

struct Report {
  std::string coopsim_version;
  std::string trace_path, model;
  std::uint64_t trace_hash = 0;
  std::uint32_t iterations = 0;
  std::string allocator, policy;
  Bytes budget;
  nlohmann::ordered_json config;  // resolved configuration, defaults filled in
  RunStatus status = RunStatus::Completed;
  std::optional<OomPoint> oom;
  std::optional<ThrashPoint> thrash;
  std::optional<InfeasiblePoint> infeasible;
  std::optional<LimitPoint> limit;
  // Memory ratio in both conventions (docs/models/coop.md): budget / the trace's no-eviction peak
  // of live bytes (DTR), and budget / the largest budget of the sweep the run belongs to (Coop;
  // a single run is its own sweep).
  Bytes trace_peak_live;
  double memory_ratio_of_peak = 0.0;
  double memory_ratio_of_sweep_max = 1.0;
  MemoryFigures memory;
  TimeFigures time;
  CounterFigures counters;
  AddressCheck addresses;
  std::optional<EndStateCheck> end_state;  // when the trace records an end state and the model can report one
  std::optional<PoolFigures> pool;         // offline pool allocators only
  std::optional<SimTime> search_latency;   // wall time inside policy calls (opt-in: not reproducible)
};

}  // namespace coopsim
