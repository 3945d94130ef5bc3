// In-memory form of a coopsim trace v1 (docs/trace-format.md). Tensors and ops are
// definitions; events are the simulated stream. Ids in the file are arbitrary non-negative
// integers; the loader maps them to dense TensorId / OpId in order of definition.
#pragma once

#include <nlohmann/json.hpp>

#include <cassert>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "coopsim/base/limits.hpp"
#include "coopsim/base/units.hpp"
#include "coopsim/model/segments.hpp"

namespace coopsim {

enum class TensorRole : std::uint8_t {
  Parameter,
  Input,
  Activation,
  Gradient,
  OptimizerState,
  Workspace,
  Other,
};
std::string_view to_string(TensorRole r);
std::optional<TensorRole> parse_role(std::string_view s);

inline constexpr std::uint32_t kNoIndex = 0xffffffffU;

struct TensorInfo {
  TensorId id{};
  std::uint64_t file_id = 0;  // id as written in the file
  Bytes size;                 // bytes of its own storage (0 for views)
  TensorRole role = TensorRole::Other;
  std::string name;  // optional
  // Views share their base's storage: no alloc/free of their own; accesses resolve to base.
  TensorId view_of = kNoTensor;  // the base's storage root, or kNoTensor
  [[nodiscard]] bool is_view() const { return view_of != kNoTensor; }
  friend bool operator==(const TensorInfo&, const TensorInfo&) = default;
};

struct OpInfo {
  OpId id{};
  std::uint64_t file_id = 0;
  std::string name;
  SimTime duration{0};
  std::vector<TensorId> inputs;
  std::vector<TensorId> outputs;
  std::vector<TensorId> mutated;  // inputs written in place
  // View declarations as written ("views": [[output, input], ...]), in file order. The
  // resulting storage root is in TensorInfo::view_of of the output; kept so that writers
  // reproduce the declaration exactly.
  std::vector<std::pair<TensorId, TensorId>> views;
  bool random = false;  // outputs cannot be recomputed identically
  friend bool operator==(const OpInfo&, const OpInfo&) = default;
};

enum class EventKind : std::uint8_t {
  Alloc,      // tensor's storage is allocated
  Free,       // tensor's storage is freed
  Access,     // tensor is read or written (optionally by an op)
  Compute,    // an op executes for its duration on the compute stream
  Iteration,  // start of iteration `index`
  Mark,       // annotation (e.g. "backward", "snapshot", "oom"); label in Trace::labels
};
std::string_view to_string(EventKind k);

// One event of the stream. Its subject depends on its kind: a tensor (Alloc, Free, Access), an
// op (Compute), an iteration number (Iteration) or a label (Mark). Events are made by the named
// constructors and read through the accessor of their kind, which asserts the kind in debug
// builds; the raw subject is private, so an op index is never read as a tensor. Events are hot
// (a trace holds millions): 32 bytes, trivially copyable, accessors inline.
class TraceEvent {
 public:
  static constexpr SimTime kNotRecorded{-1};  // `time` of an event the trace gave no timestamp

  static constexpr TraceEvent alloc(TensorId t, std::uint16_t stream = 0, std::uint64_t addr = 0) {
    TraceEvent e(EventKind::Alloc, index_of(t));
    e.stream = stream;
    e.addr = addr;
    return e;
  }
  static constexpr TraceEvent free(TensorId t, std::uint16_t stream = 0) {
    TraceEvent e(EventKind::Free, index_of(t));
    e.stream = stream;
    return e;
  }
  // `by`: the op that made the access, when the trace says.
  static constexpr TraceEvent access(TensorId t, bool write, std::optional<OpId> by = std::nullopt) {
    TraceEvent e(EventKind::Access, index_of(t));
    e.write = write;
    if (by) e.access_op_ = index_of(*by);
    return e;
  }
  static constexpr TraceEvent compute(OpId op) { return TraceEvent(EventKind::Compute, index_of(op)); }
  static constexpr TraceEvent iteration(std::uint32_t index) { return TraceEvent(EventKind::Iteration, index); }
  static constexpr TraceEvent mark(std::uint32_t label) { return TraceEvent(EventKind::Mark, label); }

  constexpr TraceEvent() = default;  // a Mark of label 0, as a placeholder

  // Alloc, Free, Access: the tensor (for Access possibly a view; Alloc and Free name storages).
  [[nodiscard]] constexpr TensorId tensor() const {
    assert(has_tensor());
    return TensorId{subject_};
  }
  [[nodiscard]] constexpr OpId compute_op() const {  // Compute: the op that runs
    assert(kind == EventKind::Compute);
    return OpId{subject_};
  }
  [[nodiscard]] constexpr std::uint32_t iteration_index() const {  // Iteration: 0, 1, ...
    assert(kind == EventKind::Iteration);
    return subject_;
  }
  [[nodiscard]] constexpr std::uint32_t label_index() const {  // Mark: index in Trace::labels
    assert(kind == EventKind::Mark);
    return subject_;
  }
  [[nodiscard]] constexpr std::optional<OpId> access_op() const {  // Access: the op, if recorded
    assert(kind == EventKind::Access);
    if (access_op_ == kNoIndex) return std::nullopt;
    return OpId{access_op_};
  }
  [[nodiscard]] constexpr bool has_tensor() const {
    return kind == EventKind::Alloc || kind == EventKind::Free || kind == EventKind::Access;
  }
  [[nodiscard]] constexpr bool timed() const { return time >= SimTime::zero(); }  // else kNotRecorded

