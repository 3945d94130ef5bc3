// Internals of the PyTorch memory-snapshot importer (private to src/import):
//  * torch_snapshot_read.cpp    the snapshot dict -> Snapshot (checked, one device)
//  * torch_snapshot_frames.cpp  tensor names from stack frames
//  * torch_snapshot_state.cpp   tensor identity and the initial allocator state
//  * torch_snapshot.cpp         the trace: definitions, events, marks, header
//  * torch_snapshot_end.cpp     allocator options, recorded end state and its comparison
#pragma once

#include <array>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "coopsim/alloc/pytorch.hpp"
#include "coopsim/alloc/allocator.hpp"
#include "coopsim/formats/pickle.hpp"
#include "coopsim/model/memory_cap.hpp"
#include "coopsim/model/trace.hpp"

namespace coopsim::torch_snapshot::detail {

enum class Action : std::uint8_t {
  Alloc,
  FreeRequested,
  FreeCompleted,
  SegmentAlloc,
  SegmentFree,
  SegmentMap,
  SegmentUnmap,
  Snapshot,
  Oom,
  Annotate,
};
// The snapshot's spelling of each action, in enum order.
inline constexpr std::array<std::pair<std::string_view, Action>, 10> kActionNames{{
    {"alloc", Action::Alloc},
    {"free_requested", Action::FreeRequested},
    {"free_completed", Action::FreeCompleted},
    {"segment_alloc", Action::SegmentAlloc},
    {"segment_free", Action::SegmentFree},
    {"segment_map", Action::SegmentMap},
    {"segment_unmap", Action::SegmentUnmap},
    {"snapshot", Action::Snapshot},
    {"oom", Action::Oom},
    {"annotate", Action::Annotate},
}};
inline std::string_view action_name(Action a) { return kActionNames[static_cast<std::size_t>(a)].first; }

// One TraceEntry of device_traces[device].
struct Entry {
  std::size_t index = 0;  // position in device_traces[device]
  Action action = Action::Alloc;
  std::uint64_t addr = 0;         // absent for oom (0)
  std::uint64_t size = 0;         // requested bytes (alloc / free_*), segment or mapping bytes, oom request
  std::uint64_t stream = 0;       // as recorded (a cudaStream_t value)
  std::int64_t time_us = -1;      // -1 when the file has no time_us
  std::uint64_t device_free = 0;  // oom only
  std::string name;               // from frames (alloc) or user_metadata (annotate)
};

enum class BlockState : std::uint8_t { Allocated, AwaitingFree, Inactive };

struct SnapBlock {
  std::uint64_t addr = 0, size = 0, requested = 0;
  BlockState state = BlockState::Inactive;
  std::string name;  // from frames
  [[nodiscard]] bool active() const { return state != BlockState::Inactive; }
};

struct SnapSegment {
  std::uint64_t addr = 0, size = 0, stream = 0;
  SegmentPool pool = SegmentPool::Large;
  bool expandable = false;
  std::vector<SnapBlock> blocks;
};

struct Annotation {
  std::string stage, name;
  std::int64_t time_us = -1;
};

struct Snapshot {
  std::string path;
  int device = 0;
  std::size_t devices = 0;              // entries of device_traces
  std::vector<SnapSegment> segments;    // this device's, in address order
  std::vector<Entry> entries;           // this device's trace, in order
  std::vector<Annotation> annotations;  // this device's external annotations
  nlohmann::json allocator_settings;    // null when the file has none
  bool has_time = false;                // every entry has time_us
};

// Bytes counted in limits.max_memory per entry of the device's history and per block of its
// segments, besides their names' text (counted four and three times: the entry or block, the
// reconstruction, the trace, a simulation round's copy). They cover what the import derives from
// one entry or block: the reconstruction (rebuilt per simulation round, two alive at once), the
// trace's tensor and events, the builder's maps, and for a block its "final_segments" JSON.
inline constexpr std::uint64_t kEntryBytes =
    2 * (sizeof(Entry) + sizeof(std::string) + 8 + sizeof(TensorInfo) + 2 * (sizeof(TraceEvent) + 8) + 8);
inline constexpr std::uint64_t kBlockBytes = 2 * (sizeof(SnapBlock) + 2 * sizeof(InitialBlock)) + std::uint64_t{6} * 96;
// Most values the header's copy of allocator_settings may have once the pickle's shared
// references are expanded: real settings have tens; a dict of dicts shared through the memo
// can describe 2^100.
inline constexpr std::uint64_t kMaxSettingsValues = 65536;

// Checks and extracts one device's part of a snapshot dict. Throws Error("<path>: <key>: ...").
// What it keeps is counted in `memory` (limits.max_memory).
Snapshot read_snapshot(const pickle::Value& root, const std::string& path, int device, MemoryCap& memory);

// Plain-data conversion of a pickle value for the trace header (dict keys as strings). The
// caller bounds its expanded size first (expanded_values).
nlohmann::json to_json(const pickle::Value& v);
// Values of `v` as a tree (shared references counted each time they occur), saturating at
// 2^64 - 1; linear in the distinct values.
std::uint64_t expanded_values(const pickle::Value& v);

// "<op> in <function> (<file>:<line>)" from a frames list; either part alone, or "" if none.
std::string name_from_frames(const pickle::Value* frames);

// Tensor identity and the allocator state when the recording began.
struct Tensor {
  std::uint64_t requested = 0;
  std::string name;
};
inline constexpr std::size_t kNoEntry = ~std::size_t{0};  // "no entry": before / after the history

struct History {
  std::vector<Tensor> tensors;                    // initial-state tensors first, then one per alloc
  std::vector<std::uint32_t> tensor_of_entry;     // per entry: alloc / free_completed -> tensor, else ~0
  std::vector<InitialSegment> initial;            // initial state, address order
  std::vector<std::uint32_t> start_allocs;        // tensors live at the start outside `initial`
                                                  // (expandable segments): allocated before event 0
  std::vector<SegmentAddress> segment_addresses;  // segment_alloc entries, in order
  std::vector<std::uint64_t> streams;             // recorded stream values; index = dense number
  std::uint64_t preexisting_freed = 0;            // tensors live at the start, freed in the trace
  std::uint64_t preexisting_kept = 0;             // tensors live at the start and at the end
  std::uint64_t absorbed_remainders = 0;          // pre-existing blocks found to hold an unsplit remainder
  // Pre-existing large blocks followed by a gap that may be free space or (part) their remainder:
  // address, current block size, rounded size, end of the gap, the free_completed entry.
  struct Ambiguous {
    std::uint64_t addr = 0, size = 0, rounded = 0, limit = 0;
    std::size_t free_entry = 0;
  };
  std::vector<Ambiguous> ambiguous;
  bool exact = true;               // initial state reconstructed exactly
  std::vector<std::string> notes;  // why not, and other findings (truncation)
  bool truncated = false;
  std::string truncation_evidence;
};
// `sizes`: block sizes to take for pre-existing blocks (address -> size) found by simulating
// (torch_snapshot.cpp), over the rules' choice for ambiguous ones.
History reconstruct(const Snapshot& snap, const PyTorchOptions& opts,
                    const std::map<std::uint64_t, std::uint64_t>& sizes = {});

// Dense stream number of a recorded stream value (History::streams is sorted).
std::uint16_t dense_stream(const History& h, std::uint64_t stream);

}  // namespace coopsim::torch_snapshot::detail
