// run_engine() (engine.hpp): the event loop with the executor the policy calls for, chosen once
// per run (event_loop.hpp describes the split).
#include "coopsim/engine/engine.hpp"

#include <memory>
#include <stdexcept>
#include <string>

#include "coopsim/base/error.hpp"
#include "coopsim/base/process_heap.hpp"

#include "remat_executor.hpp"
#include "simrd_executor.hpp"
#include "swap_executor.hpp"

namespace coopsim {

namespace {

std::string where(const Trace& trace, EventId event) {
  return (trace.path.empty() ? std::string() : trace.path + ": ") + "event " + std::to_string(index_of(event)) + ": ";
}

}  // namespace

// The engine checks its own rules as it goes (one resident value per address, a use only of
// what is allocated, a free only of what is allocated, a policy action only on what it may
// move); a broken one ends the run with a one-line InvariantError naming the event, which the
// caller prefixes with the policy and allocator (run_simulation), never an internal error.
void run_engine(const Trace& trace, Allocator& allocator, Policy& policy, const EngineOptions& options,
                ReportBuilder& report) {
  engine_detail::EventLoop loop(trace, allocator, policy, options, report);
  // An executor's state (the remat graph: a node per value and execution, their lists) is freed
  // block by block when it is destroyed: 6 % of a 6,000-layer run's time. In the command line,
  // whose process ends after the command, it is left to the kernel (dispose_before_exit).
  auto run = [&loop](auto executor) {
    loop.run(*executor);
    dispose_before_exit(std::move(executor));
  };
  try {
    switch (policy.execution_model()) {
      case ExecutionModel::Swap: run(std::make_unique<engine_detail::SwapExecutor>(loop, trace)); break;
      case ExecutionModel::Remat:
        run(std::make_unique<engine_detail::RematExecutor>(loop, trace,
                                                           policy.remat_options().value_or(RematOptions{})));
        break;
      case ExecutionModel::SimrdRuntime: {
        const RuntimeRules rules = policy.runtime_rules();
        run(std::make_unique<engine_detail::SimrdExecutor>(loop, trace, rules.heuristic, rules.overhead_limit));
        break;
      }
    }
  } catch (const InvariantError& e) {
    throw InvariantError(where(trace, loop.event_index()) + e.what());
  } catch (const std::logic_error& e) {
    throw InvariantError(where(trace, loop.event_index()) + e.what());
  }
}

void run_engine(const Trace& trace, Allocator& allocator, Policy& policy, const EngineOptions& options,
                Report& report) {
  ReportBuilder builder;
  run_engine(trace, allocator, policy, options, builder);
  report = std::move(builder).take();
}

}  // namespace coopsim
