// Sweeps (docs/sweep.md): a JSON config naming traces x allocators x policies x budgets x named
// parameter variants, planned into one deterministic run list; shards of that list for batch
// systems; the result files (results.csv, results.json, minbudget.csv, the sweep.json manifest)
// shared by `coopsim sweep`, `--resume` and `coopsim merge`; and the minimum-budget search.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "coopsim/base/limits.hpp"
#include "coopsim/model/report.hpp"
#include "coopsim/sim/simulation.hpp"
#include "coopsim/model/trace.hpp"
#include "coopsim/base/units.hpp"

namespace coopsim::sweep {

// ---- configuration -------------------------------------------------------------------------

// One budget: a size, or a ratio of each trace's no-eviction peak of live bytes.
struct BudgetSpec {
  Bytes size;  // used when ratio is empty
  std::optional<double> ratio;
};

// A named set of config overrides, applied to the base config like `--set key=value`.
struct Variant {
  std::string name;
  std::vector<std::string> sets;        // "key=value" in file order
  std::vector<std::string> allocators;  // empty: every allocator of the sweep
  std::vector<std::string> policies;    // empty: every policy of the sweep
  SimConfig config;                     // base with the sets applied (no allocator/policy/budget)
};

struct MinBudgetSpec {
  bool enabled = false;
  std::optional<double> max_overhead;
};

struct SweepConfig {
  std::string source;               // the config file as named (prefixes error keys)
  std::filesystem::path dir;        // trace paths are relative to it
  std::string canonical;            // compact dump of the document (part of the sweep hash)
  std::vector<std::string> traces;  // as written in the file
  std::vector<std::string> allocators, policies;
  std::vector<BudgetSpec> budgets;
  std::vector<Variant> variants;  // at least one ("base" when the file names none)
  MinBudgetSpec minbudget;
  Limits limits;  // base.limits: what loading the traces may take
};

// Parses and checks every key (names, sizes, ratios, override keys and values) before anything
// runs. Errors: "file:line: invalid JSON: ..." (InputError) or "file: key: problem" (ConfigError).
SweepConfig load_sweep_config(const std::string& path);
SweepConfig parse_sweep_config(const std::string& text, const std::string& source);

// The trace's path as the loader needs it (relative paths are relative to the config's folder).
std::string resolve_trace_path(const SweepConfig& cfg, std::size_t trace);

// ---- grid -----------------------------------------------------------------------------------

struct GridRun {
  std::size_t index = 0;  // position in the full run list (the "run" column)
  std::size_t trace = 0, variant = 0;
  std::string allocator, policy;
  Bytes budget;
  std::optional<double> ratio;  // the configured ratio, for ratio budgets
  Bytes sweep_largest_budget;   // the largest budget of its trace (ReportBuilder::place_in_sweep)
};

struct GridSearch {  // one minimum-budget search (the "search" column)
  std::size_t index = 0;
  std::size_t trace = 0, variant = 0;
  std::string allocator, policy;
};

struct SweepGrid {
  std::vector<GridRun> runs;         // trace, allocator, policy, variant, budget order
  std::vector<GridSearch> searches;  // trace, allocator, policy, variant order
  std::uint64_t hash = 0;               // FNV-1a 64 of the document, trace hashes and version
};

// `traces` are the loaded files, in cfg.traces order. Resolves ratio budgets against each
// trace's peak live bytes; ConfigError when one resolves to 0 bytes or a trace starts from a
// recorded allocator state that a listed allocator cannot install.
SweepGrid make_grid(const SweepConfig& cfg, const std::vector<Trace>& traces);

// The run config of one combination; no budget set when `budget` is empty (minimum search).
SimConfig run_config(const SweepConfig& cfg, std::size_t variant, const std::string& allocator,
                     const std::string& policy, std::optional<Bytes> budget);

// ---- shards ---------------------------------------------------------------------------------

struct Shard {
  std::uint32_t index = 1;  // 1-based K of K/N
  std::uint32_t count = 1;  // N
};
// "K/N" with 1 <= K <= N; UsageError("--shard", ...) otherwise (exit status 2 from the CLI).
Shard parse_shard(const std::string& text);
// Run (or search) i belongs to shard K/N when i mod N == K-1.
inline bool in_shard(std::size_t i, Shard s) { return i % s.count == s.index - 1U; }
std::size_t shard_size(std::size_t total, Shard s);

// ---- result files ---------------------------------------------------------------------------

// DIR/sweep.json: what a directory holds, checked by --resume and merge.
struct Manifest {
  std::string coopsim_version;
  std::uint64_t config_hash = 0;
  std::size_t runs = 0, searches = 0;  // of the whole sweep
  std::optional<Shard> shard;          // absent: the whole sweep
};
nlohmann::ordered_json manifest_json(const Manifest& m);
Manifest read_manifest(const std::filesystem::path& dir);  // Error naming DIR/sweep.json

// results.csv: "run,variant,budget_ratio" followed by the report's CSV columns.
std::string results_csv_header();
std::string results_csv_row(const SweepConfig& cfg, const GridRun& run, const Report& r);
// One entry of results.json's "runs": {"run", "variant", "budget_ratio", "report"}.
nlohmann::ordered_json results_json_entry(const SweepConfig& cfg, const GridRun& run, const Report& r);

// Finished work of a directory, keyed by run / search index. Rows are kept as written.
struct Finished {
  std::map<std::size_t, std::string> rows;                // results.csv
  std::map<std::size_t, nlohmann::ordered_json> entries;  // results.json / journal
  std::map<std::size_t, std::string> search_rows;         // minbudget.csv
  // Where each was read, for messages: "DIR/results.csv:5", "DIR/journal.jsonl:3",
  // "DIR/results.json: runs[2]".
  std::map<std::size_t, std::string> row_at, entry_at, search_row_at;
};
inline constexpr const char* kJournal = "journal.jsonl";  // results.json entries of an unfinished sweep
// Every file a sweep or merge writes in its directory (the lock apart).
inline constexpr const char* kSweepFiles[] = {"sweep.json", "results.csv", "results.json", kJournal, "minbudget.csv"};

// Reads results.csv, results.json or the journal, and minbudget.csv of DIR, whichever exist.
// A last line without its newline (an interrupted write) is dropped; anything else malformed
// (a key given twice in a JSON object, an index listed twice in one file) is an Error
// "file:line: problem". Only indices below the manifest's counts are accepted.
Finished read_finished(const std::filesystem::path& dir, const Manifest& m);
// Writes results.csv, results.json (and minbudget.csv when the sweep has searches) sorted by
// index, each atomically, then sweep.json, and removes the journal.
void write_results(const std::filesystem::path& dir, const Manifest& m, const Finished& f);

// Refuses (Error "DIR/NAME: cannot write output file: it is a symbolic link: ...") a file of
// kSweepFiles in DIR that is there but is not a regular file: a sweep directory's files are
// coopsim's own, written as OutputFile::Target::Owned, and a link planted at one of those names is
// never followed. Called with DIR locked, before anything in DIR is read.
void check_sweep_files(const std::filesystem::path& dir);

// Creates DIR (and its parents); Error "DIR: cannot create the output directory (why)".
void make_output_dir(const std::filesystem::path& dir);

// An exclusive flock(2) on DIR/.coopsim.lock for the object's lifetime, taken by `sweep` and
// `merge` before they look at DIR, so two of them never write one directory. A second one gets
// Error "DIR: another sweep is writing here (lock DIR/.coopsim.lock held by pid N)". The kernel
// drops the lock when its holder exits, so a crashed sweep leaves no stale lock; the file itself
// stays (removing it would let a third process lock a new file while a second holds the old).
class DirLock {
 public:
  explicit DirLock(const std::filesystem::path& dir);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_ = -1;
};
inline constexpr const char* kLockFile = ".coopsim.lock";

// Fields of one CSV line (RFC 4180 quoting).
std::vector<std::string> split_csv_line(const std::string& line);

// ---- minimum budget ---------------------------------------------------------------------------

struct MinBudgetOptions {
  std::optional<double> max_overhead;  // compute overhead limit (>= 1)
  double margin = 1.25;                // first upper bound = peak live bytes x margin
  bool audit = false;               // RunOptions::audit for every probe
  Bytes fails_at;                      // a budget seen to fail (0: none): the search looks above it
};

struct MinBudgetResult {
  bool found = false;
  Bytes peak;                                               // the trace's no-eviction peak of live bytes
  Bytes unit;                                               // precision: max(1 MiB, 0.1 % of the peak) in whole MiB
  Bytes budget;                                             // the smallest multiple of unit that passed
  Bytes failing;                                            // the largest multiple of unit seen failing (0: none tried)
  std::string failing_status;                               // "oom", "thrash" or "overhead" (over --max-overhead)
  Bytes searched_up_to;                                     // the largest budget tried
  double compute_overhead = 0.0, recompute_overhead = 0.0;  // at `budget`
  std::uint32_t runs = 0;
};

// Bisection over multiples of `unit` between 0 (or the largest multiple not above `fails_at`),
// taken to fail, and an upper bound that passes (peak x margin, at least one unit above the
// lower bound, doubled until a run passes, at most 24 times). Assumes that a budget above one
// that passes also passes; the bracket (failing, budget) is what was observed.
MinBudgetResult find_min_budget(const CheckedConfig& cfg, const Trace& trace, const MinBudgetOptions& o);

std::string minbudget_csv_header();
std::string minbudget_csv_row(const SweepConfig& cfg, const GridSearch& s, const MinBudgetResult& r);

}  // namespace coopsim::sweep

