// The command line as a library function (include/coopsim/cli/command_line.hpp): CLI11 parses
// the arguments into the commands' structs (commands.hpp) and calls them; src/app/main.cpp and
// the Python module (python/native) both come here, so both take the same arguments and answer
// with the same lines and exit statuses.
#include "coopsim/cli/command_line.hpp"

#include <CLI/CLI.hpp>

#include <cstdlib>
#include <cstring>
#include <ostream>

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

}  // namespace

int run_command_line(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"coopsim " COOPSIM_VERSION " — trace-driven simulator of GPU memory management"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "coopsim " COOPSIM_VERSION "\ncommit " COOPSIM_COMMIT "\n" COOPSIM_BUILD_INFO);

  RunArgs run;
  auto* run_cmd = app.add_subcommand("run", "simulate a trace under an allocator and a policy");
  run_cmd->add_option("trace", run.trace, "trace file (.jsonl or .jsonl.gz)")->required();
  run_cmd->add_option("--config,-c", run.config, "JSON config file");
  run_cmd->add_option("--allocator,-a", run.allocators,
                      "allocator model; a comma list or 'all' runs each (default: the config's, pytorch)")
      ->check(cli::comma_list());
  run_cmd->add_option("--policy,-p", run.policies,
                      "memory policy; a comma list or 'all' runs each (default: the config's, keep)")
      ->check(cli::comma_list());
  run_cmd
      ->add_option("--budget,-b", run.budgets,
                   "memory budget, e.g. 8GiB, or N% of the trace's peak live bytes; a comma list runs each "
                   "(default: the config's, 80GiB)")
      ->check(cli::comma_list());
  run_cmd->add_option("--set,-s", run.sets, "config override key=value (repeatable)");
  std::string run_initial_state;
  add_initial_state_option(run_cmd, run_initial_state);
  run_cmd->add_option("--output,-o", run.json_out, "write the JSON report here");
  run_cmd->add_option("--csv", run.csv_out, "write CSV (header + one row per run) here");
  run_cmd->add_flag("--json", run.json_stdout, "print the JSON report instead of the text one");
  run_cmd->add_flag("--quiet,-q", run.quiet, "print nothing");
  run_cmd->add_flag("--paranoid", run.paranoid, "check allocator invariants after every event");
  run_cmd->add_flag("--fail-on-oom", run.fail_on_oom, "exit with status 3 when a run ends in OOM");
  run_cmd->add_flag("--check-addresses", run.check_addresses,
                    "compare recorded alloc addresses with the model's; exit 4 on any mismatch");
  for (const ExporterEntry& e : run_exporters().entries()) run_cmd->add_option("--" + e.name, run.exports[e.name], e.help);
  run_cmd
      ->add_option("--memory-map-colour", run.memory_map_colour,
                   "memory map colours: role (tensor role, default) or cost (eviction cost: producer op time)")
      ->check(cli::one_of({"role", "cost"}));
  run_cmd
      ->add_option("--torch-snapshot-format", run.torch_snapshot_format,
                   "torch snapshot layout: 2.x (torch 2.x's dict with the history, default; pytorch.org/memory_viz "
                   "reads it), 1.13 (the list of segments torch 1.13's torch.cuda._memory_viz reads) or auto (the "
                   "one the torch of $COOPSIM_PYTHON, else python3, reads)")
      ->check(cli::one_of({"2.x", "1.13", "auto"}));
  run_cmd->add_flag("--audit", run.audit,
                    "check the run's event log with the independent auditor; exit 5 on a violation");

  std::string validate_path;
  auto* validate_cmd = app.add_subcommand("validate", "check a trace file and print its summary");
  std::string validate_write;
  validate_cmd->add_option("trace", validate_path, "trace file (-: trace text on standard input)")->required();
  validate_cmd->add_option("--write", validate_write,
                           "write the checked trace to this file in trace v1 form (gzip when it ends in .gz)");

  bool list_json = false;
  auto* list_cmd = app.add_subcommand("list", "list allocators, policies and settings with their parameters");
  list_cmd->add_flag("--json", list_json, "machine-readable output");

  GenerateArgs gen;
  auto* gen_cmd = app.add_subcommand("generate", "write a synthetic training-step trace");
  gen_cmd->add_option("--output,-o", gen.output, "output trace (.jsonl or .jsonl.gz)")->required();
  gen_cmd->add_option("--set,-s", gen.sets, "generator option key=value (repeatable; see --help-options)");

  ImportArgs imp;
  auto* import_cmd =
      app.add_subcommand("import", "convert a DTR log, PyTorch memory snapshot or Kineto trace to trace v1");
  import_cmd->add_option("kind", imp.kind, builtin_importers().names(" | "))->required();
  import_cmd->add_option("input", imp.input, "file to convert")->required();
  import_cmd->add_option("--output,-o", imp.output, "output trace (.jsonl or .jsonl.gz)")->required();
  import_cmd->add_option("--device", imp.device, "device index (torch-snapshot, kineto)")
      ->check(cli::integer<int>());
  import_cmd->add_flag("--copy-on-write", imp.copy_on_write,
                       "dtr: model MUTATE as copy-on-write like DTR's simulator (default: in place)");
  import_cmd->add_option("--compat", imp.compat,
                         "dtr: rule profile, coopsim (default) or simrd (DTR's simulator: constants at their "
                         "record, copy-on-write; run it with --set dtr.compat=simrd)");
  import_cmd->add_option(
      "--et", imp.et, "kineto: PyTorch Execution Trace (.json[.gz]) of the same run, for the ops' inputs and outputs");
  import_cmd->add_option("--limit", imp.limits,
                         "input cap KEY=VALUE of the limits config section, e.g. max_tensors=100000000 (repeatable)");

  SnapshotArgs snap;
  auto* snap_cmd = app.add_subcommand(
      "snapshot",
      "summarise a PyTorch memory snapshot of any size as its viewer (torch.cuda._memory_viz) does, draw its memory "
      "timeline, or compare two recordings");
  snap_cmd->add_option("action", snap.action, "stats | segsum | timeline | diff")
      ->required()
      ->check(cli::one_of({"stats", "segsum", "timeline", "diff"}));
  snap_cmd
      ->add_option("inputs", snap.inputs,
                   "snapshot pickle (.pickle or .pickle.gz); diff: two recordings A B (.pickle[.gz], trace v1 "
                   ".jsonl[.gz] or Kineto .json[.gz])")
      ->required()
      ->expected(1, 2);
  snap_cmd->add_option("--from", snap.from,
                       "timeline: start of the window, time since the first event (e.g. 250us, 1.5ms, 2s; plain "
                       "number = ns)");
  snap_cmd->add_option("--to", snap.to, "timeline: end of the window (same syntax as --from)");
  snap_cmd->add_option("--output,-o", snap.output,
                       "timeline: the Chrome trace / Perfetto JSON to write; diff: write the JSON report here");
  snap_cmd->add_option("--svg", snap.svg, "diff: write the figure (SVG) here");
  snap_cmd->add_flag("--json", snap.json, "diff: print the JSON report instead of the text one");
  snap_cmd->add_option("--rows", snap.rows, "diff: attribution rows shown in the text and the figure (default 10)")
      ->check(cli::integer(1, 1000));

  BenchArgs bench;
  auto* bench_cmd = app.add_subcommand("bench", "measure parse and simulation rates (wall clock; for scripts/bench.sh)");
  bench_cmd->add_option("trace", bench.trace, "trace file")->required();
  bench_cmd->add_option("--allocator,-a", bench.allocators, "allocators (default: all)")
      ->check(cli::comma_list());
  bench_cmd->add_option("--policy,-p", bench.policies, "policies (default: keep)")->check(cli::comma_list());
  bench_cmd->add_option("--budget,-b", bench.budget, "memory budget, or N% of the trace's peak live bytes");
  bench_cmd->add_option("--repeat,-r", bench.repeat, "repetitions; the best is reported")
      ->check(cli::integer(1, 100));

  PlanArgs plan;
  std::int64_t plan_capacity = 0;
  auto* plan_cmd = app.add_subcommand("plan", "place MiniMalloc CSV buffers offline, or --check a solution");
  plan_cmd->add_option("problem", plan.problem, "problem CSV id,lower,upper,size")->required();
  plan_cmd->add_option("solution", plan.solution, "with --check: solution CSV to validate");
  plan_cmd->add_option("--output,-o", plan.output, "solution CSV to write");
  plan_cmd->add_option("--method,-m", plan.method, plan::methods().names(" | "));
  auto* plan_capacity_opt = plan_cmd->add_option("--capacity", plan_capacity, "maximum height in bytes")
                                ->check(cli::integer<std::int64_t>());
  plan_cmd->add_option("--time-limit", plan.time_limit_s, "planner: seconds (sets the search budget)")
      ->check(cli::number());
  plan_cmd->add_flag("--check", plan.check, "validate SOLUTION against PROBLEM instead of planning");
  plan_cmd->add_flag("--no-bf-quirk", plan.no_bf_quirk, "smartpool-bf: textbook best fit (consider the lowest gap)");
  plan_cmd->add_option("--limit", plan.limits,
                       "input cap KEY=VALUE: max_buffers, max_conflicts (docs/limits.md; repeatable)");

  SweepArgs sweep;
  auto* sweep_cmd = app.add_subcommand("sweep", "run every combination of a sweep config in parallel (docs/sweep.md)");
  sweep_cmd->add_option("config", sweep.config, "sweep config (JSON)")->required();
  sweep_cmd->add_option("--jobs,-j", sweep.jobs, "parallel runs (default: every core)")
      ->check(cli::integer(1, 4096));
  sweep_cmd->add_option("--output,-o", sweep.output, "output directory (default: sweep-out)");
  sweep_cmd->add_flag("--resume", sweep.resume, "keep the runs the output directory already holds; run the rest");
  sweep_cmd->add_option("--shard", sweep.shard, "run only slice K of N (K/N; runs with index mod N == K-1)");
  sweep_cmd->add_option("--stop-after", sweep.stop_after, "test hook: stop after N results, as if killed")
      ->check(cli::integer<std::size_t>())
      ->group("");

  MergeArgs merge;
  auto* merge_cmd = app.add_subcommand("merge", "combine the shard directories of one sweep (docs/cluster.md)");
  merge_cmd->add_option("dirs", merge.dirs, "shard output directories")->required();
  merge_cmd->add_option("--output,-o", merge.output, "merged output directory")->required();

  MinBudgetArgs minb;
  auto* minb_cmd = app.add_subcommand("minbudget", "bisect for the smallest budget a run completes in (docs/sweep.md)");
  minb_cmd->add_option("trace", minb.trace, "trace file")->required();
  minb_cmd->add_option("--config,-c", minb.config, "JSON config file");
  // Optional as in run: the config's, else keep on pytorch; the first output line names both.
  minb_cmd->add_option("--policy,-p", minb.policy, "memory policy (default: the config's, keep)");
  minb_cmd->add_option("--allocator,-a", minb.allocator, "allocator model (default: the config's, pytorch)");
  double minb_overhead = 0.0;
  auto* minb_overhead_opt = minb_cmd->add_option("--max-overhead", minb_overhead, "also require compute overhead <= X")
                                ->check(cli::number());
  minb_cmd->add_option("--set,-s", minb.sets, "config override key=value (repeatable)");
  std::string minb_initial_state;
  add_initial_state_option(minb_cmd, minb_initial_state);
  minb_cmd->add_flag("--json", minb.json, "print the result as JSON");

  AdviseArgs adv;
  auto* adv_cmd = app.add_subcommand(
      "advise", "rank PYTORCH_CUDA_ALLOC_CONF settings (then policies) at a device capacity (docs/user-guide.md)");
  adv_cmd->add_option("trace", adv.trace, "trace file")->required();
  adv_cmd->add_option("--capacity", adv.capacity, "device memory, e.g. 80GiB, or N% of the trace's peak live bytes")
      ->required();
  adv_cmd->add_option("--reserve", adv.reserve,
                      "device memory outside PyTorch's caching allocator, taken off the capacity (default 512MiB: "
                      "the CUDA context)");
  adv_cmd->add_option("--config,-c", adv.config, "JSON config file (link, engine, limits, policy parameters)");
  adv_cmd->add_option("--set,-s", adv.sets, "config override key=value (repeatable), e.g. link.preset=pcie5-x16");
  adv_cmd->add_option("--jobs,-j", adv.jobs, "parallel simulations (default: every core)")
      ->check(cli::integer(1, 4096));
  adv_cmd->add_flag("--json", adv.json, "print the ranking as JSON");

  ReplayGpuArgs replay;
  auto* replay_cmd =
      app.add_subcommand("replay-gpu", "replay a plan (run --plan) on a CUDA device: timing and integrity");
  replay_cmd->add_option("plan", replay.plan, "plan file (docs/plan-format.md)")->required();
  replay_cmd->add_option("--output,-o", replay.output, "write the JSON report here");
  replay_cmd->add_option("--iterations", replay.iterations, "timed replays of the plan (default 5)")
      ->check(cli::integer<int>());
  replay_cmd->add_option("--warmup", replay.warmup, "untimed replays first (default 1)")
      ->check(cli::integer<int>());
  replay_cmd->add_option("--calibrate-link", replay.calibrate_link, "write the measured link as a config file here");
  replay_cmd->add_option("--device", replay.device, "CUDA device index (default 0)")
      ->check(cli::integer<int>());
  replay_cmd->add_option("--sample-stride", replay.sample_stride, "check and write every Nth 4-byte word (default 1)")
      ->check(cli::integer<int>());
  replay_cmd->add_flag("--full-check", replay.full_check,
                       "check every sampled word of every input, even where that outlasts the op's duration");
  replay_cmd->add_flag("--skip-check", replay.skip_check, "load the plan without the plan checker");
  replay_cmd->add_flag("--poison", replay.poison, "fill blocks allocated without content with a poison pattern");
  replay_cmd->add_flag("--no-graph", replay.no_graph,
                       "issue every step from the host instead of a captured CUDA graph");

  std::string completion_shell;
  auto* completion_cmd = app.add_subcommand(
      "completion", "print the shell completion script (bash or zsh), made from this command line and the registries");
  completion_cmd->add_option("shell", completion_shell, "the shell: bash or zsh")
      ->required()
      ->check(cli::one_of({"bash", "zsh"}));
  auto* man_cmd = app.add_subcommand("man", "print the manual page coopsim(1) in roff (read it with: man -l FILE)");

  cli::refuse_empty_values(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e, out, err);  // --help, --version
    // One line and status 2 (docs/architecture.md), never CLI11's "Run with --help" lines.
    err << "coopsim: error: " << cli::usage_error(app, e) << "\n";
    return cli::kUsageStatus;
  }
  for (auto* list : {&run.allocators, &run.policies, &run.budgets, &bench.allocators, &bench.policies}) {
    cli::split_comma_lists(*list);
  }
  if (plan_capacity_opt->count() > 0) plan.capacity = plan_capacity;
  if (minb_overhead_opt->count() > 0) minb.max_overhead = minb_overhead;
  // --initial-state is the config key initial_state, applied before the --set overrides.
  if (!run_initial_state.empty()) run.sets.insert(run.sets.begin(), "initial_state=" + run_initial_state);
  if (!minb_initial_state.empty()) minb.sets.insert(minb.sets.begin(), "initial_state=" + minb_initial_state);
  // COOPSIM_AUDIT=1 runs the independent auditor over every simulated run's event log
  // (docs/architecture.md, "Validation"); the test suites set it. Read here, once: the library
  // takes it as RunOptions::audit.
  const char* audit_env = std::getenv("COOPSIM_AUDIT");
  const bool audit_every_run = audit_env != nullptr && std::strcmp(audit_env, "1") == 0;
  run.audit_every_run = bench.audit_every_run = sweep.audit_every_run = minb.audit_every_run =
      adv.audit_every_run =
      audit_every_run;
  try {
    if (run_cmd->parsed()) return command_run(run, out);
    if (validate_cmd->parsed()) return command_validate(validate_path, validate_write, out);
    if (list_cmd->parsed()) return command_list(list_json, out);
    if (gen_cmd->parsed()) return command_generate(gen, out);
    if (import_cmd->parsed()) return command_import(imp, out);
    if (snap_cmd->parsed()) return command_snapshot(snap, out);
    if (bench_cmd->parsed()) return command_bench(bench, out);
    if (plan_cmd->parsed()) return command_plan(plan, out);
    if (sweep_cmd->parsed()) return command_sweep(sweep, out);
    if (merge_cmd->parsed()) return command_merge(merge, out);
    if (minb_cmd->parsed()) return command_minbudget(minb, out);
    if (adv_cmd->parsed()) return command_advise(adv, out);
    if (replay_cmd->parsed()) return command_replay_gpu(replay, out);
    if (completion_cmd->parsed()) {
      out << (completion_shell == "bash" ? cli::bash_completion(app) : cli::zsh_completion(app));
      return 0;
    }
    if (man_cmd->parsed()) {
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