  EventKind kind = EventKind::Mark;
  bool write = false;        // Access: write (true) or read
  std::uint16_t stream = 0;  // CUDA stream (0 = default)

 private:
  constexpr TraceEvent(EventKind k, std::uint32_t subject) : kind(k), subject_(subject) {}

  std::uint32_t subject_ = 0;           // see the accessors
  std::uint32_t access_op_ = kNoIndex;  // Access: op index, or kNoIndex

 public:
  SimTime time = kNotRecorded;  // since the trace's start
  std::uint64_t addr = 0;       // Alloc: recorded device address (0 = not recorded)
  friend constexpr bool operator==(const TraceEvent&, const TraceEvent&) = default;
};
static_assert(sizeof(TraceEvent) == 32, "TraceEvent is hot: keep it at 32 bytes");
static_assert(std::is_trivially_copyable_v<TraceEvent>);

// Allocator state at the start of the trace (simulations of recordings, e.g. memory snapshots):
// device segments with their block layout. A block either belongs to a tensor, which is live
// from the start with that block (requested bytes = the tensor's size), or is free.
struct InitialBlock {
  Bytes size;                       // block size as the recording's allocator rounded it
  TensorId tensor = kNoTensor;  // kNoTensor for a free block
  [[nodiscard]] bool is_free() const { return tensor == kNoTensor; }
  friend bool operator==(const InitialBlock&, const InitialBlock&) = default;
};

struct InitialSegment {
  std::uint64_t addr = 0;
  std::uint16_t stream = 0;
  SegmentPool pool = SegmentPool::Large;
  bool expandable = false;           // a mapped range of an expandable segment's reservation
  std::vector<InitialBlock> blocks;  // tile [addr, addr + size()) in address order
  [[nodiscard]] Bytes size() const {
    Bytes total;
    for (const auto& b : blocks) total += b.size;
    return total;
  }
  friend bool operator==(const InitialSegment&, const InitialSegment&) = default;
};

struct TraceHeader {
  std::string format = "coopsim-trace";
  int version = 1;
  std::string model;
  nlohmann::json source;         // provenance: tool, original file, notes (free-form object)
  std::string time_unit = "ns";  // of durations and timestamps in the file
  std::uint32_t iterations = 1;
  nlohmann::json extra;  // any other header keys, kept verbatim (loader: always an object)
  friend bool operator==(const TraceHeader&, const TraceHeader&) = default;
};

struct Trace {
  std::string path;  // as given to the loader
  TraceHeader header;
  std::vector<TensorInfo> tensors;
  std::vector<OpInfo> ops;
  std::vector<TraceEvent> events;
  std::vector<std::string> labels;  // Mark labels, deduplicated
  // Initial allocator state ("segment" records, address order as written) and the addresses
  // the recording's new segments received ("segment_address" records, in order). Both empty
  // for traces that start from an empty device.
  std::vector<InitialSegment> initial_segments;
  std::vector<SegmentAddress> segment_addresses;
  std::uint64_t content_hash = 0;  // FNV-1a 64 over the decompressed bytes

  [[nodiscard]] const TensorInfo& tensor(TensorId id) const { return tensors[index_of(id)]; }
  [[nodiscard]] const OpInfo& op(OpId id) const { return ops[index_of(id)]; }
  // Storage owner of a tensor (itself unless it is a view).
  [[nodiscard]] std::uint32_t storage_of(std::uint32_t tensor_index) const {
    const auto& t = tensors[tensor_index];
    return t.is_view() ? index_of(t.view_of) : tensor_index;
  }
  [[nodiscard]] TensorId storage_of(TensorId t) const { return TensorId{storage_of(index_of(t))}; }
};

// Summary figures computed from a loaded trace (no allocator involved).
struct TraceSummary {
  std::uint64_t tensors = 0, views = 0, ops = 0, events = 0;
  std::uint64_t allocs = 0, frees = 0, accesses = 0, computes = 0, iterations = 0;
  Bytes peak_live;        // max over the stream of the sum of live requested bytes (tensors
                          // live from the initial state included)
  Bytes total_allocated;  // sum of requested bytes over all allocs
  std::uint64_t initial_segments = 0, initial_tensors = 0;  // initial state
  Bytes initial_reserved, initial_live;                     // its segment bytes and live requested bytes
  SimTime compute_time{0};                                  // sum of executed op durations
};
TraceSummary summarize(const Trace& trace);

// The trace as simulated from an empty allocator (--initial-state empty): the tensors of its
// recorded initial state become allocation requests at its start, in the state's order; recorded
// addresses, segment addresses and the recorded end state (header extra "final_segments") are
// dropped. A trace without a recorded state comes back unchanged but for its addresses.
Trace simulated_from_empty(const Trace& trace);

// Checks a trace built in memory (an importer's result) against the tensor, event and op fan-in
// caps; throws Error("file: more than N tensors (limits.max_tensors)") naming the first one
// exceeded.
void check_limits(const Trace& trace, const Limits& limits, const std::string& file);

}  // namespace coopsim
