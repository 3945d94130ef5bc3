// The discrete-event engine: one compute stream plus a device-to-host and a host-to-device copy
// stream. Trace events are executed in order on the compute stream; transfers run on the copy
// streams and complete through a time-ordered queue keyed (time, priority, sequence), so
// simultaneous events always resolve the same way (frees before allocations). The engine owns
// residency, asks the allocator for placement and the policy for decisions; a wait for a
// transfer is a stall, accounted separately from compute.
#pragma once

#include <cstdint>

#include "coopsim/alloc/allocator.hpp"
#include "coopsim/engine/report_builder.hpp"
#include "coopsim/base/limits.hpp"
#include "coopsim/model/link.hpp"
#include "coopsim/policy/policy.hpp"
#include "coopsim/model/report.hpp"
#include "coopsim/model/runlog.hpp"
#include "coopsim/model/trace.hpp"

namespace coopsim {

struct EngineOptions {
  Bytes budget;
  LinkModel link;
  bool paranoid = false;                // allocator.check_invariants() after every event
  bool residency_checks = false;             // recompute policies: resident blocks disjoint, in budget
  bool measure_search_latency = false;  // wall time in policy calls (breaks byte-identity)
  RunLog* log = nullptr;                // when set, every physical step is appended (runlog.hpp)
  // limits.max_recompute_depth: a rematerialization needing a longer chain of nested
  // recomputations ends the run with an Error naming the limit.
  std::uint64_t max_recompute_depth = Limits::kDefaultMaxRecomputeDepth;
  // limits.max_search_steps: the run stops with status limit once its victim searches have
  // examined more candidates than this in all.
  std::uint64_t max_search_steps = Limits::kDefaultMaxSearchSteps;
};

// Simulates `trace`, telling `report` what happens: the memory/time/counter parts of the report,
// its status and where the run stopped.
void run_engine(const Trace& trace, Allocator& allocator, Policy& policy, const EngineOptions& options,
                ReportBuilder& report);
// The same for a run with no identity (tests, the snapshot importer's simulations): `report` becomes
// the builder's finished report.
void run_engine(const Trace& trace, Allocator& allocator, Policy& policy, const EngineOptions& options, Report& report);

}  // namespace coopsim
