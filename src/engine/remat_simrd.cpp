// The simrd compatibility profile of the dtr policy (dtr.compat=simrd): the engine does not
// replay the trace itself but hands it to coopsim::simrd::replay, whose model (one memory
// counter, storages, simrd's pool order) cannot be expressed through the allocator and the
// per-value graph; its figures go to the report builder (include/coopsim/policy/remat/simrd.hpp).
#include "coopsim/policy/dtr.hpp"
#include "coopsim/policy/remat/simrd.hpp"
#include "remat_executor.hpp"

namespace coopsim::engine_detail {

bool RematExecutor::simrd_profile() const {
  const auto* dtr = dynamic_cast<const DtrPolicy*>(&loop_.policy());
  return dtr != nullptr && dtr->simrd_compat();
}

void RematExecutor::run_simrd_profile() {
  const auto& dtr = dynamic_cast<const DtrPolicy&>(loop_.policy());
  const simrd::Result r =
      simrd::replay(trace_, simrd::Config{loop_.options().budget, dtr.score(), options_.thrash_limit});
  simrd_done_ = true;
  const SimTime op_time{r.clock - r.remat_compute};
  // A stopped run is measured against the op time it executed, as the engine's own runs are
  // (simrd's baseline is the whole trace's).
  const SimTime ideal = r.outcome == simrd::Outcome::Completed ? SimTime{r.baseline} : op_time;
  loop_.set_clocks(SimTime{r.clock}, ideal, op_time);
  ReportBuilder& rep = loop_.report();
  rep.replayed_elsewhere(r.recomputes, SimTime{r.remat_compute}, r.evictions, r.eager_evictions, r.peak);
  const bool completed = r.outcome == simrd::Outcome::Completed;
  for (std::size_t e = 0; e < trace_.events.size() && (completed || e < r.stop_event); ++e) {
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
      p.event_index = r.stop_event;
      p.requested = r.requested;
      rep.out_of_memory_at(p);
      break;
    }
  }
}

}  // namespace coopsim::engine_detail
