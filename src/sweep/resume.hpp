// `sweep --resume` (docs/sweep.md): what an output directory already holds must come from this
// very sweep (and shard), and every kept result must be the run or search its index names in
// this sweep's grid. Private to src/sweep.
#pragma once

#include <filesystem>
#include <vector>

#include "coopsim/model/trace.hpp"
#include "coopsim/sweep/sweep.hpp"

namespace coopsim::sweep {

// Error unless `old` (DIR/sweep.json) matches `now` (version, config hash, shard) and each row of
// results.csv and minbudget.csv and each results.json entry or journal line names what this
// sweep's run (search) of that index is: trace (path and content hash), allocator, policy,
// variant, budget (bytes and ratio). A mismatch names the file and line of the entry and the
// first field that differs: "DIR/journal.jsonl:3: run 5 is not this sweep's run 5 (allocator:
// 'pytorch' here, 'bestfit' in the sweep)".
void check_earlier(const std::filesystem::path& dir, const Manifest& old, const Manifest& now, const SweepConfig& cfg,
                   const SweepGrid& grid, const std::vector<Trace>& traces, const Finished& f);

}  // namespace coopsim::sweep
