// Synthetic training-step trace: one iteration's schedule with automatic alloc-before-first-write
// and free-after-last-use, then the schedule replicated per iteration after a prologue that
// allocates and initialises the persistent tensors. The tensor/op definitions are in
// training_step_network.cpp; see generator.hpp for the network, allocation rules and durations.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "coopsim/base/error.hpp"
#include "coopsim/generate/generator.hpp"
#include "training_step_impl.hpp"

namespace coopsim {

namespace gen_detail {

// Largest trace built (events); 32 bytes each in memory.
constexpr std::uint64_t kMaxEvents = 400'000'000;

void Builder::touch(std::uint32_t t) {
  const auto s = tr_.storage_of(t);
  if (life_[s] == Life::Persistent) return;
  if (open_[s] == kNoIndex) {
    throw std::logic_error("generator: " + tr_.tensors[s].name + " used before allocation");
  }
  lifetimes_[open_[s]].last = static_cast<std::uint32_t>(raw_.size() - 1);
}

// Every non-view op output starts a new lifetime (the previous one, if any, ended earlier).
void Builder::alloc(std::uint32_t t) {
  if (open_[t] != kNoIndex && lifetimes_[open_[t]].life == Life::IterEnd) {
    throw std::logic_error("generator: " + tr_.tensors[t].name + " rewritten before iteration end");
  }
  raw_.push_back(TraceEvent::alloc(TensorId{t}));
  const auto pos = static_cast<std::uint32_t>(raw_.size() - 1);
  open_[t] = static_cast<std::uint32_t>(lifetimes_.size());
  lifetimes_.push_back({t, pos, pos, life_[t]});
}

void Builder::compute(std::uint32_t op_id) {
  const auto& op = tr_.ops[op_id];
  for (auto in : op.inputs) {  // inputs must be live before the op's outputs are allocated
    const auto s = tr_.storage_of(index_of(in));
    if (life_[s] != Life::Persistent && open_[s] == kNoIndex) {
      throw std::logic_error("generator: " + tr_.tensors[s].name + " read before allocation");
    }
  }
  for (auto out : op.outputs) {
    const auto t = index_of(out);
    if (tr_.tensors[t].is_view()) continue;
    alloc(t);
  }
  raw_.push_back(TraceEvent::compute(OpId{op_id}));
  for (auto in : op.inputs) touch(index_of(in));
  for (auto out : op.outputs) touch(index_of(out));
}

void Builder::access(std::uint32_t t, bool write) {
  raw_.push_back(TraceEvent::access(TensorId{t}, write));
  touch(t);
}

void Builder::run(const GradOp& g, std::int64_t micro) {
  if (micro == 0) {
    compute(g.first);
    return;
  }
  compute(g.acc);
  for (auto p : g.params) compute(params_[p].accumulate_op);
}

void Builder::schedule_micro_batch(std::int64_t micro) {
  const auto L = static_cast<std::size_t>(o_.layers);
  mark(label_forward_);
  alloc(input_);
  access(input_, true);  // host-to-device copy of the batch
  alloc(labels_);
  access(labels_, true);
  for (std::size_t j = 1; j <= L; ++j) {
    const Layer& ly = layers_[j];
    for (auto id : {ly.op_main, ly.op_bias, ly.op_bn, ly.op_residual, ly.op_relu, ly.op_dropout, ly.op_view}) {
      compute_if_defined(id);
    }
  }
  for (auto id : {op_pool_, op_flatten_, op_head_, op_head_bias_, op_loss_}) compute_if_defined(id);
  mark(label_backward_);
  compute(op_loss_bwd_);
  run(head_bias_grad_, micro);
  run(head_weight_grad_, micro);
  compute(op_head_input_grad_);
  compute_if_defined(op_pool_bwd_);
  for (std::size_t j = L; j >= 1; --j) {
    const Layer& ly = layers_[j];
    if (j < L) {
      for (auto id : layers_[j + 1].skip_accumulate_ops) compute(id);
    }
    compute_if_defined(ly.op_dropout_bwd);
    compute(ly.op_relu_bwd);
    if (cnn_) {
      run(ly.bn_bwd, micro);
    } else {
      run(ly.bias_grad, micro);
    }
    run(ly.weight_grad, micro);
    compute_if_defined(ly.op_input_grad);
  }
  access(loss_, false);  // loss.item()
}

// Inserts the frees into the raw schedule: LastUse lifetimes right after the event of their last
// use (in the order of the op's inputs then outputs), IterEnd lifetimes at the end.
std::vector<TraceEvent> Builder::finish_iteration() {
  std::vector<TraceEvent> out;
  out.reserve(raw_.size() + lifetimes_.size() + 1);
  Ids current(tr_.tensors.size(), kNoIndex);
  std::vector<bool> freed(lifetimes_.size(), false);
  std::uint32_t next = 0;
  auto maybe_free = [&](std::uint32_t t, std::uint32_t pos) {
    const auto s = tr_.storage_of(t);
    if (life_[s] == Life::Persistent) return;
    const auto lt = current[s];
    if (lifetimes_[lt].life == Life::LastUse && lifetimes_[lt].last == pos && !freed[lt]) {
      freed[lt] = true;
      out.push_back(TraceEvent::free(TensorId{s}));
    }
  };
  for (std::uint32_t i = 0; i < raw_.size(); ++i) {
    const TraceEvent& e = raw_[i];
    out.push_back(e);
    switch (e.kind) {
      case EventKind::Alloc: current[index_of(e.tensor())] = next++; break;
      case EventKind::Compute: {
        const auto& op = tr_.op(e.compute_op());
        for (auto t : op.inputs) maybe_free(index_of(t), i);
        for (auto t : op.outputs) maybe_free(index_of(t), i);
        break;
      }
      case EventKind::Access: maybe_free(index_of(e.tensor()), i); break;
      default: break;
    }
  }
  for (std::uint32_t lt = 0; lt < lifetimes_.size(); ++lt) {
    if (lifetimes_[lt].life == Life::IterEnd) {
      freed[lt] = true;
      out.push_back(TraceEvent::free(TensorId{lifetimes_[lt].tensor}));
    }
  }
  if (std::find(freed.begin(), freed.end(), false) != freed.end()) {
    throw std::logic_error("generator: a per-iteration tensor is never freed");
  }
  return out;
}

Trace Builder::build() {
  cnn_ = o_.model == "cnn";
  dtype_ = static_cast<std::uint64_t>(o_.dtype_bytes);
  tr_.header.model = generator_model_name(o_);
  tr_.header.source = {{"tool", "coopsim generate"}, {"options", generator_options_json(o_)}};
  tr_.header.time_unit = "ns";
  tr_.header.iterations = static_cast<std::uint32_t>(o_.iterations);
  tr_.header.extra = nlohmann::json::object();  // as the loader produces it
  tr_.labels = {"forward", "backward", "optimizer"};

  define();

  // One iteration.
  open_.assign(tr_.tensors.size(), kNoIndex);
  for (std::int64_t m = 0; m < o_.micro_batches; ++m) schedule_micro_batch(m);
  mark(label_optimizer_);
  for (const auto& p : params_) compute(p.step_op);
  const std::vector<TraceEvent> iteration = finish_iteration();
  raw_ = {};
  lifetimes_ = {};

  // Prologue: persistent tensors allocated and initialised.
  std::uint64_t persistent = 0;
  for (auto l : life_) persistent += l == Life::Persistent ? 1 : 0;
  const std::uint64_t per_iter = iteration.size() + 1;
  const auto n = static_cast<std::uint64_t>(o_.iterations);
  const std::uint64_t total = 2 * persistent + per_iter * n;
  if (per_iter > kMaxEvents || total > kMaxEvents) {
    throw ConfigError(std::string(kGeneratorComponent) + (per_iter > kMaxEvents ? ".layers" : ".iterations"),
                      fmt::format("trace would have {} events (limit {})", total, kMaxEvents));
  }
  tr_.events.reserve(total);
  for (std::uint32_t t = 0; t < tr_.tensors.size(); ++t) {
    if (life_[t] != Life::Persistent || tr_.tensors[t].is_view()) continue;
    tr_.events.push_back(TraceEvent::alloc(TensorId{t}));
    tr_.events.push_back(TraceEvent::access(TensorId{t}, /*write=*/true));
  }
  for (std::uint64_t it = 0; it < n; ++it) {
    tr_.events.push_back(TraceEvent::iteration(static_cast<std::uint32_t>(it)));
    tr_.events.insert(tr_.events.end(), iteration.begin(), iteration.end());
  }
  return std::move(tr_);
}

}  // namespace gen_detail

Trace generate_training_trace(const GeneratorOptions& o) {
  validate_generator_options(o);
  return gen_detail::Builder(o).build();
}

}  // namespace coopsim
