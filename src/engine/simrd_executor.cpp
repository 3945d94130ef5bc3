// The simrd runtime (simrd_executor.hpp): simrd::simulate's figures go to the report builder
// (include/coopsim/engine/simrd.hpp).
#include "simrd_executor.hpp"

#include "coopsim/engine/simrd.hpp"

namespace coopsim::engine_detail {

void SimrdExecutor::setup() {
  const simrd::Result r = simrd::simulate(trace_, simrd::Config{loop_.options().budget, heuristic_, overhead_limit_});
  const SimTime op_time{r.clock - r.remat_compute};
  // A stopped run is measured against the op time it executed, as the engine's own runs are
  // (simrd's baseline is the whole trace's).
  const SimTime ideal = r.outcome == simrd::Outcome::Completed ? SimTime{r.baseline} : op_time;
  loop_.set_clocks(SimTime{r.clock}, ideal, op_time);
  ReportBuilder& rep = loop_.report();
  rep.simulated_elsewhere(r.recomputes, SimTime{r.remat_compute}, r.evictions, r.eager_evictions, r.peak);
  const bool completed = r.outcome == simrd::Outcome::Completed;
  for (std::size_t e = 0; e < trace_.events.size() && (completed || e < index_of(r.stop_event)); ++e) {
    if (trace_.events[e].kind == EventKind::Compute) rep.computed();  // the trace's computes it executed
  }
  switch (r.outcome) {
    case simrd::Outcome::Completed: break;
    case simrd::Outcome::Thrashed:
      loop_.stop(RunStatus::Thrashed);
      rep.thrashed_at(r.stop_event, 0, op_time);
      break;
    case simrd::Outcome::OutOfMemory: {
      loop_.stop(RunStatus::OutOfMemory);
      OomPoint p;
      p.event = r.stop_event;
      p.requested = r.requested;
      rep.out_of_memory_at(p);
      break;
    }
  }
}

}  // namespace coopsim::engine_detail
