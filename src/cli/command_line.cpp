// The command line as a library function (include/coopsim/cli/command_line.hpp): CLI11 parses
// the arguments into the commands' structs (commands.hpp) and calls them; src/app/main.cpp and
// the Python module (python/native) both come here, so both take the same arguments and answer
// with the same lines and exit statuses.
#include "coopsim/cli/command_line.hpp"

#include <CLI/CLI.hpp>

#include <array>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <string_view>

#include "coopsim/base/error.hpp"
#include "coopsim/base/text.hpp"
#include "coopsim/cli/commands.hpp"
#include "coopsim/cli/exporters.hpp"
#include "coopsim/import/registry.hpp"
#include "coopsim/planner/planner.hpp"
#include "coopsim_config.h"
#include "coopsim_vcs.h"
#include "cli_errors.hpp"
#include "cli_model.hpp"

namespace coopsim {
namespace {

void add_initial_state_option(CLI::App* cmd, std::string& value) {
  cmd->add_option("--initial-state", value,
                  "a snapshot's recorded allocator state: recorded (install it; default) or empty (simulate its "
                  "tensors as requests from an empty allocator)")
      ->check(cli::one_of({"recorded", "empty"}));
}

// What the command line parses into; a command not built for this line keeps its nullptrs.
struct Parsed {
  RunArgs run;
  CLI::App* run_cmd = nullptr;
  std::string run_initial_state;
  std::string validate_path;
  std::string validate_write;
  CLI::App* validate_cmd = nullptr;
  bool list_json = false;
  CLI::App* list_cmd = nullptr;
  GenerateArgs gen;
  CLI::App* gen_cmd = nullptr;
  ImportArgs imp;
  CLI::App* import_cmd = nullptr;
  SnapshotArgs snap;
  CLI::App* snap_cmd = nullptr;
  BenchArgs bench;
  CLI::App* bench_cmd = nullptr;
  PlanArgs plan;
  std::int64_t plan_capacity = 0;
  CLI::App* plan_cmd = nullptr;
  CLI::Option* plan_capacity_opt = nullptr;
  SweepArgs sweep;
  CLI::App* sweep_cmd = nullptr;
  MergeArgs merge;
  CLI::App* merge_cmd = nullptr;
  MinBudgetArgs minb;
  CLI::App* minb_cmd = nullptr;
  double minb_overhead = 0.0;
  CLI::Option* minb_overhead_opt = nullptr;
  std::string minb_initial_state;
  AdviseArgs adv;
  CLI::App* adv_cmd = nullptr;
  ReplayGpuArgs replay;
  CLI::App* replay_cmd = nullptr;
  std::string completion_shell;
  CLI::App* completion_cmd = nullptr;
  CLI::App* man_cmd = nullptr;
};

void define_run(CLI::App& app, Parsed& p) {
  p.run_cmd = app.add_subcommand("run", "simulate a trace under an allocator and a policy");
  p.run_cmd->add_option("trace", p.run.trace, "trace file (.jsonl or .jsonl.gz)")->required();
  p.run_cmd->add_option("--config,-c", p.run.config, "JSON config file");
  p.run_cmd
      ->add_option("--allocator,-a", p.run.allocators,
                   "allocator model; a comma list or 'all' runs each (default: the config's, pytorch)")
      ->check(cli::comma_list());
  p.run_cmd
      ->add_option("--policy,-p", p.run.policies,
                   "memory policy; a comma list or 'all' runs each (default: the config's, keep)")
      ->check(cli::comma_list());
  p.run_cmd
      ->add_option("--budget,-b", p.run.budgets,
                   "memory budget, e.g. 8GiB, or N% of the trace's peak live bytes; a comma list runs each "
                   "(default: the config's, 80GiB)")
      ->check(cli::comma_list());
  p.run_cmd->add_option("--set,-s", p.run.sets, "config override key=value (repeatable)");
  add_initial_state_option(p.run_cmd, p.run_initial_state);
  p.run_cmd->add_option("--output,-o", p.run.json_out, "write the JSON report here");
  p.run_cmd->add_option("--csv", p.run.csv_out, "write CSV (header + one row per run) here");
  p.run_cmd->add_flag("--json", p.run.json_stdout, "print the JSON report instead of the text one");
  p.run_cmd->add_flag("--quiet,-q", p.run.quiet, "print nothing");
  p.run_cmd->add_flag("--paranoid", p.run.paranoid, "check allocator invariants after every event");
  p.run_cmd->add_flag("--fail-on-oom", p.run.fail_on_oom, "exit with status 3 when a run ends in OOM");
  p.run_cmd->add_flag("--check-addresses", p.run.check_addresses,
                      "compare recorded alloc addresses with the model's; exit 4 on any mismatch");
  for (const ExporterEntry& e : run_exporters().entries())
    p.run_cmd->add_option("--" + e.name, p.run.exports[e.name], e.help);
  p.run_cmd
      ->add_option("--memory-map-colour", p.run.memory_map_colour,
                   "memory map colours: role (tensor role, default) or cost (eviction cost: producer op time)")
      ->check(cli::one_of({"role", "cost"}));
  p.run_cmd
      ->add_option("--torch-snapshot-format", p.run.torch_snapshot_format,
                   "torch snapshot layout: 2.x (torch 2.x's dict with the history, default; pytorch.org/memory_viz "
                   "reads it), 1.13 (the list of segments torch 1.13's torch.cuda._memory_viz reads) or auto (the "
                   "one the torch of $COOPSIM_PYTHON, else python3, reads)")
      ->check(cli::one_of({"2.x", "1.13", "auto"}));
  p.run_cmd->add_flag("--audit", p.run.audit,
                      "check the run's event log with the independent auditor; exit 5 on a violation");
}

void define_validate(CLI::App& app, Parsed& p) {
  p.validate_cmd = app.add_subcommand("validate", "check a trace file and print its summary");
  p.validate_cmd->add_option("trace", p.validate_path, "trace file (-: trace text on standard input)")->required();
  p.validate_cmd->add_option("--write", p.validate_write,
                             "write the checked trace to this file in trace v1 form (gzip when it ends in .gz)");
}

void define_list(CLI::App& app, Parsed& p) {
  p.list_cmd = app.add_subcommand("list", "list allocators, policies and settings with their parameters");
  p.list_cmd->add_flag("--json", p.list_json, "machine-readable output");
}

void define_generate(CLI::App& app, Parsed& p) {
  p.gen_cmd = app.add_subcommand("generate", "write a synthetic training-step trace");
  p.gen_cmd->add_option("--output,-o", p.gen.output, "output trace (.jsonl or .jsonl.gz)")->required();
  p.gen_cmd->add_option("--set,-s", p.gen.sets, "generator option key=value (repeatable; see --help-options)");
}

void define_import(CLI::App& app, Parsed& p) {
  p.import_cmd = app.add_subcommand("import", "convert a DTR log, PyTorch memory snapshot or Kineto trace to trace v1");
  p.import_cmd->add_option("kind", p.imp.kind, builtin_importers().names(" | "))->required();
  p.import_cmd->add_option("input", p.imp.input, "file to convert")->required();
  p.import_cmd->add_option("--output,-o", p.imp.output, "output trace (.jsonl or .jsonl.gz)")->required();
  p.import_cmd->add_option("--device", p.imp.device, "device index (torch-snapshot, kineto)")
      ->check(cli::integer<int>());
  p.import_cmd->add_flag("--copy-on-write", p.imp.copy_on_write,
                         "dtr: model MUTATE as copy-on-write like DTR's simulator (default: in place)");
  p.import_cmd->add_option("--compat", p.imp.compat,
                           "dtr: rule profile, coopsim (default) or simrd (DTR's simulator: constants at their "
                           "record, copy-on-write; run it with --set dtr.compat=simrd)");
  p.import_cmd->add_option(
      "--et", p.imp.et,
      "kineto: PyTorch Execution Trace (.json[.gz]) of the same run, for the ops' inputs and outputs");
  p.import_cmd->add_option("--limit", p.imp.limits,
                           "input cap KEY=VALUE of the limits config section, e.g. max_tensors=100000000 (repeatable)");
}

void define_snapshot(CLI::App& app, Parsed& p) {
  p.snap_cmd = app.add_subcommand(
      "snapshot",
      "summarise a PyTorch memory snapshot of any size as its viewer (torch.cuda._memory_viz) does, draw its memory "
      "timeline, or compare two recordings");
  p.snap_cmd->add_option("action", p.snap.action, "stats | segsum | timeline | diff")
      ->required()
      ->check(cli::one_of({"stats", "segsum", "timeline", "diff"}));
  p.snap_cmd
      ->add_option("inputs", p.snap.inputs,
                   "snapshot pickle (.pickle or .pickle.gz); diff: two recordings A B (.pickle[.gz], trace v1 "
                   ".jsonl[.gz] or Kineto .json[.gz])")
      ->required()
      ->expected(1, 2);
  p.snap_cmd->add_option("--from", p.snap.from,
                         "timeline: start of the window, time since the first event (e.g. 250us, 1.5ms, 2s; plain "
                         "number = ns)");
  p.snap_cmd->add_option("--to", p.snap.to, "timeline: end of the window (same syntax as --from)");
  p.snap_cmd->add_option("--output,-o", p.snap.output,
                         "timeline: the Chrome trace / Perfetto JSON to write; diff: write the JSON report here");
  p.snap_cmd->add_option("--svg", p.snap.svg, "diff: write the figure (SVG) here");
  p.snap_cmd->add_flag("--json", p.snap.json, "diff: print the JSON report instead of the text one");
  p.snap_cmd->add_option("--rows", p.snap.rows, "diff: attribution rows shown in the text and the figure (default 10)")
      ->check(cli::integer(1, 1000));
}

void define_bench(CLI::App& app, Parsed& p) {
  p.bench_cmd = app.add_subcommand("bench", "measure parse and simulation rates (wall clock; for scripts/bench.sh)");
  p.bench_cmd->add_option("trace", p.bench.trace, "trace file")->required();
  p.bench_cmd->add_option("--allocator,-a", p.bench.allocators, "allocators (default: all)")->check(cli::comma_list());
  p.bench_cmd->add_option("--policy,-p", p.bench.policies, "policies (default: keep)")->check(cli::comma_list());
  p.bench_cmd->add_option("--budget,-b", p.bench.budget, "memory budget, or N% of the trace's peak live bytes");
  p.bench_cmd->add_option("--repeat,-r", p.bench.repeat, "repetitions; the best is reported")
      ->check(cli::integer(1, 100));
}

void define_plan(CLI::App& app, Parsed& p) {
  p.plan_cmd = app.add_subcommand("plan", "place MiniMalloc CSV buffers offline, or --check a solution");
  p.plan_cmd->add_option("problem", p.plan.problem, "problem CSV id,lower,upper,size")->required();
  p.plan_cmd->add_option("solution", p.plan.solution, "with --check: solution CSV to validate");
  p.plan_cmd->add_option("--output,-o", p.plan.output, "solution CSV to write");
  p.plan_cmd->add_option("--method,-m", p.plan.method, plan::methods().names(" | "));
  p.plan_capacity_opt = p.plan_cmd->add_option("--capacity", p.plan_capacity, "maximum height in bytes")
                            ->check(cli::integer<std::int64_t>());
  p.plan_cmd->add_option("--time-limit", p.plan.time_limit_s, "planner: seconds (sets the search budget)")
      ->check(cli::number());
  p.plan_cmd->add_flag("--check", p.plan.check, "validate SOLUTION against PROBLEM instead of planning");
  p.plan_cmd->add_flag("--no-bf-quirk", p.plan.no_bf_quirk,
                       "smartpool-bf: textbook best fit (consider the lowest gap)");
  p.plan_cmd->add_option("--limit", p.plan.limits,
                         "input cap KEY=VALUE: max_buffers, max_conflicts (docs/limits.md; repeatable)");
}

void define_sweep(CLI::App& app, Parsed& p) {
  p.sweep_cmd = app.add_subcommand("sweep", "run every combination of a sweep config in parallel (docs/sweep.md)");
  p.sweep_cmd->add_option("config", p.sweep.config, "sweep config (JSON)")->required();
  p.sweep_cmd->add_option("--jobs,-j", p.sweep.jobs, "parallel runs (default: every core)")
      ->check(cli::integer(1, 4096));
  p.sweep_cmd->add_option("--output,-o", p.sweep.output, "output directory (default: sweep-out)");
  p.sweep_cmd->add_flag("--resume", p.sweep.resume, "keep the runs the output directory already holds; run the rest");
  p.sweep_cmd->add_option("--shard", p.sweep.shard, "run only slice K of N (K/N; runs with index mod N == K-1)");
  p.sweep_cmd->add_option("--stop-after", p.sweep.stop_after, "test hook: stop after N results, as if killed")
      ->check(cli::integer<std::size_t>())
      ->group("");
}

void define_merge(CLI::App& app, Parsed& p) {
  p.merge_cmd = app.add_subcommand("merge", "combine the shard directories of one sweep (docs/cluster.md)");
  p.merge_cmd->add_option("dirs", p.merge.dirs, "shard output directories")->required();
  p.merge_cmd->add_option("--output,-o", p.merge.output, "merged output directory")->required();
}

void define_minbudget(CLI::App& app, Parsed& p) {
  p.minb_cmd = app.add_subcommand("minbudget", "bisect for the smallest budget a run completes in (docs/sweep.md)");
  p.minb_cmd->add_option("trace", p.minb.trace, "trace file")->required();
  p.minb_cmd->add_option("--config,-c", p.minb.config, "JSON config file");
  // Optional as in p.run: the config's, else keep on pytorch; the first output line names both.
  p.minb_cmd->add_option("--policy,-p", p.minb.policy, "memory policy (default: the config's, keep)");
  p.minb_cmd->add_option("--allocator,-a", p.minb.allocator, "allocator model (default: the config's, pytorch)");
  p.minb_overhead_opt = p.minb_cmd->add_option("--max-overhead", p.minb_overhead, "also require compute overhead <= X")
                            ->check(cli::number());
  p.minb_cmd->add_option("--set,-s", p.minb.sets, "config override key=value (repeatable)");
  add_initial_state_option(p.minb_cmd, p.minb_initial_state);
  p.minb_cmd->add_flag("--json", p.minb.json, "print the result as JSON");
}

void define_advise(CLI::App& app, Parsed& p) {
  p.adv_cmd = app.add_subcommand(
      "advise", "rank PYTORCH_CUDA_ALLOC_CONF settings (then policies) at a device capacity (docs/user-guide.md)");
  p.adv_cmd->add_option("trace", p.adv.trace, "trace file")->required();
  p.adv_cmd->add_option("--capacity", p.adv.capacity, "device memory, e.g. 80GiB, or N% of the trace's peak live bytes")
      ->required();
  p.adv_cmd->add_option("--reserve", p.adv.reserve,
                        "device memory outside PyTorch's caching allocator, taken off the capacity (default 512MiB: "
                        "the CUDA context)");
  p.adv_cmd->add_option("--config,-c", p.adv.config, "JSON config file (link, engine, limits, policy parameters)");
  p.adv_cmd->add_option("--set,-s", p.adv.sets, "config override key=value (repeatable), e.g. link.preset=pcie5-x16");
  p.adv_cmd->add_option("--jobs,-j", p.adv.jobs, "parallel simulations (default: every core)")
      ->check(cli::integer(1, 4096));
  p.adv_cmd->add_flag("--json", p.adv.json, "print the ranking as JSON");
}

void define_replay_gpu(CLI::App& app, Parsed& p) {
  p.replay_cmd = app.add_subcommand("replay-gpu", "replay a plan (run --plan) on a CUDA device: timing and integrity");
  p.replay_cmd->add_option("plan", p.replay.plan, "plan file (docs/plan-format.md)")->required();
  p.replay_cmd->add_option("--output,-o", p.replay.output, "write the JSON report here");
  p.replay_cmd->add_option("--iterations", p.replay.iterations, "timed replays of the plan (default 5)")
      ->check(cli::integer<int>());
  p.replay_cmd->add_option("--warmup", p.replay.warmup, "untimed replays first (default 1)")
      ->check(cli::integer<int>());
  p.replay_cmd->add_option("--calibrate-link", p.replay.calibrate_link,
                           "write the measured link as a config file here");
  p.replay_cmd->add_option("--device", p.replay.device, "CUDA device index (default 0)")->check(cli::integer<int>());
  p.replay_cmd
      ->add_option("--sample-stride", p.replay.sample_stride, "check and write every Nth 4-byte word (default 1)")
      ->check(cli::integer<int>());
  p.replay_cmd->add_flag("--full-check", p.replay.full_check,
                         "check every sampled word of every input, even where that outlasts the op's duration");
  p.replay_cmd->add_flag("--skip-check", p.replay.skip_check, "load the plan without the plan checker");
  p.replay_cmd->add_flag("--poison", p.replay.poison, "fill blocks allocated without content with a poison pattern");
  p.replay_cmd->add_flag("--no-graph", p.replay.no_graph,
                         "issue every step from the host instead of a captured CUDA graph");
}

void define_completion(CLI::App& app, Parsed& p) {
  p.completion_cmd = app.add_subcommand(
      "completion", "print the shell completion script (bash or zsh), made from this command line and the registries");
  p.completion_cmd->add_option("shell", p.completion_shell, "the shell: bash or zsh")
      ->required()
      ->check(cli::one_of({"bash", "zsh"}));
}

void define_man(CLI::App& app, Parsed& p) {
  p.man_cmd = app.add_subcommand("man", "print the manual page coopsim(1) in roff (read it with: man -l FILE)");
}

struct CommandDef {
  std::string_view name;
  void (*define)(CLI::App&, Parsed&);
};

// In --help order (the completions and the man page list them in this order too).
constexpr std::array<CommandDef, 15> kCommands{{
    {"run", define_run},
    {"validate", define_validate},
    {"list", define_list},
    {"generate", define_generate},
    {"import", define_import},
    {"snapshot", define_snapshot},
    {"bench", define_bench},
    {"plan", define_plan},
    {"sweep", define_sweep},
    {"merge", define_merge},
    {"minbudget", define_minbudget},
    {"advise", define_advise},
    {"replay-gpu", define_replay_gpu},
    {"completion", define_completion},
    {"man", define_man},
}};

// Whether this command line needs `name` built. Building every command's options is most of a
// short run's start (about half of `coopsim run`'s instructions on a small trace), so a line that
// begins with a command's name builds that command alone: it parses, answers --help and reports
// errors exactly as with all of them, since nothing of one command refers to another. Anything
// else (no command, an option first, an unknown word, completion and man, which describe all
// commands) builds them all.
bool builds(int argc, const char* const* argv, std::string_view name) {
  if (argc < 2 || argv[1] == nullptr) return true;
  const std::string_view first = argv[1];
  if (first == "completion" || first == "man") return true;
  for (const CommandDef& c : kCommands) {
    if (c.name == first) return c.name == name;
  }
  return true;
}

}  // namespace

int run_command_line(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"coopsim " COOPSIM_VERSION " — trace-driven simulator of GPU memory management"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "coopsim " COOPSIM_VERSION "\ncommit " COOPSIM_COMMIT "\n" COOPSIM_BUILD_INFO);
  Parsed p;
  for (const CommandDef& c : kCommands) {
    if (builds(argc, argv, c.name)) c.define(app, p);
  }

