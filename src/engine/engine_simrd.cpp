// The simrd compatibility profile of the dtr policy (dtr.compat=simrd): the engine does not
// replay the trace itself but hands it to coopsim::simrd::replay, whose model (one memory
// counter, storages, simrd's pool order) cannot be expressed through the allocator and the
// per-value graph; the result is copied into the report (include/coopsim/policy/remat/simrd.hpp).
#include "coopsim/policy/dtr.hpp"
#include "coopsim/policy/remat/simrd.hpp"
#include "engine_impl.hpp"

namespace coopsim::engine_detail {

bool Engine::simrd_profile() const {
  const auto* dtr = dynamic_cast<const DtrPolicy*>(&policy_);
  return dtr != nullptr && dtr->simrd_compat();
}

void Engine::run_simrd_profile() {
  const auto& dtr = dynamic_cast<const DtrPolicy&>(policy_);
  const simrd::Result r = simrd::replay(trace_, simrd::Config{opt_.budget, dtr.score(), remat_->thrash_limit});
  simrd_done_ = true;
  now_ = SimTime{r.clock};
  ideal_ = SimTime{r.baseline};
  op_time_ = SimTime{r.clock - r.remat_compute};
  rep_.time.recompute_time = SimTime{r.remat_compute};
  rep_.time.recomputes = r.recomputes;
  rep_.counters.forced_evictions = r.evictions;
  rep_.counters.eager_evictions = r.eager_evictions;
  rep_.memory.peak_requested = r.peak;
  rep_.memory.peak_allocated = r.peak;
  switch (r.outcome) {
    case simrd::Outcome::Completed: break;
    case simrd::Outcome::Thrashed:
      oom_ = true;
      rep_.status = RunStatus::Thrashed;
      rep_.thrash = ThrashPoint{r.stop_event, 0, rep_.time.recompute_time, op_time_};
      break;
    case simrd::Outcome::OutOfMemory: {
      oom_ = true;
      rep_.status = RunStatus::OutOfMemory;
      OomPoint p;
      p.event_index = r.stop_event;
      p.requested = r.requested;
      rep_.oom = p;
      break;
    }
  }
}

}  // namespace coopsim::engine_detail
