// The CLI's commands as library functions: main.cpp parses arguments into these structs and
// calls them. Each returns the process exit status and throws coopsim::Error on bad input.
// Output files go through OutputFile (coopsim/base/output_file.hpp), so a failed command leaves none.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "coopsim/sweep/sweep.hpp"

namespace coopsim {

struct RunArgs {
  std::string trace;
  std::string config;                   // optional config file
  std::vector<std::string> allocators;  // each runs (cartesian product policy x allocator x budget)
  std::vector<std::string> policies;    // likewise; "all" = every registered one
  std::vector<std::string> budgets;     // sizes, or "N%" of the trace's no-eviction peak
  std::vector<std::string> sets;        // key=value overrides, applied in order
  std::string json_out, csv_out;
  bool json_stdout = false;
  bool quiet = false;
  bool paranoid = false;
  bool fail_on_oom = false;
  bool check_addresses = false;  // exit 4 when a recorded address differs from the model's
  // Single-run exports from the run's event log (RunLog), by exporter name (run_exporters():
  // timeline, memory-map, torch-snapshot, plan) -> output path; each needs exactly one run.
  std::map<std::string, std::string> exports;
  std::string memory_map_colour = "role";     // memory map colours: role | cost
  std::string torch_snapshot_format = "2.x";  // --torch-snapshot layout: 2.x | 1.13
  bool audit = false;                         // run the independent auditor on the event log
  bool audit_every_run = false;               // COOPSIM_AUDIT=1: RunOptions::audit for every run
  [[nodiscard]] bool wants_log() const {
    return audit || std::any_of(exports.begin(), exports.end(), [](const auto& e) { return !e.second.empty(); });
  }
};
int command_run(const RunArgs& args, std::ostream& out);

// `coopsim validate TRACE [--write OUT]`: checks a trace file ("-": trace text on standard input) and
// prints its summary; with --write, writes the checked trace to OUT in trace v1 form through the
// library's writer (gzip when OUT ends in .gz). The Python recorder writes its traces so when the
// native module is not there.
int command_validate(const std::string& trace, const std::string& write_to, std::ostream& out);

// `coopsim advise TRACE --capacity 80GiB` (coopsim/sweep/advise.hpp): the PYTORCH_CUDA_ALLOC_CONF
// settings, and when none fits the policies, ranked at the capacity. Exit 0 when something fits,
// 3 when nothing does.
struct AdviseArgs {
  std::string trace;
  std::string capacity;  // a size, or N% of the trace's peak live bytes
  std::string reserve;   // a size taken off the capacity; empty: advise::kDefaultReserve
  std::string config;    // optional config file (link, engine, limits, policy parameters)
  std::vector<std::string> sets;
  unsigned jobs = 0;  // 0: every core
  bool json = false;
  bool audit_every_run = false;  // COOPSIM_AUDIT=1: RunOptions::audit for every run
};
int command_advise(const AdviseArgs& args, std::ostream& out);

int command_list(bool json, std::ostream& out);

struct GenerateArgs {
  std::string output;
  std::vector<std::string> sets;  // generator option overrides key=value
};
int command_generate(const GenerateArgs& args, std::ostream& out);

struct ImportArgs {
  std::string kind;  // dtr | torch-snapshot | kineto
  std::string input, output;
  int device = 0;
  bool copy_on_write = false;       // dtr: MUTATE as copy-on-write (simrd) instead of in place
  std::string compat = "coopsim";   // dtr: rule profile, coopsim or simrd (docs/import-dtr.md)
  std::string et;                   // kineto: Execution Trace of the same run (dataflow)
  std::vector<std::string> limits;  // KEY=VALUE of the "limits" config section (docs/limits.md)
};
int command_import(const ImportArgs& args, std::ostream& out);

struct SnapshotArgs {
  std::string action;               // stats | segsum | timeline | diff
  std::vector<std::string> inputs;  // one snapshot pickle; diff: two recordings of any imported format
  std::string from, to;             // timeline: the window, durations since the first event
  std::string output;               // timeline: the JSON file (required); diff: the JSON report
  std::string svg;                  // diff: the figure
  bool json = false;                // diff: print the JSON report instead of the text
  int rows = 10;                    // diff: attribution rows shown (text, figure)
};
int command_snapshot(const SnapshotArgs& args, std::ostream& out);

struct BenchArgs {
  std::string trace;
  std::vector<std::string> allocators;  // empty = all
  std::vector<std::string> policies;    // empty = the config default (top_level_docs())
  std::string budget;                   // empty = the config default; or N% of the trace's peak live bytes
  int repeat = 3;
  bool audit_every_run = false;  // COOPSIM_AUDIT=1: RunOptions::audit for every run
};
int command_bench(const BenchArgs& args, std::ostream& out);

struct PlanArgs {
  std::string problem;             // MiniMalloc CSV id,lower,upper,size
  std::string solution;            // with check: the solution CSV to validate
  std::string output;              // solution CSV to write (plan mode)
  std::string method = "planner";  // smartpool-bf | smartpool-ff | greedy-by-size | planner
  std::optional<std::int64_t> capacity;
  double time_limit_s = 10.0;
  bool check = false;
  bool no_bf_quirk = false;         // smartpool-bf: textbook best fit instead of SINGA's
  std::vector<std::string> limits;  // KEY=VALUE: max_buffers, max_conflicts (docs/limits.md)
};
// Exit 0 on success; with check, exit 1 and one line per violation when the solution is invalid.
int command_plan(const PlanArgs& args, std::ostream& out);

// `coopsim replay-gpu PLAN` (docs/cuda-validation.md): replays a plan on a CUDA device. Exit 0,
// or 6 when the integrity check found a wrong tensor (the report names the step). Builds
// without CUDA throw Error saying so.
struct ReplayGpuArgs {
  std::string plan;
  std::string output;          // gpu-report.json
  std::string calibrate_link;  // write the measured link as a config file here
  int iterations = 5;
  int warmup = 1;
  int device = 0;
  int sample_stride = 1;    // check and write every Nth 4-byte word
  bool skip_check = false;  // load the plan without the plan checker
  bool poison = false;      // fill blocks allocated without content with a poison pattern
  bool no_graph = false;    // issue from the host instead of launching a captured CUDA graph
  bool full_check = false;  // no thinning of input checks to fit the ops' durations
};
int command_replay_gpu(const ReplayGpuArgs& args, std::ostream& out);

}  // namespace coopsim
