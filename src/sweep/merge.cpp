// `coopsim merge DIR... -o OUT` (docs/cluster.md): the finished shards of one sweep combined into
// the result files an unsharded run writes. Every directory is checked before OUT is created:
// same coopsim version and sweep hash, the same shard count, each shard once, none missing, and
// each one complete. Streamed (issue 32): memory holds one row or entry per shard, never a
// shard's files, so it does not grow with the sweep.
#include <fmt/format.h>
#include <sys/resource.h>

#include <optional>
#include <ostream>
#include <vector>

#include "coopsim/base/error.hpp"
#include "coopsim/base/output_file.hpp"
#include "coopsim/sweep/sweep.hpp"
#include "result_stream.hpp"

namespace coopsim {
namespace {

// Pass 2 holds one file of every shard open at once: raise the soft limit on open files up to the
// hard one when `shards` need more (a 2,000-task job array under the usual 1,024).
void allow_open_files(std::size_t shards) {
  const rlim_t need = static_cast<rlim_t>(shards) + 64;  // the outputs, the lock, the standard streams
  struct rlimit lim {};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= need) return;
  const rlim_t soft = lim.rlim_cur, hard = lim.rlim_max;
  if (hard != RLIM_INFINITY && hard < need) {
    throw Error(fmt::format("merge: {} shards need {} open files at once, but the limit is {} (ulimit -Hn)", shards,
                            need, hard));
  }
  lim.rlim_cur = need;
  if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) {
    throw Error(fmt::format("merge: {} shards need {} open files at once, but the limit is {} (ulimit -n)", shards,
                            need, soft));
  }
}

}  // namespace

