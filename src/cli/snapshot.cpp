// `coopsim snapshot stats|segsum FILE`: what PyTorch's snapshot viewer prints about a memory
// snapshot (torch.cuda._memory_viz), for snapshots of any size: the history streams past
// (coopsim/import/torch_snapshot_summary.hpp).
#include <ostream>

#include "coopsim/base/error.hpp"
#include "coopsim/cli/commands.hpp"
#include "coopsim/import/torch_snapshot_summary.hpp"

namespace coopsim {

int command_snapshot(const SnapshotArgs& args, std::ostream& out) {
  if (args.action == "segsum") {
    out << torch_snapshot::segsum_text(args.input) << "\n";  // the viewer print()s the text
  } else if (args.action == "stats") {
    out << torch_snapshot::stats_text(torch_snapshot::snapshot_stats(args.input));
  } else {
    throw UsageError("snapshot", "unknown action '" + args.action + "' (valid: stats, segsum)");
  }
  return 0;
}

}  // namespace coopsim
