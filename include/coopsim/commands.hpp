// The CLI's commands as library functions: main.cpp parses arguments into these structs and
// calls them. Each returns the process exit status and throws coopsim::Error on bad input.
// Output files are written to a temporary name and renamed, so a failed command leaves none.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace coopsim {

struct RunArgs {
  std::string trace;
  std::string config;                  // optional config file
  std::vector<std::string> allocators; // each runs (cartesian product policy x allocator x budget)
  std::vector<std::string> policies;   // likewise; "all" = every registered one
  std::vector<std::string> budgets;    // sizes, or "N%" of the trace's no-eviction peak
  std::vector<std::string> sets;       // key=value overrides, applied in order
  std::string json_out, csv_out;
  bool json_stdout = false;
  bool quiet = false;
  bool paranoid = false;
  bool fail_on_oom = false;
  bool check_addresses = false;        // exit 4 when a recorded address differs from the model's
};
int command_run(const RunArgs& args, std::ostream& out);

int command_validate(const std::string& trace, std::ostream& out);

int command_list(bool json, std::ostream& out);

struct GenerateArgs {
  std::string output;
  std::vector<std::string> sets;       // generator option overrides key=value
};
int command_generate(const GenerateArgs& args, std::ostream& out);

struct ImportArgs {
  std::string kind;    // dtr | torch-snapshot | kineto
  std::string input, output;
  int device = 0;
  bool copy_on_write = false;  // dtr: MUTATE as copy-on-write (simrd) instead of in place
};
int command_import(const ImportArgs& args, std::ostream& out);

struct BenchArgs {
  std::string trace;
  std::vector<std::string> allocators;  // empty = all
  std::string budget = "80GiB";
  int repeat = 3;
};
int command_bench(const BenchArgs& args, std::ostream& out);

struct PlanArgs {
  std::string problem;                  // MiniMalloc CSV id,lower,upper,size
  std::string solution;                 // with check: the solution CSV to validate
  std::string output;                   // solution CSV to write (plan mode)
  std::string method = "planner";      // smartpool-bf | smartpool-ff | greedy-by-size | planner
  std::optional<std::int64_t> capacity;
  double time_limit_s = 10.0;
  bool check = false;
  bool no_bf_quirk = false;             // smartpool-bf: textbook best fit instead of SINGA's
};
// Exit 0 on success; with check, exit 1 and one line per violation when the solution is invalid.
int command_plan(const PlanArgs& args, std::ostream& out);

// Write `content` to `path` atomically (temporary file + rename).
void write_file_atomic(const std::string& path, const std::string& content);

}  // namespace coopsim