int command_merge(const MergeArgs& args, std::ostream& out) {
  namespace fs = std::filesystem;
  using namespace sweep;
  if (args.dirs.empty()) throw ConfigError("merge", "no shard directories given");
  struct Input {
    std::string dir;
    Manifest manifest;
    Shard shard;
  };
  std::vector<Input> inputs;
  for (const auto& d : args.dirs) {
    const Manifest m = read_manifest(d);
    inputs.push_back({d, m, m.shard.value_or(Shard{})});
  }
  const Input& first = inputs.front();
  const std::uint32_t count = first.shard.count;
  std::vector<const Input*> by_index(count + 1, nullptr);
  for (const Input& in : inputs) {
    const std::string where = (fs::path(in.dir) / "sweep.json").string();
    if (in.manifest.coopsim_version != first.manifest.coopsim_version) {
      throw Error(where + ": written by coopsim " + in.manifest.coopsim_version + ", " + first.dir + " by " +
                  first.manifest.coopsim_version + ": shards must come from one build");
    }
    if (in.manifest.config_hash != first.manifest.config_hash) {
      throw Error(where + fmt::format(": sweep hash {:016x} differs from {:016x} in {}: shards of different sweeps "
                                      "(config or traces changed)",
                                      in.manifest.config_hash, first.manifest.config_hash, first.dir));
    }
    if (in.shard.count != count) {
      throw Error(where + fmt::format(": holds shard {}/{}, but {} holds shard {}/{}: shard counts differ",
                                      in.shard.index, in.shard.count, first.dir, first.shard.index, count));
    }
    if (by_index[in.shard.index] != nullptr) {
      throw Error(where + fmt::format(": shard {}/{} given twice (also {})", in.shard.index, count,
                                      by_index[in.shard.index]->dir));
    }
    by_index[in.shard.index] = &in;
  }
  for (std::uint32_t k = 1; k <= count; ++k) {
    if (by_index[k] == nullptr) throw Error(fmt::format("merge: shard {}/{} is missing", k, count));
  }

  // Pass 1: every shard checked, each file read as a stream (result_stream.hpp), before OUT is
  // created. read_finished's checks of each row and entry, then merge's: the shard complete,
  // every row and search of it, in order, and an entry for each row.
  struct Scanned {
    EntryScan entries;
    std::size_t runs = 0, searches = 0;  // of the shard
  };
  std::vector<Scanned> scanned(count + 1);
  for (const Input& in : inputs) {
    const fs::path d(in.dir);
    Scanned& s = scanned[in.shard.index];
    s.runs = shard_size(in.manifest.runs, in.shard);
    s.searches = shard_size(in.manifest.searches, in.shard);
    const RowScan rows = scan_rows(d / "results.csv", results_csv_header(), in.manifest.runs, "run", in.shard);
    const RowScan search_rows =
        scan_rows(d / "minbudget.csv", minbudget_csv_header(), in.manifest.searches, "search", in.shard);
    const bool json = fs::exists(d / "results.json");
    if (json) s.entries = scan_entries(d / "results.json", in.manifest.runs, in.shard, s.runs);
    const bool complete = !fs::exists(d / kJournal) && json && rows.count == s.runs && s.entries.count == s.runs &&
                          search_rows.count == s.searches;
    if (!complete) {
      throw Error(in.dir + fmt::format(": shard {}/{} is unfinished ({} of {} runs, {} of {} searches): finish it "
                                       "with coopsim sweep CONFIG --shard {}/{} --resume -o {}",
                                       in.shard.index, count, rows.count, s.runs, search_rows.count, s.searches,
                                       in.shard.index, count, in.dir));
    }
    auto outside = [&](std::size_t i, const char* what) {
      throw Error(in.dir + fmt::format(": {} {} does not belong to shard {}/{}", what, i, in.shard.index, count));
    };
    // A finished shard's files are sorted (write_results): merge reads them side by side.
    auto disorder = [&](const std::string& where) {
      throw Error(where + fmt::format(": merge reads each shard's files in index order; coopsim sweep CONFIG "
                                      "--shard {}/{} --resume -o {} rewrites them so",
                                      in.shard.index, count, in.dir));
    };
    if (rows.outside) outside(*rows.outside, "run");
    if (!s.entries.disorder.empty()) disorder(s.entries.disorder);
    if (s.entries.missing) {
      throw Error(in.dir + fmt::format(": run {} is in results.csv but not in results.json", *s.entries.missing));
    }
    if (search_rows.outside) outside(*search_rows.outside, "search");
    if (!rows.disorder.empty()) disorder(rows.disorder);
    if (!search_rows.disorder.empty()) disorder(search_rows.disorder);
  }

  allow_open_files(count);  // pass 2 reads all shards at once
  const fs::path dir(args.output);
  make_output_dir(dir);
  const DirLock lock(dir);
  check_sweep_files(dir);
  if (fs::exists(dir / "sweep.json") || fs::exists(dir / "results.csv")) {
    throw Error(args.output + ": holds a sweep's output: choose another -o");
  }
  Manifest merged = first.manifest;
  merged.shard.reset();

  // Pass 2: run (search) i is the next row of shard i mod N + 1, so each output file is the
  // shards' files read side by side, one row or entry of each at a time. All three are written
  // to temporary files, then committed in write_results' order: a failure leaves none of them.
  auto shard_of = [&](std::size_t i) { return i % count + 1; };
  BufferedOutput csv(dir / "results.csv");
  csv.write(results_csv_header() + "\n");
  {
    std::vector<std::optional<RowReader>> readers(count + 1);
    for (std::uint32_t k = 1; k <= count; ++k) {
      if (scanned[k].runs > 0) readers[k].emplace(fs::path(by_index[k]->dir) / "results.csv", "run");
    }
    for (std::size_t i = 0; i < merged.runs; ++i) {
      csv.write(readers[shard_of(i)]->next(i));
      csv.write("\n");
    }
  }
  std::optional<BufferedOutput> mb;
  if (merged.searches > 0) {
    mb.emplace(dir / "minbudget.csv");
    mb->write(minbudget_csv_header() + "\n");
    std::vector<std::optional<RowReader>> readers(count + 1);
    for (std::uint32_t k = 1; k <= count; ++k) {
      if (scanned[k].searches > 0) readers[k].emplace(fs::path(by_index[k]->dir) / "minbudget.csv", "search");
    }
    for (std::size_t i = 0; i < merged.searches; ++i) {
      mb->write(readers[shard_of(i)]->next(i));
      mb->write("\n");
    }
  }
  ResultsJsonWriter json(dir / "results.json", merged);
  {
    std::vector<std::optional<EntryReader>> readers(count + 1);
    for (std::uint32_t k = 1; k <= count; ++k) {
      if (scanned[k].runs > 0)
        readers[k].emplace(fs::path(by_index[k]->dir) / "results.json", scanned[k].entries.runs_at);
    }
    for (std::size_t i = 0; i < merged.runs; ++i) json.add(readers[shard_of(i)]->next(i));
  }
  json.finish();
  csv.commit();
  if (mb) mb->commit();
  json.commit();
  write_file_atomic((dir / "sweep.json").string(), manifest_json(merged).dump(2) + "\n", OutputFile::Target::Owned);
  std::error_code ec;
  fs::remove(dir / kJournal, ec);
  out << fmt::format("merged {} shards: {} runs, {} minimum-budget searches -> {}\n", count, merged.runs,
                     merged.searches, args.output);
  return 0;
}

}  // namespace coopsim