namespace coopsim {

// The sweep commands (the CLI calls them; coopsim/cli/commands.hpp holds the others).
// `coopsim sweep` (docs/sweep.md): every run of a sweep config, in parallel, into DIR.
struct SweepArgs {
  std::string config;
  unsigned jobs = 0;  // 0: std::thread::hardware_concurrency()
  std::string output = "sweep-out";
  bool resume = false;         // skip the runs DIR already holds
  std::string shard;           // "K/N": only runs with index mod N == K-1
  std::size_t stop_after = 0;  // test hook: stop after this many results, as a kill would
  bool audit_every_run = false;  // COOPSIM_AUDIT=1: RunOptions::audit for every run
};
int command_sweep(const SweepArgs& args, std::ostream& out);

// `coopsim merge DIR... -o OUT`: the shards of one sweep into the unsharded result files.
struct MergeArgs {
  std::vector<std::string> dirs;
  std::string output;
};
int command_merge(const MergeArgs& args, std::ostream& out);

// `coopsim minbudget TRACE`: the smallest budget that completes (exit 3 when none does).
struct MinBudgetArgs {
  std::string trace;
  std::string config;
  std::string policy, allocator;       // empty: the config's (or the defaults)
  std::optional<double> max_overhead;  // also require compute overhead <= this
  std::vector<std::string> sets;
  bool json = false;
  bool audit_every_run = false;  // COOPSIM_AUDIT=1: RunOptions::audit for every probe
};
int command_minbudget(const MinBudgetArgs& args, std::ostream& out);

}  // namespace coopsim
