// The independent auditor: checks a run's event log (include/coopsim/model/runlog.hpp) against
// the trace alone. It knows nothing of policies or allocators; it keeps its own picture of the
// device (live blocks and the content each holds), of host copies and of every storage's
// current version (computed from the trace: each Compute of an op bumps the versions of the
// storages it writes), and checks each record against it:
//  * blocks: each Alloc'd block is freed at most once; with an address-aware log, live blocks
//    never overlap; live block bytes never exceed the budget; Memory records keep
//    allocated <= reserved <= budget;
//  * contents: an op reads exactly its input storages, each from a live block holding the
//    storage's current version, and writes exactly its written storages (the next versions);
//    a recompute repeats an earlier Compute of the same op, reading and writing exactly the
//    contents that execution read and wrote, except state, which keeps no history (parameters,
//    step inputs, optimizer state, accumulated gradients = gradients read by an op that
//    updates a parameter or optimizer state, and, from the op on, inputs an op with outputs of
//    its own updates in place, e.g. BN statistics; docs/architecture.md): a recompute reads its
//    current version and never writes it; an access reads the current version;
//  * transfers: a swap-out copies the content its block holds to the host; a swap-in fills a
//    block placed for it (a non-fresh Alloc) from the host copy a swap-out made; reading a
//    block that was freed, evicted or not yet filled is a violation;
//  * the compute stream: trace compute events run once each, in order, one step at a time.
// Contents are told apart across re-allocations of a tensor (a new lifetime starts at version
// 0 again), so a stale block from an earlier lifetime never passes for the current one.
// RunLog::segments (the pytorch model's segment changes) are not read: they say where the
// model got device memory, not what a block holds, and reserved bytes are checked through the
// Memory records; the model's own check_invariants() and the snapshot export's tests
// (tests/cli/torch_snapshot_export_test.py simulates them) cover them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "coopsim/model/runlog.hpp"
#include "coopsim/model/trace.hpp"

namespace coopsim {

inline constexpr std::size_t kMaxViolationMessages = 100;

struct AuditResult {
  // One line per violation, "record R, event E, tensor T: problem" (tensor = its file id; the
  // event is "-" for records made outside a trace event), the first kMaxViolationMessages.
  std::vector<std::string> violations;
  std::uint64_t violation_count = 0;  // all of them, listed or not
  std::uint64_t records = 0;          // records checked
  std::uint64_t reads = 0;            // contents read and checked (op inputs, accesses, swap-outs)
  [[nodiscard]] bool ok() const { return violation_count == 0; }
};

AuditResult audit_runlog(const Trace& trace, const RunLog& log);

}  // namespace coopsim
