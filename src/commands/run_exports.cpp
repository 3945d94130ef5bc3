// `coopsim run` single-run exports and --validate (see run_exports.hpp). Each export is a pure
// function of (trace, event log, report) living with its format; this file only dispatches.
#include "run_exports.hpp"

#include "coopsim/error.hpp"
#include "coopsim/export.hpp"
#include "coopsim/validate.hpp"

namespace coopsim {

int write_run_exports(const RunArgs& args, const Trace& trace, const RunLog& log, const Report& report,
                      std::ostream& err) {
  if (!args.plan_out.empty()) write_plan_export(args, trace, log, report);
  if (!args.timeline_out.empty()) write_file_atomic(args.timeline_out, perfetto_json(trace, log, report));
  if (!args.memory_map_out.empty()) {
    MemoryMapOptions options;
    const auto colour = parse_memory_map_colour(args.memory_map_colour);
    if (!colour) throw ConfigError("--memory-map-colour", "'" + args.memory_map_colour + "' is not one of: role, cost");
    options.colour = *colour;
    write_file_atomic(args.memory_map_out, memory_map_svg(trace, log, report, options));
  }
  if (!args.torch_snapshot_out.empty()) write_file_atomic(args.torch_snapshot_out, torch_snapshot_pickle(trace, log, report));
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