  cli::refuse_empty_values(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e, out, err);  // --help, --version
    // One line and status 2 (docs/architecture.md), never CLI11's "Run with --help" lines.
    err << "coopsim: error: " << cli::usage_error(app, e) << "\n";
    return cli::kUsageStatus;
  }
  for (auto* list : {&p.run.allocators, &p.run.policies, &p.run.budgets, &p.bench.allocators, &p.bench.policies}) {
    cli::split_comma_lists(*list);
  }
  if (p.plan_capacity_opt != nullptr && p.plan_capacity_opt->count() > 0) p.plan.capacity = p.plan_capacity;
  if (p.minb_overhead_opt != nullptr && p.minb_overhead_opt->count() > 0) p.minb.max_overhead = p.minb_overhead;
  // --initial-state is the config key initial_state, applied before the --set overrides.
  if (!p.run_initial_state.empty()) p.run.sets.insert(p.run.sets.begin(), "initial_state=" + p.run_initial_state);
  if (!p.minb_initial_state.empty()) p.minb.sets.insert(p.minb.sets.begin(), "initial_state=" + p.minb_initial_state);
  // COOPSIM_AUDIT=1 runs the independent auditor over every simulated run's event log
  // (docs/architecture.md, "Validation"); the test suites set it. Read here, once: the library
  // takes it as RunOptions::audit.
  const char* audit_env = std::getenv("COOPSIM_AUDIT");
  const bool audit_every_run = audit_env != nullptr && std::strcmp(audit_env, "1") == 0;
  p.run.audit_every_run = p.bench.audit_every_run = p.sweep.audit_every_run = p.minb.audit_every_run =
      p.adv.audit_every_run = audit_every_run;
  const auto chosen = [](const CLI::App* cmd) { return cmd != nullptr && cmd->parsed(); };
  try {
    if (chosen(p.run_cmd)) return command_run(p.run, out);
    if (chosen(p.validate_cmd)) return command_validate(p.validate_path, p.validate_write, out);
    if (chosen(p.list_cmd)) return command_list(p.list_json, out);
    if (chosen(p.gen_cmd)) return command_generate(p.gen, out);
    if (chosen(p.import_cmd)) return command_import(p.imp, out);
    if (chosen(p.snap_cmd)) return command_snapshot(p.snap, out);
    if (chosen(p.bench_cmd)) return command_bench(p.bench, out);
    if (chosen(p.plan_cmd)) return command_plan(p.plan, out);
    if (chosen(p.sweep_cmd)) return command_sweep(p.sweep, out);
    if (chosen(p.merge_cmd)) return command_merge(p.merge, out);
    if (chosen(p.minb_cmd)) return command_minbudget(p.minb, out);
    if (chosen(p.adv_cmd)) return command_advise(p.adv, out);
    if (chosen(p.replay_cmd)) return command_replay_gpu(p.replay, out);
    if (chosen(p.completion_cmd)) {
      out << (p.completion_shell == "bash" ? cli::bash_completion(app) : cli::zsh_completion(app));
      return 0;
    }
    if (chosen(p.man_cmd)) {
      out << cli::man_page(app);
      return 0;
    }
  } catch (const UsageError& e) {
    err << "coopsim: error: " << one_line(e.what()) << "\n";
    return cli::kUsageStatus;
  } catch (const Error& e) {
    err << "coopsim: error: " << one_line(e.what()) << "\n";  // input bytes quoted in it stay printable UTF-8
    return 1;
  } catch (const std::exception& e) {
    err << "coopsim: internal error: " << excerpt(e.what(), 1024) << "\n";  // still one line
    return 70;
  }
  return 0;
}

}  // namespace coopsim
