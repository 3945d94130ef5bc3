// Builds small in-memory traces for tests without going through the file format.
#pragma once

#include <string>
#include <vector>

#include "coopsim/model/trace.hpp"

namespace coopsim::test {

class TraceBuilder {
 public:
  explicit TraceBuilder(std::string model = "test") {
    trace_.path = "<builder>";
    trace_.header.model = std::move(model);
  }

  std::uint32_t tensor(std::uint64_t bytes, TensorRole role = TensorRole::Activation, std::string name = "") {
    TensorInfo t;
    t.id = TensorId{static_cast<std::uint32_t>(trace_.tensors.size())};
    t.file_id = trace_.tensors.size();
    t.size = Bytes{bytes};
    t.role = role;
    t.name = std::move(name);
    trace_.tensors.push_back(t);
    return index_of(t.id);
  }
  std::uint32_t view(std::uint32_t base) {
    const std::uint32_t v = tensor(0);
    trace_.tensors[v].view_of = TensorId{trace_.storage_of(base)};
    return v;
  }
  std::uint32_t op(std::string name, std::int64_t duration_ns, std::vector<std::uint32_t> in,
                   std::vector<std::uint32_t> out) {
    OpInfo o;
    o.id = OpId{static_cast<std::uint32_t>(trace_.ops.size())};
    o.file_id = trace_.ops.size();
    o.name = std::move(name);
    o.duration = SimTime{duration_ns};
    for (auto i : in) o.inputs.push_back(TensorId{i});
    for (auto i : out) o.outputs.push_back(TensorId{i});
    trace_.ops.push_back(o);
    return index_of(o.id);
  }
  // Declares `t` as written in place by `op` (it must be one of the op's inputs).
  TraceBuilder& mutates(std::uint32_t op, std::uint32_t t) {
    trace_.ops[op].mutated.push_back(TensorId{t});
    return *this;
  }
  TraceBuilder& random(std::uint32_t op) {
    trace_.ops[op].random = true;
    return *this;
  }
  // Times in ns; kUntimed: the event carries no timestamp.
  static constexpr std::int64_t kUntimed = TraceEvent::kNotRecorded.count();
  TraceBuilder& alloc(std::uint32_t t, std::int64_t time = kUntimed) {
    return ev(TraceEvent::alloc(TensorId{t}), time);
  }
  TraceBuilder& free(std::uint32_t t, std::int64_t time = kUntimed) { return ev(TraceEvent::free(TensorId{t}), time); }
  TraceBuilder& compute(std::uint32_t op, std::int64_t time = kUntimed) {
    return ev(TraceEvent::compute(OpId{op}), time);
  }
  TraceBuilder& access(std::uint32_t t, bool write = false) {
    return ev(TraceEvent::access(TensorId{t}, write), kUntimed);
  }
  TraceBuilder& iteration(std::uint32_t i) {
    trace_.header.iterations = i + 1;
    return ev(TraceEvent::iteration(i), kUntimed);
  }
  [[nodiscard]] const Trace& trace() const { return trace_; }
  Trace& mutable_trace() { return trace_; }

 private:
  TraceBuilder& ev(TraceEvent e, std::int64_t time) {
    e.time = SimTime{time};
    trace_.events.push_back(e);
    return *this;
  }
  Trace trace_;
};

// The index an event is about, whatever its kind (tensor, op, iteration or label), for tests
// that print events.
inline std::uint32_t subject_index(const TraceEvent& e) {
  switch (e.kind) {
    case EventKind::Alloc:
    case EventKind::Free:
    case EventKind::Access: return index_of(e.tensor());
    case EventKind::Compute: return index_of(e.compute_op());
    case EventKind::Iteration: return e.iteration_index();
    case EventKind::Mark: return e.label_index();
  }
  return kNoIndex;
}

}  // namespace coopsim::test
