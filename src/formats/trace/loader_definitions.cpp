// Trace v1 loader: tensor and op definitions, including view declarations (see loader.hpp).
#include "loader.hpp"

#include <algorithm>

namespace coopsim::trace_detail {

void Loader::on_tensor() {
  const std::uint64_t id = req_u64(kId);
  if (trace_.tensors.size() >= limits_.max_tensors) fail(limit_problem(limits_.max_tensors, "tensors", "max_tensors"));
  if (const std::uint32_t prev = tensor_ids_.find(id); prev != kNoIndex) {
    fail(fmt::format("duplicate tensor id {} (first defined at line {})", id, tensor_def_line_[prev]));
  }
  auto prefix = [id] { return fmt::format("tensor {}", id); };
  const JValue* bytes = slot_[kBytes];
  if (bytes == nullptr) missing(prefix(), kBytes);
  std::uint64_t size = 0;
  if (!as_u64(*bytes, size) || size > trace_detail::kMaxTensorBytes) {
    bad(prefix(), kBytes, "an integer in [0, 2^53]", *bytes);
  }
  TensorInfo t;
  if (const JValue* role = slot_[kRole]) {
    const auto r = role->type == JType::String ? parse_role(role->text) : std::nullopt;
    if (!r) {
      bad(prefix(), kRole, "one of parameter, input, activation, gradient, optimizer_state, workspace, other", *role);
    }
    t.role = *r;
  }
  if (const JValue* name = slot_[kName]) {
    if (name->type != JType::String) bad(prefix(), kName, "a string", *name);
    t.name = std::string(name->text);
  }
  if (trace_.tensors.size() >= kNoIndex - 1) fail("too many tensors (at most 4294967294)");
  room_to_append(trace_.tensors);
  hold(memory_cost::tensor(t) + kTensorState);
  const auto idx = static_cast<std::uint32_t>(trace_.tensors.size());
  t.id = TensorId{idx};
  t.file_id = id;
  t.size = Bytes{size};
  trace_.tensors.push_back(std::move(t));
  tensor_ids_.insert(id, idx);
  tensor_def_line_.push_back(line_);
  life_.emplace_back();
  is_base_.push_back(0);
}

// Reads an optional array of defined tensor ids.
void Loader::tensor_list(Key k, std::uint64_t op_id, std::vector<TensorId>& out) const {
  const JValue* v = slot_[k];
  if (v == nullptr) return;
  if (v->type != JType::Array) bad(fmt::format("op {}", op_id), k, "an array of tensor ids", *v);
  if (v->count > limits_.max_op_fan_in) {
    fail(fmt::format("op {}: field '{}': {}", op_id, key_name(k),
                     limit_problem(limits_.max_op_fan_in, "tensors", "max_op_fan_in")));
  }
  out.reserve(v->count);
  for (std::uint32_t i = 0; i < v->count; ++i) {
    const JValue& el = element(v->first + i);
    std::uint64_t id = 0;
    if (!as_u64(el, id)) {
      fail(fmt::format("op {}: field '{}' must be an array of tensor ids (element {} is {})", op_id, key_name(k), i,
                       describe(el)));
    }
    const std::uint32_t idx = tensor_ids_.find(id);
    if (idx == kNoIndex) fail(fmt::format("op {}: {} refers to undefined tensor {}", op_id, key_name(k), id));
    out.push_back(TensorId{idx});
  }
}

void Loader::on_op() {
  const std::uint64_t id = req_u64(kId);
  if (const std::uint32_t prev = op_ids_.find(id); prev != kNoIndex) {
    fail(fmt::format("duplicate op id {} (first defined at line {})", id, op_def_line_[prev]));
  }
  auto prefix = [id] { return fmt::format("op {}", id); };  // for errors only
  OpInfo op;
  op.file_id = id;
  if (const JValue* name = slot_[kName]) {
    if (name->type != JType::String) bad(prefix(), kName, "a string", *name);
    op.name = std::string(name->text);
  }
  if (const JValue* d = slot_[kDuration]) op.duration = SimTime{read_time(*d, prefix, kDuration)};
  tensor_list(kInputs, id, op.inputs);
  tensor_list(kOutputs, id, op.outputs);
  tensor_list(kMutates, id, op.mutated);
  mark_op_tensors(op);
  for (const TensorId m : op.mutated) {
    if (in_mark_[index_of(m)] != op_epoch_) {
      fail(fmt::format("op {}: mutates tensor {}, which is not an input of the op", id,
                       trace_.tensors[index_of(m)].file_id));
    }
  }
  write_self_references_in_place(op);
  if (const JValue* views = slot_[kViews]) {
    constexpr std::string_view kWhat = "an array of [output, input] tensor id pairs";
    if (views->type != JType::Array) bad(prefix(), kViews, kWhat, *views);
    if (views->count > limits_.max_op_fan_in) {
      fail(fmt::format("op {}: field 'views': {}", id, limit_problem(limits_.max_op_fan_in, "pairs", "max_op_fan_in")));
    }
    for (std::uint32_t i = 0; i < views->count; ++i) {
      const JValue& pair = element(views->first + i);
      std::uint64_t out_id = 0, in_id = 0;
      if (pair.type != JType::Array || pair.count != 2 || !as_u64(element(pair.first), out_id) ||
          !as_u64(element(pair.first + 1), in_id)) {
        fail(fmt::format("op {}: field 'views' must be {} (element {} is {})", id, kWhat, i,
                         pair.type == JType::Array ? std::string(pair.text) : describe(pair)));
      }
      const std::uint32_t out = tensor_ids_.find(out_id), in = tensor_ids_.find(in_id);
      if (out == kNoIndex) fail(fmt::format("op {}: views refers to undefined tensor {}", id, out_id));
      if (in == kNoIndex) fail(fmt::format("op {}: views refers to undefined tensor {}", id, in_id));
      add_view(op, id, out, in, out_id, in_id);
    }
  }
  if (const JValue* r = slot_[kRandom]) {
    if (r->type != JType::Bool) bad(prefix(), kRandom, "true or false", *r);
    op.random = r->boolean;
  }
  if (trace_.ops.size() >= kNoIndex - 1) fail("too many ops (at most 4294967294)");
  room_to_append(trace_.ops);
  hold(memory_cost::op(op) + kIdBytes);
  const auto idx = static_cast<std::uint32_t>(trace_.ops.size());
  op.id = OpId{idx};
  trace_.ops.push_back(std::move(op));
  op_ids_.insert(id, idx);
  op_def_line_.push_back(line_);
}

void Loader::mark_op_tensors(const OpInfo& op) {
  if (in_mark_.size() < trace_.tensors.size()) {
    in_mark_.resize(trace_.tensors.size(), 0);
    out_mark_.resize(trace_.tensors.size(), 0);
  }
  if (++op_epoch_ == 0) {  // wrapped: forget every old mark
    std::fill(in_mark_.begin(), in_mark_.end(), 0);
    std::fill(out_mark_.begin(), out_mark_.end(), 0);
    op_epoch_ = 1;
  }
  for (const TensorId t : op.inputs) in_mark_[index_of(t)] = op_epoch_;
  for (const TensorId t : op.outputs) out_mark_[index_of(t)] = op_epoch_;
}

// docs/trace-format.md §4.2: a tensor listed twice among the outputs is one output, and an output
// that is also an input is written in place, exactly as if it were listed in `mutates`. Every
// policy then sees one shape for an in-place write (the old value is the input, the new one the
// output at the same storage), never a value that is its own producer's input.
void Loader::write_self_references_in_place(OpInfo& op) {
  // The outputs are compacted in place (first occurrences kept, in order). An output that is
  // also an input joins `mutated` unless listed there already: only the listed ones (the first
  // `listed` entries) are searched, and most ops write nothing in place.
  const auto listed = static_cast<std::ptrdiff_t>(op.mutated.size());
  std::vector<TensorId> sorted;  // the listed ones, sorted, when there are many (bounded work)
  constexpr std::ptrdiff_t kLinear = 8;
  if (listed > kLinear) {
    sorted.assign(op.mutated.begin(), op.mutated.end());
    std::sort(sorted.begin(), sorted.end());
  }
  auto is_listed = [&](TensorId t) {
    return listed > kLinear
               ? std::binary_search(sorted.begin(), sorted.end(), t)
               : std::find(op.mutated.begin(), op.mutated.begin() + listed, t) != op.mutated.begin() + listed;
  };
  std::size_t kept = 0;
  for (std::size_t i = 0; i < op.outputs.size(); ++i) {
    const TensorId t = op.outputs[i];
    std::uint32_t& mark = out_mark_[index_of(t)];
    if (mark == 0) continue;  // already kept: a duplicate
    mark = 0;
    op.outputs[kept++] = t;
    if (in_mark_[index_of(t)] == op_epoch_ && !is_listed(t)) op.mutated.push_back(t);
  }
  op.outputs.resize(kept);
  for (const TensorId t : op.outputs) out_mark_[index_of(t)] = op_epoch_;
}

void Loader::add_view(OpInfo& op, std::uint64_t op_id, std::uint32_t out, std::uint32_t in, std::uint64_t out_id,
                      std::uint64_t in_id) {
  auto pair_fail = [&](const std::string& why) {
    fail(fmt::format("op {}: view pair [{}, {}]: {}", op_id, out_id, in_id, why));
  };
  if (out_mark_[out] != op_epoch_) pair_fail(fmt::format("tensor {} is not an output of the op", out_id));
  if (in_mark_[in] != op_epoch_) pair_fail(fmt::format("tensor {} is not an input of the op", in_id));
  const std::uint32_t root = trace_.storage_of(in);
  TensorInfo& t = trace_.tensors[out];
  if (root == out) pair_fail(fmt::format("tensor {} would become a view of itself", out_id));
  if (life_[out].state != State::Never) {
    pair_fail(fmt::format("tensor {} was already allocated (line {})", out_id, life_[out].alloc_line));
  }
  if (t.is_view() && t.view_of != TensorId{root}) {
    pair_fail(fmt::format("tensor {} is already a view of tensor {}", out_id, trace_.tensor(t.view_of).file_id));
  }
  if (is_base_[out] != 0) pair_fail(fmt::format("tensor {} is the base of other views", out_id));
  t.view_of = TensorId{root};
  t.size = Bytes{0};
  is_base_[root] = 1;
  op.views.emplace_back(TensorId{out}, TensorId{in});
}

}  // namespace coopsim::trace_detail
