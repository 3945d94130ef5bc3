// Kineto importer internals (private to src/import): the streaming JSON reader, the event
// records extracted from a trace, and the op nesting sweep. See src/import/kineto.cpp for the
// conversion rules and docs/import-kineto.md for the user-facing description.
#pragma once

#include "coopsim/base/error.hpp"
#include "coopsim/model/memory_cap.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace coopsim::kineto_detail {

inline constexpr std::uint32_t kNone = 0xffffffffU;

// ---- reader (kineto_reader.cpp) ----------------------------------------------------------

// One element of traceEvents, as parsed. `ts_text` / `dur_text` hold the literal text of a
// fractional "ts" / "dur" member (so that sub-microsecond digits survive exactly); they are
// empty when the member is an integer or absent.
struct RawEvent {
  std::size_t index = 0;   // position in traceEvents
  std::uint64_t line = 0;  // line of its opening brace (decompressed text)
  nlohmann::json value;    // the event object
  std::string ts_text, dur_text;
};

struct TopLevel {
  nlohmann::json fields = nlohmann::json::object();  // every top-level key but traceEvents
  bool array_form = false;                           // a bare JSON array of events
  std::uint64_t events = 0;
};

// Streams a Kineto / Chrome trace (plain or gzip, detected from the content) and calls
// on_event for each element of traceEvents in file order; keeps only the other top-level
// fields. Throws InputError for unreadable files, malformed JSON and a missing traceEvents.
// Stops with "file:line: more than N bytes of input (limits.max_input_bytes)" past `max_bytes`,
// and with "... (limits.max_memory)" when the DOM of an event (or of a top-level field) would
// not fit in `memory` beside what it already holds.
TopLevel read_kineto_json(const std::string& path, std::uint64_t max_bytes, MemoryCap& memory,
                          const std::function<void(RawEvent&)>& on_event);

// The same streaming reader for any JSON object whose bulk is one array of objects (an
// Execution Trace's "nodes"): `key` names the array, `what` the format and `element` one
// element in messages; `bare_array` accepts a top-level array of elements (Chrome traces).
struct ArrayFormat {
  const char* key = "traceEvents";
  const char* what = "a Kineto trace";
  const char* element = "an event";
  bool bare_array = true;
};
TopLevel read_json_array(const std::string& path, std::uint64_t max_bytes, MemoryCap& memory,
                         const ArrayFormat& format, const std::function<void(RawEvent&)>& on_event);

// Exact decimal conversion of a JSON number's text in microseconds to nanoseconds, rounding
// digits beyond the nanosecond to nearest (halves away from zero). nullopt on overflow.
std::optional<std::int64_t> micros_text_to_ns(std::string_view text);

// a + b for durations (b >= 0), saturating at the largest int64 instead of overflowing.
inline std::int64_t add_ns(std::int64_t a, std::int64_t b) {
  constexpr std::int64_t kMax = 0x7fffffffffffffffLL;
  return a > kMax - b ? kMax : a + b;
}

// For error messages: a string quoted '...' (control characters as \xNN, cut at ~40 bytes).
inline std::string quote(std::string_view s) { return quote_excerpt(s); }
// For error messages: strings quoted '...', numbers as written, "an array" / "an object".
std::string describe(const nlohmann::json& j);

// ---- extracted records (kineto_events.cpp) -------------------------------------------------

struct OpRange {                    // a CPU op (cat Operator / cpu_op), not an annotation or ProfilerStep
  std::int64_t begin = 0, end = 0;  // ns, as recorded
  std::uint32_t thread = 0;         // index into Collected::threads
  std::uint32_t name = 0;           // index into Collected::names
  std::size_t index = 0;            // in traceEvents
  std::int64_t rf_id = -1;          // args["Record function id"] (newer traces), -1 = none
};

struct RuntimeCall {  // a CUDA runtime / driver call that may have launched GPU work
  std::int64_t ts = 0;
  std::uint32_t thread = 0;
  std::int64_t correlation = 0;
};

struct MemoryEvent {  // [memory] (or [OutOfMemory] when oom) on the selected device
  std::int64_t ts = 0;
  std::uint32_t thread = 0;
  std::int64_t bytes = 0;
  std::optional<std::uint64_t> addr;
  std::optional<std::int64_t> total_allocated, total_reserved;
  bool oom = false;
  std::size_t index = 0;
  std::uint64_t line = 0;
};

struct ProfilerStep {
  std::int64_t ts = 0;
  std::uint64_t number = 0;
};

struct MemoryCounts {  // [memory] events by device
  std::uint64_t selected = 0, cpu = 0, other_cuda = 0, other_type = 0;
  std::uint64_t ooms = 0, other_device_ooms = 0;
};

