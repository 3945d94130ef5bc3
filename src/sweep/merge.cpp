// `coopsim merge DIR... -o OUT` (docs/cluster.md): the finished shards of one sweep combined into
// the result files an unsharded run writes. Every directory is checked before OUT is created:
// same coopsim version and sweep hash, the same shard count, each shard once, none missing, and
// each one complete.
#include <fmt/format.h>

#include <ostream>

#include "coopsim/base/error.hpp"
#include "coopsim/sweep/sweep.hpp"

namespace coopsim {

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

  Finished all;
  for (const Input& in : inputs) {
    const Finished f = read_finished(in.dir, in.manifest);
    const std::size_t runs = shard_size(in.manifest.runs, in.shard);
    const std::size_t searches = shard_size(in.manifest.searches, in.shard);
    const bool complete = !fs::exists(fs::path(in.dir) / kJournal) && fs::exists(fs::path(in.dir) / "results.json") &&
                          f.rows.size() == runs && f.entries.size() == runs && f.search_rows.size() == searches;
    if (!complete) {
      throw Error(in.dir + fmt::format(": shard {}/{} is unfinished ({} of {} runs, {} of {} searches): finish it "
                                       "with coopsim sweep CONFIG --shard {}/{} --resume -o {}",
                                       in.shard.index, count, f.rows.size(), runs, f.search_rows.size(), searches,
                                       in.shard.index, count, in.dir));
    }
    auto check = [&](std::size_t i, const char* what) {
      if (!in_shard(i, in.shard)) {
        throw Error(in.dir + fmt::format(": {} {} does not belong to shard {}/{}", what, i, in.shard.index, count));
      }
    };
    for (const auto& [i, row] : f.rows) {
      check(i, "run");
      if (!f.entries.contains(i))
        throw Error(in.dir + fmt::format(": run {} is in results.csv but not in results.json", i));
      all.rows.emplace(i, row);
      all.entries.emplace(i, f.entries.at(i));
    }
    for (const auto& [i, row] : f.search_rows) {
      check(i, "search");
      all.search_rows.emplace(i, row);
    }
  }

  const fs::path dir(args.output);
  make_output_dir(dir);
  const DirLock lock(dir);
  check_sweep_files(dir);
  if (fs::exists(dir / "sweep.json") || fs::exists(dir / "results.csv")) {
    throw Error(args.output + ": holds a sweep's output: choose another -o");
  }
  Manifest merged = first.manifest;
  merged.shard.reset();
  write_results(dir, merged, all);
  out << fmt::format("merged {} shards: {} runs, {} minimum-budget searches -> {}\n", count, all.rows.size(),
                     all.search_rows.size(), args.output);
  return 0;
}

}  // namespace coopsim
