// Timeline exports of one run, each a pure function of (trace, event log, report) that returns
// the file's bytes (deterministic: the same inputs give the same bytes). Formats and what each
// track and colour means: docs/timeline.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "coopsim/model/report.hpp"
#include "coopsim/model/runlog.hpp"
#include "coopsim/model/trace.hpp"

namespace coopsim {

// Chrome trace / Perfetto JSON ({"traceEvents": [...]}): compute-stream ops and recomputes,
// stalls, device-to-host and host-to-device transfers, evictions (instant events) and counter
// tracks of allocated and reserved bytes. Times in microseconds with 3 decimals (exact ns).
std::string perfetto_json(const Trace& trace, const RunLog& log, const Report& report);

// SVG picture of the address space over time: x = simulated time, y = address, one rectangle
// per block lifetime. Address-blind logs (RunLog::address_aware false) are drawn as stacked
// bars of live bytes by role instead.
enum class MemoryMapColour : std::uint8_t {
  Role,  // by the tensor's role (parameter, activation, gradient, ...)
  Cost,  // by eviction cost: the duration of the op that produced the block's content
};
std::optional<MemoryMapColour> parse_memory_map_colour(std::string_view name);  // "role" | "cost"
struct MemoryMapOptions {
  MemoryMapColour colour = MemoryMapColour::Role;
  // Block rectangles drawn one by one, largest (on screen) first; the rest are merged into a
  // grid of small cells, so that huge runs stay a few MB.
  std::size_t max_rects = 50000;
};
std::string memory_map_svg(const Trace& trace, const RunLog& log, const Report& report,
                           const MemoryMapOptions& options = {});

// The run as a PyTorch memory snapshot (torch.cuda.memory._snapshot() dict: `segments` at the
// end of the run and `device_traces[0]` with alloc / free_requested / free_completed /
// segment_alloc / segment_free / segment_map / segment_unmap / oom entries), pickled with
// protocol 4 and only the opcodes that pytorch.org/memory_viz and coopsim's own reader accept.
// Segments are the model's own where it reports them (RunLog::segments_logged), else the
// ranges the blocks covered; every entry and block has one frame naming its tensor, role and op
// (docs/timeline.md).
// TorchSnapshotFormat::Torch113 writes what torch 1.13's torch.cuda.memory_snapshot() returned
// instead, the one layout torch 1.13's torch.cuda._memory_viz reads: the pickled list of the end
// segments, each active block's frame as its one `history` entry, and no entries.
enum class TorchSnapshotFormat : std::uint8_t {
  Torch2,    // "2.x": the dict {segments, device_traces} (the default)
  Torch113,  // "1.13": the list of segments
};
std::optional<TorchSnapshotFormat> parse_torch_snapshot_format(std::string_view name);  // "2.x" | "1.13"
std::string torch_snapshot_pickle(const Trace& trace, const RunLog& log, const Report& report,
                                  TorchSnapshotFormat format = TorchSnapshotFormat::Torch2);
// The address a block of the log gets in the snapshot: the model's own, moved up to
// DeviceMemory::kBaseAddress when the model numbers an arena from 0 (no block may sit at 0,
// which snapshot readers take for "no address"); address-blind logs get consecutive
// addresses in allocation order (each block right after
// the previous one) instead (see docs/timeline.md).
class SnapshotAddresses {
 public:
  explicit SnapshotAddresses(const RunLog& log);
  // The snapshot address of the block placed by Alloc record `record`.
  [[nodiscard]] std::uint64_t of(std::uint32_t record) const;
  // The snapshot address of a model address (address-aware logs: segments).
  [[nodiscard]] std::uint64_t of_address(std::uint64_t addr) const;

 private:
  const RunLog& log_;
  std::uint64_t shift_ = 0;
  std::vector<std::uint64_t> blind_;  // address-blind logs: per record, else empty
};

}  // namespace coopsim
