// Private to src/commands: the single-run exports of `coopsim run` (timeline, memory map,
// PyTorch snapshot, CUDA plan) and the independent validator, all computed from the run's
// event log.
#pragma once

#include <ostream>

#include "coopsim/commands.hpp"
#include "coopsim/report.hpp"
#include "coopsim/runlog.hpp"
#include "coopsim/trace.hpp"

namespace coopsim {

// Writes every export `args` asks for (atomically) and runs the validator when asked. Returns
// the exit status: 0, or 5 when the validator found violations (printed to `err`, one per line).
int write_run_exports(const RunArgs& args, const Trace& trace, const RunLog& log, const Report& report,
                      std::ostream& err);

// --plan: the run's plan for replay-gpu (src/commands/replay_gpu.cpp, docs/plan-format.md).
void write_plan_export(const RunArgs& args, const Trace& trace, const RunLog& log, const Report& report);

}  // namespace coopsim
