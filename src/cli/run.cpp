// `coopsim run` and `coopsim validate`.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "coopsim/base/process_heap.hpp"
#include "coopsim/cli/exporters.hpp"
#include "coopsim/cli/commands.hpp"
#include "coopsim/base/error.hpp"
#include "coopsim/engine/report_builder.hpp"
#include "coopsim/sim/simulation.hpp"
#include "coopsim/formats/trace_file.hpp"
#include "coopsim/output/report_writers.hpp"
#include "run_exports.hpp"

namespace coopsim {

namespace {

std::vector<std::string> expand_all(std::vector<std::string> names, std::vector<std::string> every) {
  if (names.size() == 1 && names[0] == "all") return every;
  if (names.empty()) names.push_back("");
  return names;
}

}  // namespace

int command_run(const RunArgs& args, std::ostream& out) {
  SimConfig base;
  if (!args.config.empty()) base = load_config(args.config);
  for (const auto& s : args.sets) apply_override(base, s);
  if (args.paranoid) base.doc["engine"]["paranoid"] = true;

  std::vector<std::string> every_allocator, every_policy;
  for (const auto& e : builtin_components().allocators.entries()) every_allocator.push_back(e.name);
  for (const auto& e : builtin_components().policies.entries()) every_policy.push_back(e.name);
  const bool all_allocators = args.allocators.size() == 1 && args.allocators[0] == "all";
  const auto allocators = expand_all(args.allocators, every_allocator);
  const auto policies = expand_all(args.policies, every_policy);
  std::vector<std::string> budgets = args.budgets;
  if (budgets.empty()) budgets.push_back("");

  // Check every combination before loading the trace or running anything. Percentages of the
  // trace's peak are checked as a placeholder size and resolved once the trace is loaded.
  std::vector<CheckedConfig> runs;
  std::vector<std::optional<double>> percents;
  for (const auto& p : policies) {
    for (const auto& a : allocators) {
      for (const auto& b : budgets) {
        SimConfig cfg = base;
        if (!p.empty()) cfg.doc["policy"] = p;
        if (!a.empty()) cfg.doc["allocator"] = a;
        std::optional<double> percent;
        if (!b.empty()) {
          const BudgetText budget = parse_budget(b, BudgetHint::Percent);
          if (!budget.problem.empty()) throw ConfigError("--budget", budget.problem);
          percent = budget.percent;
          cfg.doc["budget"] = percent ? std::uint64_t{1} << 30 : budget.bytes->value;
        }
        runs.push_back(check_config(cfg));
        percents.push_back(percent);
      }
    }
  }

  if (args.wants_log() && runs.size() != 1) {
    std::string flag = "--audit";
    for (const ExporterEntry& e : run_exporters().entries()) {
      if (const auto it = args.exports.find(e.name); it != args.exports.end() && !it->second.empty()) {
        flag = "--" + e.name;
        break;
      }
    }
    throw ConfigError(flag, "needs exactly one run (one allocator, one policy, one budget); this command makes " +
                                std::to_string(runs.size()));
  }

  if (args.check_addresses) {
    for (const CheckedConfig& cfg : runs) {
      if (top_level_params(cfg.config().doc).get_string("initial_state") == "empty") {
        throw ConfigError("--check-addresses", "compares the recorded addresses, which --initial-state empty drops");
      }
    }
  }
  RunOutputs files(args);  // checked and opened before the trace is read
  const DisposedBeforeExit<Trace> loaded(load_trace(args.trace, config_limits(base)));
  const Trace& trace = loaded.get();
  if (std::any_of(percents.begin(), percents.end(), [](const auto& p) { return p.has_value(); })) {
    const Bytes peak = summarize(trace).peak_live;
    for (std::size_t i = 0; i < runs.size(); ++i) {
      if (percents[i]) runs[i].set_budget(percent_of_peak(*percents[i], peak, "--budget"));
    }
  }
  if (all_allocators && !trace.initial_segments.empty()) {
    // A trace that starts from a recorded allocator state (a PyTorch snapshot) can only run on
    // models that can install that state: with --allocator all, skip the others.
    std::erase_if(runs, [&](const CheckedConfig& cfg) {
      const Params top = top_level_params(cfg.config().doc);
      const std::string name = top.get_string("allocator");
      if (top.get_string("initial_state") == "empty" || allocator_can_seed(name)) return false;
      std::cerr << "coopsim: note: skipping allocator " << name
                << ": it cannot start from the recorded state this trace begins with\n";
      return true;
    });
  }
  std::vector<Report> reports;
  reports.reserve(runs.size());
  RunLog log;
  RunOptions options;
  options.log = args.wants_log() ? &log : nullptr;
  options.audit = args.audit_every_run;
  for (const auto& cfg : runs) {
    reports.push_back(run_simulation(cfg, trace, options));
  }
  ReportBuilder::place_in_sweep(reports);  // the runs of one command are one sweep

  if (files.json) {
    if (reports.size() == 1) {
      files.json->write(to_json(reports[0]).dump(2) + "\n");
    } else {
      nlohmann::ordered_json arr = nlohmann::ordered_json::array();
      for (const auto& r : reports) arr.push_back(to_json(r));
      files.json->write(arr.dump(2) + "\n");
    }
  }
  if (files.csv) {
    std::string text = csv_header() + "\n";
    for (const auto& r : reports) text += csv_row(r) + "\n";
    files.csv->write(text);
  }
  if (args.json_stdout) {
    if (reports.size() == 1) {
      out << to_json(reports[0]).dump(2) << "\n";
    } else {
      nlohmann::ordered_json arr = nlohmann::ordered_json::array();
      for (const auto& r : reports) arr.push_back(to_json(r));
      out << arr.dump(2) << "\n";
    }
  } else if (!args.quiet) {
    if (reports.size() == 1) {
      write_text(out, reports[0]);
    } else {
      write_summary_table(out, reports);
    }
  }
  int export_status = 0;
  if (args.wants_log()) export_status = write_run_exports(args, trace, log, reports[0], files, std::cerr);
  files.commit_all();
  if (export_status != 0) return export_status;
  bool any_oom = false;
  // Exit 3 (--fail-on-oom): a run that ran out of memory or could not start in its budget.
  for (const auto& r : reports) {
    any_oom = any_oom || r.status == RunStatus::OutOfMemory || r.status == RunStatus::Infeasible;
  }
  if (args.check_addresses) {
    for (const auto& r : reports) {
      if (r.addresses.checked == 0) throw Error(args.trace + ": --check-addresses: the trace records no addresses");
      if (r.addresses.mismatches > 0) return 4;
      if (r.end_state && !(r.end_state->segments_match && r.end_state->reserved_match)) return 4;
    }
  }
  return args.fail_on_oom && any_oom ? 3 : 0;
}

namespace {

// Standard input, up to the input cap (a larger input is refused, not truncated).
std::string read_stdin(std::uint64_t cap) {
  std::string text;
  std::vector<char> buf(1 << 16);
  while (std::cin.read(buf.data(), static_cast<std::streamsize>(buf.size())) || std::cin.gcount() > 0) {
    const auto n = static_cast<std::size_t>(std::cin.gcount());
    if (text.size() + n > cap) {
      throw InputError("<stdin>", 0, fmt::format("input larger than {} bytes (limits.max_input_bytes)", cap));
    }
    text.append(buf.data(), n);
  }
  if (std::cin.bad()) throw InputError("<stdin>", 0, "cannot read standard input");
  return text;
}

}  // namespace

int command_validate(const std::string& path, const std::string& write_to, std::ostream& out) {
  const Limits limits;
  const Trace trace =
      path == "-" ? parse_trace(read_stdin(limits.max_input_bytes), "<stdin>", limits) : load_trace(path, limits);
  if (!write_to.empty()) write_trace(trace, write_to);
  const TraceSummary s = summarize(trace);
  out << fmt::format("{}: valid coopsim trace v{} ({})\n", path, trace.header.version,
                     trace.header.model.empty() ? "no model name" : trace.header.model);
  out << fmt::format("  tensors {} (views {}), ops {}, events {}\n", s.tensors, s.views, s.ops, s.events);
  out << fmt::format("  allocs {}, frees {}, accesses {}, computes {}, iterations {}\n", s.allocs, s.frees, s.accesses,
                     s.computes, s.iterations);
  out << fmt::format("  peak live {} ({} bytes), op compute time {}\n", format_bytes(s.peak_live), s.peak_live.value,
                     format_time(s.compute_time));
  std::uint64_t op_inputs = 0;
  for (const OpInfo& op : trace.ops) op_inputs += op.inputs.size();
  // Policies other than keep need to know what ops read (run_simulation refuses them otherwise).
  out << fmt::format("  dataflow: {} op inputs{}\n", op_inputs,
                     op_inputs + s.accesses == 0 ? " (none: only -p keep runs without engine.allow_no_dataflow)" : "");
  if (s.initial_segments > 0) {
    out << fmt::format("  initial state: {} segments ({}), {} live tensors ({})\n", s.initial_segments,
                       format_bytes(s.initial_reserved), s.initial_tensors, format_bytes(s.initial_live));
  }
  out << fmt::format("  hash {:016x}\n", trace.content_hash);
  return 0;
}

}  // namespace coopsim
