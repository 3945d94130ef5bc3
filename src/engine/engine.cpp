// run_engine() (engine.hpp): the event loop with the executor the policy calls for, chosen once
// per run (event_loop.hpp describes the split).
#include "coopsim/engine/engine.hpp"

#include <stdexcept>
#include <string>

#include "coopsim/base/error.hpp"

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
  try {
    switch (policy.execution_model()) {
      case ExecutionModel::Swap: {
        engine_detail::SwapExecutor executor(loop, trace);
        loop.run(executor);
        break;
      }
      case ExecutionModel::Remat: {
        engine_detail::RematExecutor executor(loop, trace, policy.remat_options().value_or(RematOptions{}));
        loop.run(executor);
        break;
      }
      case ExecutionModel::SimrdRuntime: {
        const RuntimeRules rules = policy.runtime_rules();
        engine_detail::SimrdExecutor executor(loop, trace, rules.heuristic, rules.overhead_limit);
        loop.run(executor);
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
