// The plan of one simulated run, as replayed by the CUDA backend (`coopsim replay-gpu`): every
// physical step the engine took, in order, with the arena offset, size and content version of
// every tensor it touches and explicit cross-stream dependencies. Format: docs/plan-format.md.
//
// A plan is built from the run's event log (plan_from_runlog), written as JSON (plan_to_text),
// read back with every key and type checked (parse_plan / load_plan) and checked for physical
// soundness (check_plan): contents and versions, arena and budget, overlap, swaps, frees, and
// that the `after` lists order every conflicting pair of steps on different streams.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "coopsim/base/error.hpp"
#include "coopsim/base/limits.hpp"
#include "coopsim/base/units.hpp"

namespace coopsim {
struct Trace;
struct RunLog;
struct Report;
struct LinkModel;
}  // namespace coopsim

namespace coopsim::gpu {

inline constexpr std::string_view kPlanFormat = "coopsim-plan";
inline constexpr int kPlanVersion = 1;
// A step of a plan: its index in Plan::steps.
enum class StepId : std::uint32_t {};
constexpr std::uint32_t index_of(StepId id) { return static_cast<std::uint32_t>(id); }
inline constexpr StepId kNoStep{0xffffffffU};

enum class StepKind : std::uint8_t { Alloc, Free, Evict, Op, Recompute, Access, SwapOut, SwapIn };
// Compute runs ops, recomputes, accesses and the alloc/free/evict markers; DeviceToHost the
// swap-outs; HostToDevice the swap-ins. Index = position in per-stream arrays.
enum class Stream : std::uint8_t { Compute = 0, DeviceToHost = 1, HostToDevice = 2 };
inline constexpr std::size_t kStreams = 3;

std::string_view to_string(StepKind k);
std::string_view to_string(Stream s);
std::optional<StepKind> parse_step_kind(std::string_view s);
std::optional<Stream> parse_stream(std::string_view s);
Stream stream_of(StepKind k);  // the only stream a step of this kind may run on

// One tensor content in one arena block.
struct PlanRef {
  TensorId tensor{0};         // PlanTensor::id (the storage's trace tensor)
  std::uint32_t version = 0;  // content version (runlog.hpp's contents model)
  std::uint64_t offset = 0;   // arena offset of the block
  Bytes size;                 // block size
  friend bool operator==(const PlanRef&, const PlanRef&) = default;
};

struct PlanStep {
  StepKind kind = StepKind::Op;
  Stream stream = Stream::Compute;
  std::vector<StepId> after;  // earlier steps (other streams) that must complete first
  SimTime start{0}, end{0};   // simulated; markers have start == end
  // alloc, free, evict, access, swap_out, swap_in: the block (version unused by alloc/free)
  PlanRef block;
  bool fresh = false;                  // alloc: the trace's own allocation (else the engine's: swap-in target, ...)
  bool fill = false;                   // alloc: the block starts holding version 0 (the replay writes its pattern)
  bool forced = false;                 // evict: chosen by the policy (else eager)
  Bytes bytes;                         // swap_out, swap_in: bytes copied (the tensor's size)
  OpId op = kNoOp;                     // op, recompute: PlanOp::id
  StepId origin = kNoStep;             // recompute: the op step it repeats
  std::vector<PlanRef> reads, writes;  // op, recompute
  friend bool operator==(const PlanStep&, const PlanStep&) = default;
};

struct PlanTensor {
  TensorId id{0};
  std::uint64_t file_id = 0;
  Bytes size;
  std::string name;
  friend bool operator==(const PlanTensor&, const PlanTensor&) = default;
};

struct PlanOp {
  OpId id{0};
  std::uint64_t file_id = 0;
  std::string name;
  SimTime duration{0};
  friend bool operator==(const PlanOp&, const PlanOp&) = default;
};

struct PlanLink {
  std::string name;
  double d2h_ns_per_byte = 0.0, h2d_ns_per_byte = 0.0;
  SimTime d2h_latency{0}, h2d_latency{0};
  bool serial = true;
  friend bool operator==(const PlanLink&, const PlanLink&) = default;
};

struct PlanHeader {
  std::string coopsim_version;
  std::string trace_path, model;
  std::uint64_t trace_hash = 0;
  std::uint32_t iterations = 1;
  std::string allocator, policy;
  Bytes budget, arena_size;
  std::uint64_t address_base = 0;  // simulated address of arena offset 0
  PlanLink link;
  SimTime simulated_time{0}, stall_time{0}, op_time{0}, recompute_time{0};
  friend bool operator==(const PlanHeader&, const PlanHeader&) = default;
};

struct Plan {
  PlanHeader header;
  std::vector<PlanTensor> tensors;  // ascending id
  std::vector<PlanOp> ops;          // ascending id
  std::vector<PlanStep> steps;      // issue order; step id = index
  [[nodiscard]] const PlanTensor* tensor(TensorId id) const;
  [[nodiscard]] const PlanOp* op(OpId id) const;
  [[nodiscard]] const PlanStep& step(StepId id) const { return steps[index_of(id)]; }
  friend bool operator==(const Plan&, const Plan&) = default;
};

// "file: path: problem", e.g. "a.plan.json: steps[3].offset: expected an unsigned integer"
// ("file: problem" for the top level).
class PlanError : public Error {
 public:
  PlanError(const std::string& file, const std::string& path, const std::string& problem);
};

// "steps[12] (op 'relu')", "steps[4] (swap_in of tensor 7 'x')": how errors and reports name a step.
std::string describe_step(const Plan& plan, StepId id);

// The plan of a completed run (`link`: the run's link model). Throws Error when the run cannot
// be replayed on one arena: it did not complete, the allocator is address-blind, or its blocks
// do not fit in one arena of the budget.
Plan plan_from_runlog(const Trace& trace, const RunLog& log, const Report& report, const LinkModel& link);

// JSON text: header keys one per line, one step per line; deterministic.
std::string plan_to_text(const Plan& plan);

// Reads a plan with every key and type checked; `file` names it in errors. Syntax errors are
// InputError ("file:line: problem"), everything else PlanError. The text, its JSON document
// and the plan must fit in limits.max_memory (counted before the document is built: "file:
// more than N bytes of memory (limits.max_memory)").
Plan parse_plan(const std::string& text, const std::string& file, const Limits& limits = {});
// Reads the file (at most limits.max_input_bytes), parses it and (unless `check` is false)
// runs check_plan.
Plan load_plan(const std::string& path, bool check = true, const Limits& limits = {});

// Physical soundness; throws PlanError("file", "steps[N]", ...) naming the first bad step.
void check_plan(const Plan& plan, const std::string& file);

}  // namespace coopsim::gpu
