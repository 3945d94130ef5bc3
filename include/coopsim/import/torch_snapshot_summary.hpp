// What PyTorch's snapshot viewer prints about a memory snapshot, for snapshots of any size: the
// history streams past (coopsim/formats/pickle_stream.hpp) and only the end-state segments and
// per-action counts are kept. `coopsim snapshot stats|segsum FILE` prints these.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "coopsim/base/limits.hpp"

namespace coopsim::torch_snapshot {

// The text `python -m torch.cuda._memory_viz stats FILE` (and segsum()) prints for the snapshot:
// torch 2.x's torch/cuda/_memory_viz.py segsum(), one line per segment of at least 20 MiB
// drawn in 20 MiB pages, then the totals and the legend. A torch 1.13 snapshot (a list of
// segments) is read as {"segments": list}, as the viewer reads it. Throws Error("<path>: ...").
std::string segsum_text(const std::string& path, const Limits& limits = {});

// The figures of torch 1.13's _memory_viz stats() (segments, total_size and the bytes of each
// block state) and of the history: entries per device and per action.
struct SnapshotStats {
  std::uint64_t segments = 0, total_size = 0;
  std::map<std::string, std::uint64_t> block_states;  // state -> bytes
  std::map<std::string, std::uint64_t> actions;       // entries per action, all devices
  std::uint64_t entries = 0, devices = 0;
};
SnapshotStats snapshot_stats(const std::string& path, const Limits& limits = {});
// The stats as lines of text (sizes as the viewer formats them, then the exact bytes).
std::string stats_text(const SnapshotStats& s);

}  // namespace coopsim::torch_snapshot
