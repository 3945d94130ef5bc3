// Private to src/cli: the files of `coopsim run`, its single-run exports (run_exporters():
// timeline, memory map, PyTorch snapshot, CUDA plan) and the independent auditor, all computed
// from the run's event log.
#pragma once

#include <memory>
#include <optional>
#include <ostream>
#include <utility>
#include <vector>

#include "coopsim/cli/commands.hpp"
#include "coopsim/cli/exporters.hpp"
#include "coopsim/base/output_file.hpp"
#include "coopsim/model/report.hpp"
#include "coopsim/model/runlog.hpp"
#include "coopsim/model/trace.hpp"

namespace coopsim {

// Every file `coopsim run` writes. They are checked (no output is an input, no two are one file)
// and opened before the trace is read, so a bad output fails at once rather than after the runs,
// and committed together at the end: a failure on the way leaves none of them.
struct RunOutputs {
  std::optional<OutputFile> json, csv;
  // The exports asked for, in the registry's order (run_exporters()).
  std::vector<std::pair<const ExporterEntry*, std::unique_ptr<OutputFile>>> exports;
  explicit RunOutputs(const RunArgs& args);
  void commit_all();
};

// Writes every export `args` asks for and runs the auditor when asked. Returns the exit
// status: 0, or 5 when the auditor found violations (printed to `err`, one per line).
int write_run_exports(const RunArgs& args, const Trace& trace, const RunLog& log, const Report& report,
                      RunOutputs& files, std::ostream& err);

// --plan: the run's plan for replay-gpu (src/cli/replay_gpu.cpp, docs/plan-format.md).
void write_plan_export(const Trace& trace, const RunLog& log, const Report& report, OutputFile& out);

}  // namespace coopsim
