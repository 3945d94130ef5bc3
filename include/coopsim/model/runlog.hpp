// The event log of one run: what the engine physically did, in the order it did it. It is
// plain data, filled only when EngineOptions::log is set (the engine's hot path pays one
// branch otherwise). Its readers know nothing of policies or allocators: the independent plan
// auditor (check/audit_runlog), the timeline exports (Perfetto JSON, memory map, PyTorch
// snapshot) and the plan export of the CUDA backend all work from it alone.
//
// Contents model: every block holds one "content" (storage, version). A storage's version
// counts the writes the trace has made to it: 0 is what it holds when the trace allocates it
// (an input, a parameter, or not yet written), and each trace op that writes it (a non-view
// output, or a mutated input) makes the next version. A recompute writes again the versions
// its original execution wrote; a swap-in restores the version that was swapped out.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <vector>

#include "coopsim/base/units.hpp"
#include "coopsim/model/link.hpp"
#include "coopsim/model/segments.hpp"

namespace coopsim {

inline constexpr std::uint32_t kNoRecord = 0xffffffffU;
// A record of a run log: its index in RunLog::records.
enum class RecordId : std::uint32_t {};
constexpr std::uint32_t index_of(RecordId id) { return static_cast<std::uint32_t>(id); }
inline constexpr RecordId kNoRecordId{kNoRecord};

// One tensor content at one place: which storage (trace tensor index of the storage root),
// which version, in which block.
struct LogRef {
  TensorId storage{0};  // the storage root's trace tensor
  std::uint32_t version = 0;
  std::uint64_t addr = 0;
  Bytes size;  // the block's size (allocator rounding included)
};

enum class LogKind : std::uint8_t {
  Alloc,      // a block was placed for ref.storage; content: version 0 if `fresh`, else
              // undefined until written (swap-in target, recompute output, copy-on-write copy)
  Free,       // the block at ref.addr was released
  Compute,    // trace op `op` (trace event `event`) ran on the compute stream over [start, end):
              // refs[first, first + reads) are read, the next `writes` refs are written
  Recompute,  // op `op` re-ran over [start, end) to rematerialize; `origin` is the index of the
              // Compute record it repeats; refs as for Compute
  Access,     // a trace access event read refs[first] at `start`
  SwapOut,    // device-to-host copy of refs[first] over [start, end); recorded at completion
              // (the block is freed by the Free record that follows)
  SwapIn,     // host-to-device copy into refs[first] (placed by an earlier Alloc) over
              // [start, end); recorded at completion, when the content arrives
  Evict,      // recompute policies: refs[first]'s value left memory but stays recomputable
              // (`forced`: chosen by the policy; else eager); a Free follows unless the block
              // was handed to the value that replaces it in place
  Stall,      // the compute stream waited over [start, end) for a transfer
  Memory,     // the allocator's figures changed at `start`: `allocated`, `reserved`
};

struct LogRecord {
  LogKind kind = LogKind::Alloc;
  bool fresh = false;        // Alloc: the trace's allocation (content version 0)
  bool forced = false;       // Evict: chosen by the policy
  std::uint16_t stream = 0;  // Alloc: the allocation stream of the trace
  SimTime start{0}, end{0};
  OpId op = kNoOp;                // Compute / Recompute: the trace op
  EventId event = kNoEvent;       // the trace event being processed when recorded
  RecordId origin = kNoRecordId;  // Recompute: the Compute record it repeats
  std::uint32_t first = 0;        // index of the first ref
  std::uint32_t reads = 0, writes = 0;
  Bytes allocated, reserved;  // Memory: the allocator's allocated and reserved bytes
};

// A change to the allocator's device segments (SegmentChange), placed among the records: it
// happened after records[0, before) and before records[before, ...) (an allocation's new
// segment comes just before the allocation's Alloc record).
struct LogSegment {
  SegmentChange change;
  SimTime time{0};
  std::uint32_t before = 0;
  EventId event = kNoEvent;  // the trace event being processed
};

struct RunLog {
  Bytes budget;
  bool address_aware = true;  // false: the allocator's addresses are not a layout (fungible)
  LinkModel link;             // the host<->device link the copies were timed with
  std::vector<LogRecord> records;
  std::vector<LogRef> refs;
  // The allocator's device segments, when its model reports them (Allocator::observe_segments:
  // the pytorch model). Kept apart from the records, which describe the plan: the auditor and
  // the exports other than the PyTorch snapshot do not read them. Segments installed from a
  // recorded initial state are no change; `end_segments` is the model's snapshot() when the run
  // ended (or stopped).
  bool segments_logged = false;
  std::vector<LogSegment> segments;
  std::vector<SeedSegment> end_segments;

  [[nodiscard]] const LogRef& ref(const LogRecord& r, std::uint32_t i = 0) const { return refs[r.first + i]; }
  [[nodiscard]] const LogRecord& record(RecordId id) const { return records[index_of(id)]; }
  RecordId add(LogRecord r, std::initializer_list<LogRef> rs = {}) {
    r.first = static_cast<std::uint32_t>(refs.size());
    refs.insert(refs.end(), rs.begin(), rs.end());
    records.push_back(r);
    return RecordId{static_cast<std::uint32_t>(records.size() - 1)};
  }
};

std::string_view to_string(LogKind k);

}  // namespace coopsim
