// `coopsim sweep` (docs/sweep.md): checks the config and loads every trace once, then runs the
// shard's unfinished runs and minimum-budget searches on N threads. Each result is appended
// (and flushed) to DIR as it finishes, so an interrupted sweep keeps it; at the end the files
// are rewritten sorted by index, so the output does not depend on N, on resuming or on timing.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>
#include <string_view>
#include <thread>

#include "coopsim/base/error.hpp"
#include "coopsim/base/limits.hpp"
#include "coopsim/model/memory_cap.hpp"
#include "coopsim/base/output_file.hpp"
#include "coopsim/engine/report_builder.hpp"
#include "coopsim/sweep/sweep.hpp"
#include "coopsim/formats/trace_file.hpp"
#include "coopsim_config.h"
#include "resume.hpp"

namespace coopsim {
namespace {

namespace fs = std::filesystem;
using namespace sweep;
using Clock = std::chrono::steady_clock;

// stderr progress: a redrawn bar with ETA on a terminal, else one line per finished task.
class Progress {
 public:
  Progress(std::size_t total, std::size_t done) : total_(total), done_(done), tty_(isatty(STDERR_FILENO) != 0) {}

  void finished(const std::string& what) {
    ++done_;
    ++fresh_;
    if (!tty_) {
      std::cerr << fmt::format("sweep: {}/{} {}\n", done_, total_, what) << std::flush;
      return;
    }
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    const auto eta =
        static_cast<long long>(elapsed / static_cast<double>(fresh_) * static_cast<double>(total_ - done_));
    constexpr std::size_t kWidth = 30;
    const std::size_t filled = total_ == 0 ? kWidth : done_ * kWidth / total_;
    std::cerr << fmt::format("\rsweep [{}{}] {}/{}  ETA {}m{:02}s ", std::string(filled, '#'),
                             std::string(kWidth - filled, '.'), done_, total_, eta / 60, eta % 60)
              << std::flush;
    drawn_ = true;
  }
  void close() {
    if (drawn_) std::cerr << "\n" << std::flush;
    drawn_ = false;
  }

