// The single-run exports of `coopsim run`, one line each in src/cli/exporters.cpp: each entry
// is an option --<name> taking an output path, computed from the run's event log (RunLog) after
// the run. The CLI declares one option per entry; `coopsim list` names them.
#pragma once

#include <functional>
#include <string>

#include "coopsim/base/output_file.hpp"
#include "coopsim/base/registry.hpp"
#include "coopsim/cli/commands.hpp"
#include "coopsim/model/report.hpp"
#include "coopsim/model/runlog.hpp"
#include "coopsim/model/trace.hpp"

namespace coopsim {

struct ExporterEntry {
  std::string name;  // the option is --<name>
  std::string help;
  // Writes the export of one run; `args` carries the exporters' settings (--memory-map-colour,
  // --torch-snapshot-format).
  std::function<void(const Trace&, const RunLog&, const Report&, const RunArgs& args, OutputFile& out)> write;
};

using ExporterRegistry = NamedList<ExporterEntry>;

// Built-in exporters, in the order their files are written and `coopsim list` names them.
const ExporterRegistry& run_exporters();

}  // namespace coopsim
