// `coopsim run` single-run exports and --audit (see run_exports.hpp). Each export is a pure
// function of (trace, event log, report) living with its format; this file only dispatches.
#include "run_exports.hpp"


#include "coopsim/base/error.hpp"
#include "coopsim/audit/audit.hpp"

namespace coopsim {

RunOutputs::RunOutputs(const RunArgs& args) {
  std::vector<NamedPath> outputs = {{"--output", args.json_out}, {"--csv", args.csv_out}};
  std::vector<const ExporterEntry*> asked;
  for (const ExporterEntry& e : run_exporters().entries()) {
    const auto it = args.exports.find(e.name);
    if (it == args.exports.end() || it->second.empty()) continue;
    outputs.push_back({"--" + e.name, it->second});
    asked.push_back(&e);
  }
  const NamedPath inputs[] = {{"the trace", args.trace}, {"the config", args.config}};
  check_output_paths(outputs, inputs);
  if (!args.json_out.empty()) json.emplace(args.json_out);
  if (!args.csv_out.empty()) csv.emplace(args.csv_out);
  for (const ExporterEntry* e : asked) exports.emplace_back(e, std::make_unique<OutputFile>(args.exports.at(e->name)));
}

void RunOutputs::commit_all() {
  for (auto* f : {&json, &csv}) {
    if (*f) (*f)->commit();
  }
  for (auto& [entry, file] : exports) file->commit();
}

int write_run_exports(const RunArgs& args, const Trace& trace, const RunLog& log, const Report& report,
                      RunOutputs& files, std::ostream& err) {
  for (auto& [entry, file] : files.exports) entry->write(trace, log, report, args, *file);
  if (args.audit) {
    const AuditResult result = audit_runlog(trace, log);
    if (!result.ok()) {
      for (const std::string& line : result.violations) err << "coopsim: audit: " << line << "\n";
      if (result.violation_count > result.violations.size()) {
        err << "coopsim: audit: and " << (result.violation_count - result.violations.size()) << " more violations\n";
      }
      return 5;
    }
  }
  return 0;
}

}  // namespace coopsim