 private:
  std::size_t total_, done_, fresh_ = 0;
  bool tty_, drawn_ = false;
  Clock::time_point start_ = Clock::now();
};

std::string budget_text(const GridRun& r) {
  return r.ratio ? fmt::format("{} ({})", *r.ratio, format_bytes(r.budget)) : format_bytes(r.budget);
}

struct Task {
  bool search = false;
  std::size_t index = 0;
};

}  // namespace

int command_sweep(const SweepArgs& args, std::ostream& out) {
  std::optional<Shard> shard;  // a bad --shard is a usage error (exit 2), found before any file is read
  if (!args.shard.empty()) shard = parse_shard(args.shard);
  const SweepConfig cfg = load_sweep_config(args.config);
  const Shard slice = shard.value_or(Shard{});
  std::vector<Trace> traces;
  // The sweep holds all its traces at once: they share one limits.max_memory, each loaded
  // within what the ones before it left.
  const std::uint64_t budget = cfg.limits.max_memory;
  std::uint64_t held = 0;
  for (std::size_t i = 0; i < cfg.traces.size(); ++i) {
    Limits limits = cfg.limits;
    if (held >= budget) {
      throw Error(fmt::format("{}: the sweep's traces before it hold {} bytes: {}", resolve_trace_path(cfg, i), held,
                              MemoryCap(budget).problem()));
    }
    limits.max_memory = budget - held;
    try {
      traces.push_back(load_trace(resolve_trace_path(cfg, i), limits));
    } catch (const Error& e) {
      const std::string_view what = e.what();
      if (held == 0 || !what.ends_with("(limits.max_memory)")) throw;
      throw Error(fmt::format("{}; the sweep's traces share it: those before this one hold {} of its {} bytes", what,
                              held, budget));
    }
    held += std::min(memory_cost::trace(traces.back()), budget - held);
    traces.back().path = cfg.traces[i];  // reports name the trace as the config does, wherever it runs
  }
  const SweepGrid grid = make_grid(cfg, traces);
  const Manifest manifest{COOPSIM_VERSION, grid.hash, grid.runs.size(), grid.searches.size(), shard};

  const fs::path dir(args.output);
  std::vector<NamedPath> outputs, inputs{{"the sweep config", args.config}};
  for (const char* name : kSweepFiles) {
    outputs.push_back({"the sweep output", (dir / name).string()});
  }
  for (std::size_t i = 0; i < cfg.traces.size(); ++i) inputs.push_back({"the trace", resolve_trace_path(cfg, i)});
  check_output_paths(outputs, inputs);
  make_output_dir(dir);
  const DirLock lock(dir);  // before looking at what DIR holds: another sweep may be writing it
  check_sweep_files(dir);   // a link planted at one of their names is refused, never followed
  const bool earlier = fs::exists(dir / "sweep.json") || fs::exists(dir / "results.csv");
  if (earlier && !args.resume) {
    throw Error(args.output + ": holds a sweep's output: pass --resume to continue it, or choose another -o");
  }
  Finished done;
  if (earlier) {
    const Manifest old = read_manifest(dir);
    done = read_finished(dir, old);
    check_earlier(dir, old, manifest, cfg, grid, traces, done);
    // A run counts as finished when both its CSV row and its JSON entry were written.
    std::erase_if(done.rows, [&](const auto& kv) { return !done.entries.contains(kv.first); });
    std::erase_if(done.entries, [&](const auto& kv) { return !done.rows.contains(kv.first); });
  }
  std::vector<Task> tasks;  // searches first: they are the long ones
  for (const auto& s : grid.searches) {
    if (in_shard(s.index, slice) && !done.search_rows.contains(s.index)) tasks.push_back({true, s.index});
  }
  for (const auto& r : grid.runs) {
    if (in_shard(r.index, slice) && !done.rows.contains(r.index)) tasks.push_back({false, r.index});
  }
  const std::size_t resumed_runs = done.rows.size(), resumed = resumed_runs + done.search_rows.size();

  // Start the directory from what is kept: the manifest, then each file rewritten without cut
  // lines, published under its final name and kept open: results are appended as they finish.
  write_file_atomic((dir / "sweep.json").string(), manifest_json(manifest).dump(2) + "\n", OutputFile::Target::Owned);
  std::string csv = results_csv_header() + "\n", journal, mb = minbudget_csv_header() + "\n";
  for (const auto& [i, row] : done.rows) csv += row + "\n";
  for (const auto& [i, e] : done.entries) journal += e.dump() + "\n";
  for (const auto& [i, row] : done.search_rows) mb += row + "\n";
  auto start_file = [&](const char* name, const std::string& text) {
    OutputFile f((dir / name).string(), OutputFile::Target::Owned);
    f.write(text);
    f.publish();
    return f;
  };
  OutputFile csv_out = start_file("results.csv", csv);
  OutputFile journal_out = start_file(kJournal, journal);
  std::optional<OutputFile> mb_out;
  if (!grid.searches.empty()) mb_out.emplace(start_file("minbudget.csv", mb));

  Progress progress(shard_size(grid.runs.size(), slice) + shard_size(grid.searches.size(), slice), resumed);
  std::mutex mu;
  std::atomic<std::size_t> next{0};
  std::atomic<bool> halt{false};
  std::size_t recorded = 0;
  std::exception_ptr failure;
  auto count_recorded = [&] {  // called with `mu` held, right after a result was written
    if (args.stop_after > 0 && ++recorded == args.stop_after) halt = true;
  };
  auto work = [&] {
    while (!halt) {
      const std::size_t t = next++;
      if (t >= tasks.size()) return;
      try {
        const Task task = tasks[t];
        if (task.search) {
          const GridSearch& s = grid.searches[task.index];
          MinBudgetOptions search;
          search.max_overhead = cfg.minbudget.max_overhead;
          search.audit = args.audit_every_run;
          const MinBudgetResult res = find_min_budget(
              check_config(run_config(cfg, s.variant, s.allocator, s.policy, std::nullopt)), traces[s.trace], search);
          const std::string row = minbudget_csv_row(cfg, s, res);
          const std::lock_guard lock(mu);
          if (halt) return;
          mb_out->write(row + "\n");
          done.search_rows.emplace(s.index, row);
          progress.finished(fmt::format("minbudget {} {} {} {}: {}", cfg.traces[s.trace], s.allocator, s.policy,
                                        cfg.variants[s.variant].name, res.found ? format_bytes(res.budget) : "none"));
          count_recorded();
        } else {
          const GridRun& r = grid.runs[task.index];
          RunOptions options;
          options.audit = args.audit_every_run;
          Report rep = run_simulation(run_config(cfg, r.variant, r.allocator, r.policy, r.budget), traces[r.trace],
                                      builtin_components(), options);
          ReportBuilder::place_in_sweep(rep, r.sweep_largest_budget);
          const std::string row = results_csv_row(cfg, r, rep);
          auto entry = results_json_entry(cfg, r, rep);
          const std::string line = entry.dump();
          const std::lock_guard lock(mu);
          if (halt) return;
          csv_out.write(row + "\n");
          journal_out.write(line + "\n");
          done.rows.emplace(r.index, row);
          done.entries.emplace(r.index, std::move(entry));
          progress.finished(fmt::format("run {} {} {} {} {} {}: {}", r.index, cfg.traces[r.trace], r.allocator,
                                        r.policy, cfg.variants[r.variant].name, budget_text(r), to_string(rep.status)));
          count_recorded();
        }
      } catch (...) {
        const std::lock_guard lock(mu);
        if (!failure) failure = std::current_exception();
        halt = true;
      }
    }
  };
  unsigned jobs = args.jobs > 0 ? args.jobs : std::max(1U, std::thread::hardware_concurrency());
  jobs = static_cast<unsigned>(std::min<std::size_t>(jobs, std::max<std::size_t>(1, tasks.size())));
  std::vector<std::thread> pool;
  for (unsigned i = 0; i < jobs; ++i) pool.emplace_back(work);
  for (auto& th : pool) th.join();
  progress.close();
  if (failure) std::rethrow_exception(failure);
  csv_out.commit();
  journal_out.commit();
  if (mb_out) mb_out->commit();
  if (halt) {
    std::cerr << fmt::format("coopsim: sweep: stopped after {} results (--stop-after); --resume continues\n", recorded);
    return 0;
  }

  write_results(dir, manifest, done);
  std::map<std::string, std::size_t> statuses;
  for (const auto& [i, row] : done.rows) ++statuses[split_csv_line(row)[9]];
  std::string counts;
  for (const auto& [s, n] : statuses) counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", s, n);
  out << fmt::format("sweep: {} runs ({} from earlier output){}{}: {}\n", done.rows.size(), resumed_runs,
                     grid.searches.empty() ? "" : fmt::format(", {} minimum-budget searches", done.search_rows.size()),
                     shard ? fmt::format(" in shard {}/{}", slice.index, slice.count) : "",
                     counts.empty() ? "none" : counts);
  out << fmt::format("wrote {}: results.csv, results.json{}, sweep.json\n", args.output,
                     grid.searches.empty() ? "" : ", minbudget.csv");
  return 0;
}

}  // namespace coopsim
