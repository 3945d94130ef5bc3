// Trace v1 loader: events (alloc, free, access, compute, iteration, mark) and the lifetime
// checks they imply (see loader.hpp).
#include "loader.hpp"

namespace coopsim::trace_detail {

void Loader::on_alloc() {
  const std::uint64_t id = req_u64(kTensor);
  const std::uint32_t idx = tensor_ref(id, "alloc");
  TraceEvent e = TraceEvent::alloc(TensorId{idx});
  if (const JValue* a = slot_[kAddr]) {
    if (!as_u64(*a, e.addr)) bad(record_prefix(), kAddr, "a non-negative integer", *a);
  }
  read_t_stream(e);
  const TensorInfo& t = trace_.tensors[idx];
  if (t.is_view()) {
    fail(fmt::format("alloc of view tensor {} (views share the storage of tensor {})", id,
                     trace_.tensor(t.view_of).file_id));
  }
  if (t.size.value == 0) fail(fmt::format("alloc of tensor {} with 0 bytes (only views may have 0 bytes)", id));
  Life& life = life_[idx];
  if (life.state == State::Live) {
    fail(fmt::format("alloc of tensor {}, which is already live (allocated at line {})", id, life.alloc_line));
  }
  life.state = State::Live;
  life.alloc_line = line_;
  push_event(e);
}

void Loader::on_free() {
  const std::uint64_t id = req_u64(kTensor);
  const std::uint32_t idx = tensor_ref(id, "free");
  TraceEvent e = TraceEvent::free(TensorId{idx});
  read_t_stream(e);
  const TensorInfo& t = trace_.tensors[idx];
  if (t.is_view()) {
    fail(fmt::format("free of view tensor {} (views share the storage of tensor {})", id,
                     trace_.tensor(t.view_of).file_id));
  }
  Life& life = life_[idx];
  if (life.state == State::Never) fail(fmt::format("free of tensor {}, which was never allocated", id));
  if (life.state == State::Freed) {
    fail(fmt::format("double free of tensor {} (already freed at line {})", id, life.free_line));
  }
  life.state = State::Freed;
  life.free_line = line_;
  push_event(e);
}

template <typename Describe>
void Loader::check_live(std::uint32_t idx, Describe&& what) const {
  const std::uint32_t root = trace_.storage_of(idx);
  const Life& life = life_[root];
  if (life.state == State::Live) return;
  const std::string via =
      trace_.tensors[idx].is_view() ? fmt::format("view of tensor {}", trace_.tensors[root].file_id) : "";
  if (life.state == State::Never) {
    fail(fmt::format("use before allocation: {}{}", what(), via.empty() ? "" : " (" + via + ")"));
  }
  fail(fmt::format("use after free: {} ({}freed at line {})", what(), via.empty() ? "" : via + ", ", life.free_line));
}

void Loader::on_access() {
  const std::uint64_t id = req_u64(kTensor);
  const std::uint32_t idx = tensor_ref(id, "access");
  const JValue* mode = slot_[kMode];
  if (mode == nullptr) missing(record_prefix(), kMode);
  const bool write = mode->type == JType::String && mode->text == "write";
  if (!write && !(mode->type == JType::String && mode->text == "read")) {
    bad(record_prefix(), kMode, "'read' or 'write'", *mode);
  }
  std::optional<OpId> by;
  if (slot_[kOp] != nullptr) {
    const std::uint64_t op_id = req_u64(kOp);
    const std::uint32_t op = op_ids_.find(op_id);
    if (op == kNoIndex) fail(fmt::format("access by undefined op {}", op_id));
    by = OpId{op};
  }
  TraceEvent e = TraceEvent::access(TensorId{idx}, write, by);
  read_t_stream(e);
  check_live(idx, [&] { return fmt::format("access of tensor {}", id); });
  push_event(e);
}

void Loader::on_compute() {
  const std::uint64_t id = req_u64(kOp);
  const std::uint32_t idx = op_ids_.find(id);
  if (idx == kNoIndex) fail(fmt::format("compute of undefined op {}", id));
  TraceEvent e = TraceEvent::compute(OpId{idx});
  read_t_stream(e);
  const OpInfo& op = trace_.ops[idx];
  for (const TensorId t : op.inputs) {
    check_live(index_of(t), [&] {
      return fmt::format("compute of op {} reads tensor {}", id, trace_.tensors[index_of(t)].file_id);
    });
  }
  for (const TensorId t : op.outputs) {
    check_live(index_of(t), [&] {
      return fmt::format("compute of op {} writes tensor {}", id, trace_.tensors[index_of(t)].file_id);
    });
  }
  push_event(e);
}

void Loader::on_iteration() {
  const std::uint64_t index = req_u64(kIndex);
  // The index pushed is the one expected (checked below, after the timestamp).
  TraceEvent e = TraceEvent::iteration(static_cast<std::uint32_t>(iterations_seen_));
  read_t_stream(e);
  if (index != iterations_seen_) {
    fail(fmt::format("iteration index {} out of order (expected {})", index, iterations_seen_));
  }
  if (index >= trace_.header.iterations) {
    fail(fmt::format("iteration index {} exceeds the {} iterations declared in the header", index,
                     trace_.header.iterations));
  }
  ++iterations_seen_;
  push_event(e);
}

void Loader::on_mark() {
  const JValue* label = slot_[kLabel];
  if (label == nullptr) missing(record_prefix(), kLabel);
  if (label->type != JType::String) bad(record_prefix(), kLabel, "a string", *label);
  // A new label gets the next index; it is stored after the timestamp is checked.
  const auto it = label_index_.find(label->text);
  const bool known = it != label_index_.end();
  const auto index = known ? it->second : static_cast<std::uint32_t>(trace_.labels.size());
  TraceEvent e = TraceEvent::mark(index);
  read_t_stream(e);
  if (!known) {
    hold(2 * memory_cost::label(label->text) + kMapNode);  // the label and its index entry
    label_index_.emplace(std::string(label->text), index);
    trace_.labels.emplace_back(label->text);
  }
  push_event(e);
}

}  // namespace coopsim::trace_detail
