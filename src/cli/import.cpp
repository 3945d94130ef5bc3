// `coopsim import KIND INPUT -o OUT`: convert a foreign trace to coopsim trace v1.
#include <fmt/format.h>

#include <ostream>

#include "coopsim/cli/commands.hpp"
#include "coopsim/base/error.hpp"
#include "coopsim/import/importers.hpp"
#include "coopsim/import/torch_snapshot.hpp"
#include "coopsim/base/limits.hpp"
#include "coopsim/base/output_file.hpp"
#include "coopsim/formats/trace_file.hpp"

namespace coopsim {

int command_import(const ImportArgs& args, std::ostream& out) {
  nlohmann::json section = nlohmann::json::object();
  for (const std::string& s : args.limits) {
    const auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0) throw ConfigError("--limit " + s, "expected key=value");
    section[s.substr(0, eq)] = parse_override_value(s.substr(eq + 1));
  }
  const Limits limits = limits_from_json(section);
  if (args.kind != "dtr" && args.kind != "torch-snapshot" && args.kind != "kineto") {
    throw ConfigError("import", "unknown trace kind '" + args.kind + "' (valid: dtr, torch-snapshot, kineto)");
  }
  if (args.kind != "dtr" && args.compat != "coopsim") {
    throw ConfigError("import --compat", "only dtr logs have a compatibility profile");
  }
  if (args.kind == "dtr" && args.compat != "coopsim" && args.compat != "simrd") {
    throw ConfigError("import --compat", "unknown profile '" + args.compat + "' (valid: coopsim, simrd)");
  }
  const NamedPath outputs[] = {{"--output", args.output}};
  const NamedPath inputs[] = {{"the input", args.input}, {"--et", args.et}};
  check_output_paths(outputs, inputs);
  OutputFile file(args.output);  // opened before the import, so a bad output fails at once
  Trace trace;
  if (args.kind == "dtr") {
    trace = import_dtr_log(args.input, DtrOptions{args.copy_on_write, args.compat == "simrd"}, limits);
  } else if (args.kind == "torch-snapshot") {
    trace = import_torch_snapshot(args.input, TorchSnapshotOptions{args.device}, limits);
  } else {
    trace = import_kineto(args.input, KinetoOptions{args.device, args.et}, limits);
  }
  write_trace(trace, file);
  const TraceSummary s = summarize(trace);
  out << fmt::format("{} -> {}: {} tensors, {} ops, {} events, peak live {} ({} bytes)\n", args.input, args.output,
                     s.tensors, s.ops, s.events, format_bytes(s.peak_live), s.peak_live.value);
  if (args.kind == "torch-snapshot") {
    for (const std::string& line : torch_snapshot::replay_hints(trace, args.output)) out << "  " << line << "\n";
  }
  return 0;
}

}  // namespace coopsim
