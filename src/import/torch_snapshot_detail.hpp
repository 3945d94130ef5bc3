// Internals of the PyTorch memory-snapshot importer (private to src/import):
//  * torch_snapshot_read.cpp    the snapshot dict -> Snapshot (checked, one device)
//  * torch_snapshot_entries.cpp trace entries -> Entry, also while the pickle streams
//  * torch_snapshot_frames.cpp  tensor names from stack frames
//  * torch_snapshot_state.cpp   tensor identity and the initial allocator state
//  * torch_snapshot.cpp         the trace: definitions, events, marks, header
//  * torch_snapshot_end.cpp     allocator options, recorded end state and its comparison
#pragma once

#include <array>
#include <deque>
#include <memory>
#include <span>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "coopsim/alloc/pytorch.hpp"
#include "coopsim/alloc/allocator.hpp"
#include "coopsim/formats/pickle.hpp"
#include "coopsim/formats/pickle_stream.hpp"
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
struct Entry {                // 48 bytes, fields ordered to pack: tens of millions of these are held at once
  std::uint64_t addr = 0;     // block / segment / mapping address; an oom has none and keeps device_free here
  std::uint64_t size = 0;     // requested bytes (alloc / free_*), segment or mapping bytes, oom request
  std::uint64_t stream = 0;   // as recorded (a cudaStream_t value)
  std::int64_t time_us = -1;  // -1 when the file has no time_us
  std::uint32_t index = 0;    // position in device_traces[device] (a pickle of at most 2^30 bytes
                              // holds fewer than 2^32 entries; EntryReader::keep checks)
  std::uint32_t name = 0;     // in Snapshot::names: from frames (alloc, oom) or user_metadata (annotate)
  Action action = Action::Alloc;
  // An oom's device_free (cudaMemGetInfo's free bytes when the request failed); 0 for other actions.
  [[nodiscard]] std::uint64_t device_free() const { return action == Action::Oom ? addr : 0; }
};
static_assert(sizeof(Entry) <= 48);
// A deque: the history can hold tens of millions of entries, and a vector's growth would hold
// the old and the new copy at once.
using Entries = std::deque<Entry>;

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
  Entries entries;                      // this device's trace, in order
  std::vector<std::string> names{""};   // Entry::name -> text (0: none)
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
// A name's bytes besides its text (counted three times: the table, the reconstruction, the trace).
inline constexpr std::uint64_t kNameBytes = 3 * sizeof(std::string);
inline constexpr std::uint64_t kBlockBytes = 2 * (sizeof(SnapBlock) + 2 * sizeof(InitialBlock)) + std::uint64_t{6} * 96;
// Most values the header's copy of allocator_settings may have once the pickle's shared
// references are expanded: real settings have tens; a dict of dicts shared through the memo
// can describe 2^100.
inline constexpr std::uint64_t kMaxSettingsValues = 65536;

// A dict's value for `key` as the shared reference the dict holds; nullptr when absent.
const pickle::ValuePtr* member(const pickle::Value& dict, std::string_view key);
// A value in an error message: ints and bools as Python prints them, text quoted, else "a <kind>".
std::string describe(const pickle::Value& v);

// An entry's frames value: shared when something besides the entry holds it (then it is named
// once and kept alive through `held` or `memo`, whichever is set).
struct FramesRef {
  const pickle::Value* value = nullptr;
  bool shared = false;
  const pickle::ValuePtr* held = nullptr;
  const std::shared_ptr<pickle::Value>* memo = nullptr;
  [[nodiscard]] pickle::ValuePtr keep() const { return held != nullptr ? *held : pickle::ValuePtr(*memo); }
};

// The fields an entry may have, found in one pass over its dict (a Value::get per field walked
// it once for each). First occurrence of each key, as Value::get finds it.
struct EntryFields {
  const pickle::Value *action = nullptr, *addr = nullptr, *size = nullptr, *stream = nullptr, *time_us = nullptr,
                      *device_free = nullptr, *user_metadata = nullptr;
  FramesRef frames;
};

// Converts trace entries and names stack frames, counting what it keeps in `memory`.
class EntryReader {
 public:
  EntryReader(const std::string& path, MemoryCap& memory) : path_(path), memory_(memory) {}
  // The entry at `base`[`index`]; throws Error("<path>: <base>[<index>]...: problem").
  Entry read(const pickle::Value& e, std::string_view base, std::size_t index);
  // read() in two steps: the checked entry without its name (no side effects), then the name.
  Entry parse(const EntryFields& f, std::string_view base, std::size_t index) const;
  void name(Entry& en, const EntryFields& f);
  // Appends `en` to `entries`, counting it, or throws naming `base`[`index`].
  void keep(Entries& entries, Entry en, std::string_view base, std::size_t index);
  // The tensor name of a frames list (name_from_frames), computed once per shared list: its
  // number in names() (0: no frames, or no name in them).
  std::uint32_t name_of(const pickle::ValuePtr* frames);
  std::uint32_t name_of(const FramesRef& frames);
  std::uint32_t add_name(std::string name);
  [[nodiscard]] const std::vector<std::string>& names() const { return names_; }
  std::vector<std::string> take_names() { return std::exchange(names_, {""}); }

 private:
  const std::string& path_;
  MemoryCap& memory_;
  std::vector<std::string> names_{""};
  // A shared frames list (kept alive here) -> its name.
  std::unordered_map<const pickle::Value*, std::pair<pickle::ValuePtr, std::uint32_t>> shared_frames_;
};

// Takes every dict with an "action" key appended to any list while a snapshot streams,
// converted; one that does not convert is left in the tree. Which list is device_traces[d] is
// known only at the end: the entries are kept per list.
class EntrySink : public pickle::ItemSink {
 public:
  explicit EntrySink(EntryReader& reader) : reader_(reader) {}
  bool take(const pickle::ValuePtr& list, const pickle::Value& item) override;
  bool take_flat(const pickle::ValuePtr& list, std::span<const pickle::FlatValue> items,
                 std::span<const std::uint8_t> sizes) override;
  // The entries taken from `list`, in order (one per taken() it holds); nullptr if none.
  Entries* entries_of(const pickle::Value* list);
  // Whether every list it took from is an item of `device_traces` and held nowhere else (else
  // a taken() would stand for an entry somewhere the importer reads as plain values).
  bool only_in(const pickle::Value& device_traces) const;
  [[nodiscard]] bool empty() const { return lists_.empty(); }
  void clear() {
    lists_.clear();
    last_list_ = nullptr;
    last_ = nullptr;
  }

 private:
  struct Taken {
    pickle::ValuePtr list;  // kept alive: its address names it
    Entries entries;
  };
  // The entries of `list`, finding its node only when the list changes.
  Taken& taken_of(const pickle::ValuePtr& list);

  EntryReader& reader_;
  std::unordered_map<const pickle::Value*, Taken> lists_;
  // The list the last entry went to (a history is one list): its node, without a lookup.
  const pickle::Value* last_list_ = nullptr;
  Taken* last_ = nullptr;
  // take_flat's scratch: the immediates of the dict at hand as values, the batch's entries.
  std::array<pickle::Value, 16> immediates_;
  std::vector<std::pair<Entry, EntryFields>> batch_;
};

// Checks and extracts one device's part of a snapshot dict. Throws Error("<path>: <key>: ...").
// What it keeps is counted in `memory` (limits.max_memory). With `sink`, the entries it took
// while the pickle streamed stand for the taken() items of device_traces[device].
Snapshot read_snapshot(const pickle::Value& root, const std::string& path, int device, MemoryCap& memory,
                       EntryReader& entries, EntrySink* sink = nullptr);

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
