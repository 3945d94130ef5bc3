// The streaming, validating trace v1 loader (docs/trace-format.md). Private to src/formats/trace; the
// public entry point is load_trace() in include/coopsim/model/trace.hpp.
//
// Lines come from LineReader (zlib, chunked); each is parsed by the strict JSON parser of
// json_line.hpp and validated as it arrives, so memory use is bounded by the trace model plus one
// line. The header line becomes an nlohmann::json value to keep its free-form parts: built directly
// for plain lines (plain_json.cpp), by nlohmann's parser otherwise.
// The member functions are split by responsibility: loader.cpp (lines, header, record dispatch,
// field helpers), loader_definitions.cpp (tensor, op, views), loader_events.cpp (alloc, free,
// access, compute, iteration, mark), loader_segments.cpp (initial-state records) and
// loader_plain.cpp (the writer's commonest lines without the JSON parser).
#pragma once

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "coopsim/base/error.hpp"
#include "coopsim/model/memory_cap.hpp"
#include "coopsim/model/trace.hpp"
#include "json_line.hpp"
#include "coopsim/base/line_reader.hpp"
#include "record_keys.hpp"
#include "trace_detail.hpp"

namespace coopsim::trace_detail {

// File id -> dense index, only used for lookups, never iterated. While every key so far equals
// its value and the values are 0, 1, 2, ... in order (the writer's and the importers' ids), a key is
// its own index and nothing is stored; the first other key moves the map to open addressing with
// linear probing.
class IdMap {
 public:
  [[nodiscard]] std::uint32_t find(std::uint64_t key) const {
    if (dense_) return key < size_ ? static_cast<std::uint32_t>(key) : kNoIndex;
    for (std::size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.value == kNoIndex) return kNoIndex;
      if (s.key == key) return s.value;
    }
  }
  // `key` must be absent.
  void insert(std::uint64_t key, std::uint32_t value) {
    if (dense_ && key == value && value == size_) {
      ++size_;
      return;
    }
    insert_sparse(key, value);
  }

 private:
  struct Slot {
    std::uint64_t key = 0;
    std::uint32_t value = kNoIndex;
  };
  static std::size_t hash(std::uint64_t x) {  // splitmix64 finalizer
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return static_cast<std::size_t>(x);
  }
  void insert_sparse(std::uint64_t key, std::uint32_t value);
  void place(std::uint64_t key, std::uint32_t value);
  void grow();
  bool dense_ = true;
  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
};

class Loader final : public LineSink {
 public:
  Loader(const std::string& path, const Limits& limits) : path_(path), limits_(limits), memory_(limits.max_memory) {
    trace_.path = path;
  }
  // Trace text held in memory; `name` stands for a path in errors and in Trace::path.
  Loader(const std::string& name, std::string_view text, const Limits& limits) : Loader(name, limits) { text_ = text; }
  Trace run();
  void on_line(std::string_view line, std::uint64_t number, bool no_newline) override;

 private:
  enum class State : std::uint8_t { Never, Live, Freed };
  struct Life {
    State state = State::Never;
    std::uint64_t alloc_line = 0;  // of the latest alloc (or initial-state segment)
    std::uint64_t free_line = 0;   // of the latest free
  };

  [[noreturn]] void fail(const std::string& problem) const { throw InputError(path_, line_, problem); }

  // loader.cpp: header, dispatch, field helpers, end of file
  void on_header(std::string_view line);
  void header_from(nlohmann::json& j);  // the parsed header line; its values are moved out
  // loader_plain.cpp: the commonest lines in the writer's exact form, read without the JSON parser
  // (the same fields, checks and records as on_record); false leaves the line to the parser.
  bool plain_line(std::string_view line);
  bool plain_tensor(std::string_view line);
  bool plain_op(std::string_view line);
  // An array element of the record being read: the parser's, or the plain reading's.
  [[nodiscard]] const JValue& element(std::uint32_t i) const {
    return plain_elements_active_ ? plain_elements_[i] : json_.element(i);
  }
  void on_record();
  void finish();
  [[noreturn]] void missing(std::string_view prefix, Key k) const;
  [[noreturn]] void bad(std::string_view prefix, Key k, std::string_view what, const JValue& v) const;
  std::string record_prefix() const { return fmt::format("{} record", kKindNames[static_cast<int>(kind_)]); }
  std::uint64_t req_u64(Key k) const;  // required non-negative integer field
  // `prefix` is only called to build an error message.
  template <typename Prefix>
  std::int64_t read_time(const JValue& v, Prefix&& prefix, Key k) const {
    if (v.type != JType::Number || v.negative) bad(prefix(), k, "a non-negative number", v);
    std::int64_t ns = 0;
    if (v.exact && unit_exp_ == 0 && v.value <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return static_cast<std::int64_t>(v.value);  // an integer of ns: what to_ns would give
    }
    if (!to_ns(v.text, unit_exp_, ns)) {
      fail(fmt::format("{}: field '{}' is too large ({} {} overflows 64-bit nanoseconds)", prefix(), key_name(k),
                       describe(v), trace_.header.time_unit));
    }
    return ns;
  }
  std::uint16_t read_stream() const;  // optional "stream", default 0
  bool read_expandable() const;       // optional "expandable" (segment, segment_address), default false
  void read_t_stream(TraceEvent& e);  // optional "t" (non-decreasing) and "stream"
  std::uint32_t tensor_ref(std::uint64_t id, std::string_view what) const;
  void push_event(const TraceEvent& e);  // limits.max_events