struct Collected {
  std::vector<std::string> threads;  // "pid/tid", tids normalised (2021: "25738" == 25738)
  std::vector<std::string> names;    // interned op names
  std::vector<OpRange> ops;
  std::vector<RuntimeCall> runtime;
  std::vector<MemoryEvent> memory;  // selected device, file order
  std::vector<ProfilerStep> steps;  // file order
  // GPU work (kernels, memcpy, memset) on the selected device, by correlation id.
  std::unordered_map<std::int64_t, std::int64_t> gpu_ns_by_correlation;
  std::uint64_t gpu_activities = 0;           // on any device
  std::uint64_t gpu_activities_selected = 0;  // on the selected device
  std::int64_t gpu_ns_selected = 0;
  std::int64_t gpu_ns_uncorrelated = 0;  // selected device, without a correlation id
  MemoryCounts memory_counts;
  std::uint64_t annotations = 0;  // user ranges (not ops)
  std::uint64_t legacy_categories = 0, current_categories = 0;
  std::set<std::int64_t> devices_seen;  // CUDA devices with memory events or GPU work
};

class Collector {
 public:
  Collector(std::string path, int device) : path_(std::move(path)), device_(device) {}
  void add(const RawEvent& e);
  Collected& result() { return out_; }

 private:
  std::uint32_t thread_of(const RawEvent& e);
  std::uint32_t intern(const std::string& name);
  void add_complete(const RawEvent& e);
  void add_instant(const RawEvent& e, bool oom);

  std::string path_;
  int device_;
  Collected out_;
  std::map<std::string, std::uint32_t> thread_ids_, name_ids_;
};

// limits.max_memory for what the collector keeps (kineto_events.cpp), checked after each event:
// per record, twice its size (a vector's slack and regrowth copy) and what the conversion
// derives from it (its nesting entries, the pairing's tensor and action, the pending list, the
// trace's op, tensor and events; the names' text is counted where names are copied). Throws
// InputError("file:line: more than N bytes of memory (limits.max_memory)").
class CollectedMemory {
 public:
  CollectedMemory(const std::string& path, MemoryCap& memory) : path_(path), memory_(memory) {}
  void update(const Collected& c, std::uint64_t line);

 private:
  const std::string& path_;
  MemoryCap& memory_;
  std::size_t ops_ = 0, runtime_ = 0, memory_events_ = 0, steps_ = 0, correlations_ = 0, names_ = 0, threads_ = 0;
};

// ---- nesting (kineto_nesting.cpp) ----------------------------------------------------------

// Op nesting per thread and the op enclosing each point event. An op is a child of the op
// below it on its thread's stack when it starts before that op ends (or ends within it);
// points (memory events, runtime calls) belong to the innermost op whose [begin, end]
// contains their ts, on the same thread.
struct Nesting {
  std::vector<std::uint32_t> root;               // per op: its top-level op (itself if top-level)
  std::vector<std::uint32_t> memory_innermost;   // per memory event: innermost op or kNone
  std::vector<std::uint32_t> runtime_root;       // per runtime call: top-level op or kNone
  std::vector<std::uint32_t> parent;             // per op: enclosing op or kNone
  std::vector<std::uint32_t> runtime_innermost;  // per runtime call: innermost op or kNone
};
Nesting nest_ops(const Collected& c);

// ---- memory pairing (kineto_memory.cpp) -----------------------------------------------------

enum class Pairing : std::uint8_t { None, Address, InferredLifoPerSize };

struct TensorRecord {
  std::uint64_t bytes = 0;
  std::uint32_t top_op = kNone;     // top-level op the allocation happened in, or kNone
  std::uint32_t innermost = kNone;  // innermost op around the allocation (its name names the tensor)
  std::uint64_t addr = 0;           // recorded address, 0 = none
  bool before_profiling = false;    // live when profiling began (freed without a recorded alloc)
  bool residual = false;            // the never-freed rest of "Total Allocated" at the start
};

struct MemoryAction {
  enum class Kind : std::uint8_t { Alloc, Free, Oom } kind = Kind::Alloc;
  std::int64_t ts = 0;
  std::uint32_t tensor = kNone;  // Alloc / Free; for Oom: index into PairedMemory::ooms
};

struct PairedMemory {
  Pairing pairing = Pairing::None;
  std::vector<TensorRecord> tensors;
  std::vector<std::uint32_t> initially_live;  // tensors live when profiling began, in order
  std::vector<MemoryAction> actions;          // in trace order (ts, then file order)
  std::vector<const MemoryEvent*> ooms;
  std::uint64_t zero_byte_events = 0;
  std::uint64_t allocations_outside_ops = 0;
  std::uint64_t freed_before_allocated = 0, freed_before_allocated_bytes = 0;
  // From "Total Allocated" / "Total Reserved", when every event carries them.
  std::optional<std::int64_t> live_before_profiling, peak_total_allocated, peak_total_reserved;
  std::uint64_t total_allocated_mismatches = 0;
  bool total_allocated_inconsistent = false;  // frees before allocations exceed the recorded total
};

// Pairs the selected device's alloc / free events into tensor lifetimes: by args.Addr when the
// events carry it, otherwise LIFO per size (see kineto_memory.cpp). Throws InputError on
// contradictory events.
PairedMemory pair_memory(const std::string& path, const Collected& c, const Nesting& n);

}  // namespace coopsim::kineto_detail
