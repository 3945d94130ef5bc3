// The one list of run exporters (include/coopsim/cli/exporters.hpp). Each export is a pure
// function of (trace, event log, report) living with its format (src/output/, and the GPU plan in
// replay_gpu.cpp); its line here names it. Adding an export: its function plus one line here.
#include "coopsim/cli/exporters.hpp"

#include "coopsim/base/error.hpp"
#include "coopsim/output/export.hpp"
#include "installed_torch.hpp"
#include "run_exports.hpp"

namespace coopsim {

const ExporterRegistry& run_exporters() {
  static const ExporterRegistry list = [] {
    ExporterRegistry r;
    r.add({"timeline", "write a Chrome trace / Perfetto JSON timeline of the run",
           [](const Trace& t, const RunLog& log, const Report& rep, const RunArgs&, OutputFile& out) {
             out.write(perfetto_json(t, log, rep));
           }});
    r.add({"memory-map", "write an SVG picture of the address space over time",
           [](const Trace& t, const RunLog& log, const Report& rep, const RunArgs& args, OutputFile& out) {
             MemoryMapOptions options;
             const auto colour = parse_memory_map_colour(args.memory_map_colour);
             if (!colour) {
               throw ConfigError("--memory-map-colour", "'" + args.memory_map_colour + "' is not one of: role, cost");
             }
             options.colour = *colour;
             out.write(memory_map_svg(t, log, rep, options));
           }});
    r.add({"torch-snapshot", "write the run as a PyTorch memory snapshot pickle (pytorch.org/memory_viz)",
           [](const Trace& t, const RunLog& log, const Report& rep, const RunArgs& args, OutputFile& out) {
             const std::string name = args.torch_snapshot_format == "auto"
                                          ? cli::torch_snapshot_format_for(cli::installed_torch_version())
                                          : args.torch_snapshot_format;
             const auto format = parse_torch_snapshot_format(name);
             if (!format) {
               throw ConfigError("--torch-snapshot-format",
                                 "'" + args.torch_snapshot_format + "' is not one of: 2.x, 1.13, auto");
             }
             out.write(torch_snapshot_pickle(t, log, rep, *format));
           }});
    r.add({"plan", "write the run's plan for replay-gpu (docs/plan-format.md)",
           [](const Trace& t, const RunLog& log, const Report& rep, const RunArgs&, OutputFile& out) {
             write_plan_export(t, log, rep, out);
           }});
    return r;
  }();
  return list;
}

}  // namespace coopsim