  // limits.max_memory (coopsim/model/memory_cap.hpp): counts `bytes` more as held, or fails.
  void hold(std::uint64_t bytes) {
    if (!memory_.add(bytes)) fail(memory_.problem());
  }
  // Fails unless appending to `v` fits (a full vector copies itself while it grows).
  template <class T>
  void room_to_append(const std::vector<T>& v) const {
    if (!memory_.fits_append(v)) fail(memory_.problem());
  }
  static constexpr std::uint64_t kIdBytes = memory_cost::kLoaderOp;
  static constexpr std::uint64_t kTensorState = memory_cost::kLoaderTensor;
  static constexpr std::uint64_t kLineBytes = memory_cost::kLoaderLine;
  static_assert(sizeof(JValue) <= 40, "memory_cost::kLoaderLine counts 40 bytes per parsed value");
  static constexpr std::uint64_t kMapNode = memory_cost::kMapNode;

  // loader_definitions.cpp
  void on_tensor();
  void tensor_list(Key k, std::uint64_t op_id, std::vector<TensorId>& out) const;
  void mark_op_tensors(const OpInfo& op);           // fills in_mark_ / out_mark_ for the op being read
  void write_self_references_in_place(OpInfo& op);  // drops duplicate outputs, adds self-references to mutated
  void on_op();
  void add_view(OpInfo& op, std::uint64_t op_id, std::uint32_t out, std::uint32_t in, std::uint64_t out_id,
                std::uint64_t in_id);

  // loader_events.cpp
  void on_alloc();
  void on_free();
  template <typename Describe>
  void check_live(std::uint32_t idx, Describe&& what) const;
  void on_access();
  void on_compute();
  void on_iteration();
  void on_mark();

  // loader_segments.cpp
  SegmentPool read_pool() const;
  void on_segment();
  InitialBlock read_block(std::uint32_t index, std::string_view prefix);
  void on_segment_address();

  std::string path_;
  std::optional<std::string_view> text_;
  Limits limits_;
  MemoryCap memory_;
  std::uint64_t longest_line_ = 0;  // its parse buffers are kept (and counted)
  Trace trace_;
  JsonLine json_;
  JsonLine inner_;  // nested objects (the blocks of a segment record)
  std::uint64_t line_ = 0;
  bool have_header_ = false;
  int unit_exp_ = 0;
  Kind kind_ = Kind::Tensor;
  std::array<const JValue*, kNumKeys> slot_{};
  std::array<JValue, 8> plain_;         // the fields of a plain line
  std::vector<JValue> plain_elements_;  // and its array elements
  bool plain_elements_active_ = false;  // element() reads plain_elements_
  IdMap tensor_ids_, op_ids_;
  std::vector<std::uint64_t> tensor_def_line_, op_def_line_;
  std::vector<Life> life_;
  std::vector<std::uint8_t> is_base_;  // tensor is the storage root of at least one view
  // Membership of the op being read: in_mark_[t] == op_epoch_ when tensor t is one of its
  // inputs (out_mark_: outputs), so that mutates and views are checked in linear time.
  std::vector<std::uint32_t> in_mark_, out_mark_;
  std::uint32_t op_epoch_ = 0;
  std::int64_t last_time_ = 0;
  std::uint64_t last_time_line_ = 0;
  std::uint64_t iterations_seen_ = 0;
  std::map<std::string, std::uint32_t, std::less<>> label_index_;
  // Initial-state segments by address: end address and line, for the overlap check.
  std::map<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>> initial_extent_;
};

}  // namespace coopsim::trace_detail
