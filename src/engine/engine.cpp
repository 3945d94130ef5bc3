// run_engine() (engine.hpp): the event loop with the executor the policy calls for, chosen once
// per run (event_loop.hpp describes the split).
#include "coopsim/engine/engine.hpp"

#include "remat_executor.hpp"
#include "swap_executor.hpp"

namespace coopsim {

void run_engine(const Trace& trace, Allocator& allocator, Policy& policy, const EngineOptions& options,
                ReportBuilder& report) {
  engine_detail::EventLoop loop(trace, allocator, policy, options, report);
  if (const std::optional<RematOptions> remat = policy.remat_options()) {
    engine_detail::RematExecutor executor(loop, trace, *remat);
    loop.run(executor);
  } else {
    engine_detail::SwapExecutor executor(loop, trace);
    loop.run(executor);
  }
}

void run_engine(const Trace& trace, Allocator& allocator, Policy& policy, const EngineOptions& options,
                Report& report) {
  ReportBuilder builder;
  run_engine(trace, allocator, policy, options, builder);
  report = std::move(builder).take();
}

}  // namespace coopsim
