// coopsim command line: parses arguments with CLI11 and calls the library's commands.
#include <CLI/CLI.hpp>

#include <iostream>

#include "coopsim/commands.hpp"
#include "coopsim/error.hpp"
#include "coopsim_config.h"

int main(int argc, char** argv) {
  CLI::App app{"coopsim " COOPSIM_VERSION " — trace-driven simulator of GPU memory management"};
  app.require_subcommand(1);
  app.set_version_flag("--version", COOPSIM_VERSION);

  coopsim::RunArgs run;
  auto* run_cmd = app.add_subcommand("run", "replay a trace under an allocator and a policy");
  run_cmd->add_option("trace", run.trace, "trace file (.jsonl or .jsonl.gz)")->required();
  run_cmd->add_option("--config,-c", run.config, "JSON config file");
  run_cmd->add_option("--allocator,-a", run.allocators,
                      "allocator model; a comma list or 'all' runs each")->delimiter(',');
  run_cmd->add_option("--policy,-p", run.policies, "memory policy; a comma list or 'all' runs each")
      ->delimiter(',');
  run_cmd->add_option("--budget,-b", run.budgets,
                      "memory budget, e.g. 8GiB, or N% of the trace's peak live bytes; a comma list runs each")
      ->delimiter(',');
  run_cmd->add_option("--set,-s", run.sets, "config override key=value (repeatable)");
  run_cmd->add_option("--output,-o", run.json_out, "write the JSON report here");
  run_cmd->add_option("--csv", run.csv_out, "write CSV (header + one row per run) here");
  run_cmd->add_flag("--json", run.json_stdout, "print the JSON report instead of the text one");
  run_cmd->add_flag("--quiet,-q", run.quiet, "print nothing");
  run_cmd->add_flag("--paranoid", run.paranoid, "check allocator invariants after every event");
  run_cmd->add_flag("--fail-on-oom", run.fail_on_oom, "exit with status 3 when a run ends in OOM");
  run_cmd->add_flag("--check-addresses", run.check_addresses,
                    "compare recorded alloc addresses with the model's; exit 4 on any mismatch");

  std::string validate_path;
  auto* validate_cmd = app.add_subcommand("validate", "check a trace file and print its summary");
  validate_cmd->add_option("trace", validate_path, "trace file")->required();

  bool list_json = false;
  auto* list_cmd = app.add_subcommand("list", "list allocators, policies and settings with their parameters");
  list_cmd->add_flag("--json", list_json, "machine-readable output");

  coopsim::GenerateArgs gen;
  auto* gen_cmd = app.add_subcommand("generate", "write a synthetic training-step trace");
  gen_cmd->add_option("--output,-o", gen.output, "output trace (.jsonl or .jsonl.gz)")->required();
  gen_cmd->add_option("--set,-s", gen.sets, "generator option key=value (repeatable; see --help-options)");

  coopsim::ImportArgs imp;
  auto* import_cmd = app.add_subcommand("import", "convert a DTR log, PyTorch memory snapshot or Kineto trace to trace v1");
  import_cmd->add_option("kind", imp.kind, "dtr | torch-snapshot | kineto")->required();
  import_cmd->add_option("input", imp.input, "file to convert")->required();
  import_cmd->add_option("--output,-o", imp.output, "output trace (.jsonl or .jsonl.gz)")->required();
  import_cmd->add_option("--device", imp.device, "device index (torch-snapshot, kineto)");
  import_cmd->add_flag("--copy-on-write", imp.copy_on_write,
                       "dtr: model MUTATE as copy-on-write like DTR's simulator (default: in place)");

  coopsim::BenchArgs bench;
  auto* bench_cmd = app.add_subcommand("bench", "measure parse and replay rates (wall clock; for scripts/bench.sh)");
  bench_cmd->add_option("trace", bench.trace, "trace file")->required();
  bench_cmd->add_option("--allocator,-a", bench.allocators, "allocators (default: all)")->delimiter(',');
  bench_cmd->add_option("--budget,-b", bench.budget, "memory budget");
  bench_cmd->add_option("--repeat,-r", bench.repeat, "repetitions; the best is reported")->check(CLI::Range(1, 100));

  coopsim::PlanArgs plan;
  std::int64_t plan_capacity = 0;
  auto* plan_cmd = app.add_subcommand("plan", "place MiniMalloc CSV buffers offline, or --check a solution");
  plan_cmd->add_option("problem", plan.problem, "problem CSV id,lower,upper,size")->required();
  plan_cmd->add_option("solution", plan.solution, "with --check: solution CSV to validate");
  plan_cmd->add_option("--output,-o", plan.output, "solution CSV to write");
  plan_cmd->add_option("--method,-m", plan.method, "planner | smartpool-bf | smartpool-ff | greedy-by-size");
  auto* plan_capacity_opt = plan_cmd->add_option("--capacity", plan_capacity, "maximum height in bytes");
  plan_cmd->add_option("--time-limit", plan.time_limit_s, "planner: seconds (sets the search budget)");
  plan_cmd->add_flag("--check", plan.check, "validate SOLUTION against PROBLEM instead of planning");
  plan_cmd->add_flag("--no-bf-quirk", plan.no_bf_quirk, "smartpool-bf: textbook best fit (consider the lowest gap)");

  CLI11_PARSE(app, argc, argv);
  if (plan_capacity_opt->count() > 0) plan.capacity = plan_capacity;
  try {
    if (run_cmd->parsed()) return coopsim::command_run(run, std::cout);
    if (validate_cmd->parsed()) return coopsim::command_validate(validate_path, std::cout);
    if (list_cmd->parsed()) return coopsim::command_list(list_json, std::cout);
    if (gen_cmd->parsed()) return coopsim::command_generate(gen, std::cout);
    if (import_cmd->parsed()) return coopsim::command_import(imp, std::cout);
    if (bench_cmd->parsed()) return coopsim::command_bench(bench, std::cout);
    if (plan_cmd->parsed()) return coopsim::command_plan(plan, std::cout);
  } catch (const coopsim::Error& e) {
    std::cerr << "coopsim: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "coopsim: internal error: " << e.what() << "\n";
    return 70;
  }
  return 0;
}
