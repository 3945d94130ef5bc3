// PyTorch Execution Trace (ET / Chakra host trace) internals, private to src/import: the node
// records read from an ET file, the link of ET ops to a Kineto trace's CPU ops, and the
// conversion of the linked pair to a coopsim trace. The user-facing rules are in
// docs/import-kineto.md ("Dataflow from an Execution Trace"); the source format is written by
// PyTorch's ExecutionTraceObserver (pytorch/pytorch torch/csrc/profiler/standalone/
// execution_trace_observer.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "coopsim/import/importers.hpp"
#include "coopsim/base/limits.hpp"
#include "coopsim/model/memory_cap.hpp"
#include "coopsim/model/trace.hpp"
#include "kineto_detail.hpp"

namespace coopsim::et_detail {

inline constexpr std::uint32_t kNone = 0xffffffffU;

// One tensor value of a node: the ET's tuple [tensor id, storage id, offset, numel, element
// bytes, device]. offset and numel count elements.
struct EtTensor {
  std::uint64_t tensor_id = 0, storage_id = 0, offset = 0, numel = 0, elem_bytes = 0;
  std::uint32_t device = 0;  // index into EtTrace::devices
  bool written = false;      // an input whose schema argument is annotated as written ("Tensor(a!)")
};

// Per argument of an op schema "name(Type(a!) self, Tensor other, *, Scalar alpha=1) -> ...":
// whether its alias annotation marks it as written in place ('!'). The ET lists an op's inputs
// in schema argument order ("*" is no argument). Empty for an empty or unparsable schema.
std::vector<bool> written_arguments(const std::string& schema);

struct EtNode {
  std::int64_t id = 0;
  std::int64_t parent = -1;  // 1.0.1 "parent", chakra "ctrl_deps"; -1 = none
  std::int64_t rf_id = -1;   // -1 = not recorded
  std::int64_t tid = 0;
  std::int64_t scope = 0;   // RecordScope; 7 = USER_SCOPE (record_function ranges)
  bool has_schema = false;  // a non-empty op_schema: its '!' annotations say what is written
  std::uint32_t name = 0;   // index into EtTrace::names
  std::vector<EtTensor> inputs, outputs;
  std::size_t index = 0;   // position in "nodes"
  std::uint64_t line = 0;  // line of the node's opening brace
};

struct EtTrace {
  std::string schema;               // top-level "schema" ("" when absent)
  std::optional<std::int64_t> pid;  // top-level "pid"
  std::vector<std::string> names, devices;
  std::vector<EtNode> nodes;                       // sorted by id (= start order; the file is in end order)
  std::uint64_t flat_nodes = 0, chakra_nodes = 0;  // 1.0.1 layout / chakra (inputs as object)
};

// Streams an ET file (plain or gzip). Throws InputError("file:line: nodes[i] (id N): problem")
// on malformed input and on limits exceeded (max_input_bytes, max_events for nodes,
// max_op_fan_in for the tensors of one node's inputs or outputs, max_memory: each node's DOM
// while it is read, then per node kNodeBytes and per tensor value kTensorBytes, in `memory`).
EtTrace read_et(const std::string& path, const Limits& limits, MemoryCap& memory);
// Bytes counted per node and per tensor value of a node: twice the record (a vector's slack
// and regrowth copy) and what the conversion derives from it (the op's plan of about 160
// bytes, its trace op and events, a storage lifetime of about 48 bytes and the list entries
// that name it, the trace's tensor and its events). Names' text is counted where it is copied.
inline constexpr std::uint64_t kNodeBytes = 2 * sizeof(EtNode) + 160 + sizeof(OpInfo) + 2 * sizeof(TraceEvent) + 8;
inline constexpr std::uint64_t kTensorBytes =
    2 * sizeof(EtTensor) + 48 + 6 * sizeof(std::uint32_t) + sizeof(TensorInfo) + 2 * sizeof(TraceEvent);

// Record-function ranges and profiler structure nodes are not ops: USER_SCOPE nodes, names
// "[pytorch|profiler|...]", "## phase ##" and "Name#Class.method" (the Kineto importer's rule).
bool is_range(const EtTrace& et, const EtNode& n);

// ---- link (et_link.cpp) --------------------------------------------------------------------

struct Link {
  std::string method;                 // "rf_id" or "execution order"
  std::vector<std::uint32_t> kineto;  // per ET node: the Kineto op (Collected::ops index) or kNone
  std::uint64_t et_ops = 0, linked = 0, name_mismatches = 0, unmatched = 0;
  std::uint64_t ambiguous_offsets = 0;  // execution order: other equally good alignments
  std::string threads;                  // "ET tid 1 -> 24248/24248 at op 225; ..."
};

// Percentage of an ET's ops that may differ in name from the Kineto ops they align with (or be
// missing) before the pair is refused as not from the same run.
inline constexpr std::uint64_t kMismatchPercent = 5;

// Links ET op nodes to Kineto CPU ops (rules in et_link.cpp). Throws Error("ET: not from the
// same run as KINETO: reason") when the two traces cannot come from one run.
Link link_traces(const std::string& et_path, const EtTrace& et, const std::string& kineto_path,
                 const kineto_detail::Collected& c);

// ---- conversion (et_build.cpp) -------------------------------------------------------------

Trace build_linked_trace(const std::string& kineto_path, const KinetoOptions& options, kineto_detail::TopLevel top,
                         kineto_detail::Collected& c, const Limits& limits, MemoryCap& memory);

}  // namespace coopsim::et_detail
