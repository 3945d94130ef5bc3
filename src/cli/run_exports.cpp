// `coopsim run` single-run exports and --validate (see run_exports.hpp). Each export is a pure
// function of (trace, event log, report) living with its format; this file only dispatches.
#include "run_exports.hpp"

#include <iterator>

#include "coopsim/base/error.hpp"
#include "coopsim/output/export.hpp"
#include "coopsim/validate/validate.hpp"

namespace coopsim {

RunOutputs::RunOutputs(const RunArgs& args) {
  const NamedPath outputs[] = {{"--output", args.json_out},
                               {"--csv", args.csv_out},
                               {"--timeline", args.timeline_out},
                               {"--memory-map", args.memory_map_out},
                               {"--torch-snapshot", args.torch_snapshot_out},
                               {"--plan", args.plan_out}};
  const NamedPath inputs[] = {{"the trace", args.trace}, {"the config", args.config}};
  check_output_paths(outputs, inputs);
  std::optional<OutputFile>* files[] = {&json, &csv, &timeline, &memory_map, &torch_snapshot, &plan};
  for (std::size_t i = 0; i < std::size(outputs); ++i) {
    if (!outputs[i].path.empty()) files[i]->emplace(outputs[i].path);
  }
}

void RunOutputs::commit_all() {
  for (auto* f : {&json, &csv, &timeline, &memory_map, &torch_snapshot, &plan}) {
    if (*f) (*f)->commit();
  }
}

int write_run_exports(const RunArgs& args, const Trace& trace, const RunLog& log, const Report& report,
                      RunOutputs& files, std::ostream& err) {
  if (files.plan) write_plan_export(trace, log, report, *files.plan);
  if (files.timeline) files.timeline->write(perfetto_json(trace, log, report));
  if (files.memory_map) {
    MemoryMapOptions options;
    const auto colour = parse_memory_map_colour(args.memory_map_colour);
    if (!colour) throw ConfigError("--memory-map-colour", "'" + args.memory_map_colour + "' is not one of: role, cost");
    options.colour = *colour;
    files.memory_map->write(memory_map_svg(trace, log, report, options));
  }
  if (files.torch_snapshot) files.torch_snapshot->write(torch_snapshot_pickle(trace, log, report));
  if (args.validate) {
    const ValidationResult result = validate_runlog(trace, log);
    if (!result.ok()) {
      for (const std::string& line : result.violations) err << "coopsim: validate: " << line << "\n";
      if (result.violation_count > result.violations.size()) {
        err << "coopsim: validate: and " << (result.violation_count - result.violations.size()) << " more violations\n";
      }
      return 5;
    }
  }
  return 0;
}

}  // namespace coopsim
