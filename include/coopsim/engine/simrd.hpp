// The simrd compatibility profile of the dtr policy (`--set dtr.compat=simrd`): a simulation of an
// imported DTR trace under the rules of DTR's reference simulator, simrd's
// `RuntimeV2EagerOptimized` (uwsampl/dtr-prototype@eff53cc4 simrd/simrd/runtime/v2.py), as its
// paper evaluation runs it (simrd_experiments/eval/pareto/run.py: run_pareto).
//
// simrd's model differs from coopsim's engine in ways that cannot be expressed as a victim
// choice: memory is a single counter (no allocator, no addresses), costs and eviction are per
// storage (the tensors on it, views included), dead storages are evicted rather than freed and
// stay in the graph (they can be recomputed and are counted in neighbourhood costs), the
// candidate order is the order in which storages became evictable, and rematerialized parents
// stay resident. The profile therefore runs its own simulation of the trace events; the rules and
// where each comes from are listed in simrd.cpp and docs/import-dtr.md.
#pragma once

#include <cstdint>

#include "coopsim/policy/remat/eviction_score.hpp"
#include "coopsim/model/trace.hpp"
#include "coopsim/base/units.hpp"

namespace coopsim::simrd {

enum class Outcome : std::uint8_t { Completed, OutOfMemory, Thrashed };

struct Config {
  Bytes budget;
  EvictionScore heuristic = EvictionScore::Dtr;  // dtr, dtr-eq, dtr-local, msps, lru, largest
  double overhead_limit = 2.0;                   // simrd's remat_limit = baseline x (limit - 1); 0 = none
};

struct Result {
  Outcome outcome = Outcome::Completed;
  std::int64_t clock = 0;             // compute executed (ops + recomputations), ns; simrd's clock - 1
  std::int64_t baseline = 0;          // the trace's op time (simrd's baseline model_compute)
  std::int64_t remat_compute = 0;     // recomputation time
  std::uint64_t recomputes = 0;       // ops re-run
  std::uint64_t evictions = 0;        // by the heuristic
  std::uint64_t eager_evictions = 0;  // at release
  Bytes peak;                         // simrd's max_memory (after each op's outputs are charged)
  Bytes requested;                    // the allocation that failed (OutOfMemory)
  EventId stop_event = kNoEvent;      // the trace event where the run stopped (kNoEvent: it completed)
  // simrd's overhead figure: clock / baseline (its clock starts at 1; the 1 ns is left out).
  [[nodiscard]] double overhead() const {
    return baseline == 0 ? 1.0 : static_cast<double>(clock) / static_cast<double>(baseline);
  }
};

// Simulates `trace` (best imported with `import dtr --compat simrd`) at `config.budget`; the
// heuristic must be one simrd_runtime_supports (policy.hpp).
Result simulate(const Trace& trace, const Config& config);

}  // namespace coopsim::simrd
