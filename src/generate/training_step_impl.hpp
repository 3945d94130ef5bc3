// Internals of the synthetic training-step generator (include/coopsim/generate/generator.hpp), shared by
// src/generate/training_step*.cpp:
//   training_step_builder.cpp  definition primitives: tensors, ops with their roofline duration,
//                              parameters (gradient + optimizer states), gradient-producing ops
//   training_step_network.cpp  the network: parameters, forward, backward and optimizer ops
//   training_step.cpp          one iteration's schedule (allocs, then frees after last use),
//                              the prologue and the per-iteration replication
// Tensors and ops are numbered in definition order, and the duration jitter is drawn per op in
// definition order, so the order of the define calls is part of the output.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "coopsim/generate/generator.hpp"
#include "coopsim/model/trace.hpp"

namespace coopsim::gen_detail {

using Ids = std::vector<std::uint32_t>;

enum class Life : std::uint8_t {
  Persistent,  // allocated in the prologue, never freed
  LastUse,     // freed right after its last use in the iteration
  IterEnd,     // freed at the end of the iteration (parameter gradients)
};

class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1).
  double symmetric() { return static_cast<double>(next() >> 11) * 0x1.0p-52 - 1.0; }

 private:
  std::uint64_t state_;
};

// What an optimizer adds per parameter: its states and its in-place step op.
struct OptimizerSpec {
  const char* step_op;
  double flops_per_element;
  int n_states;
  std::array<const char*, 2> state_names;  // tensor name suffixes of the states
};

// `name` is a validated GeneratorOptions::optimizer.
inline const OptimizerSpec& optimizer_spec(const std::string& name) {
  static constexpr OptimizerSpec kSgd{"sgd_step_", 2, 0, {"", ""}};
  static constexpr OptimizerSpec kMomentum{"momentum_step_", 4, 1, {"momentum", ""}};
  static constexpr OptimizerSpec kAdam{"adam_step_", 12, 2, {"adam_m", "adam_v"}};
  return name == "sgd" ? kSgd : name == "momentum" ? kMomentum : kAdam;
}

struct Param {
  std::uint32_t tensor = kNoIndex;
  std::uint32_t grad = kNoIndex;
  std::uint32_t partial = kNoIndex;  // micro_batches > 1
  Ids states;
  std::uint32_t accumulate_op = kNoIndex;
  std::uint32_t step_op = kNoIndex;
};

// An op that produces parameter gradients: `first` writes the gradients, `acc` (micro-batches
// after the first) writes the partial gradients, then each accumulate op adds one in place.
struct GradOp {
  std::uint32_t first = kNoIndex;
  std::uint32_t acc = kNoIndex;
  Ids params;  // indices into Builder::params_
};

struct Layer {
  std::uint32_t x = kNoIndex;    // input of the layer (input batch or view of previous output)
  std::uint32_t pre = kNoIndex;  // linear / conv output (h or y)
  std::uint32_t act = kNoIndex;  // tensor relu_ mutates (h for mlp, z for cnn)
  std::uint32_t out = kNoIndex;  // base of the next layer's input (act, or dropout output)
  std::uint32_t mask = kNoIndex;
  // forward ops
  std::uint32_t op_main = kNoIndex, op_bias = kNoIndex, op_bn = kNoIndex, op_residual = kNoIndex, op_relu = kNoIndex,
                op_dropout = kNoIndex, op_view = kNoIndex;
  // backward
  std::uint32_t op_dropout_bwd = kNoIndex, op_relu_bwd = kNoIndex;
  GradOp bias_grad, bn_bwd, weight_grad;
  std::uint32_t op_input_grad = kNoIndex;  // l >= 2
  std::uint32_t grad_x = kNoIndex;         // gradient w.r.t. x (l >= 2)
  std::uint32_t grad_relu = kNoIndex;      // gradient after relu_backward
  Ids skip_accumulate_ops;                 // add_(grad_x, grad_relu of layer j) for skips from x
};

class Builder {
 public:
  explicit Builder(const GeneratorOptions& o) : o_(o), optimizer_(optimizer_spec(o.optimizer)), rng_(o.seed) {}

  Trace build();

 private:
  // ---- definitions (training_step_builder.cpp)
  std::uint32_t tensor(std::uint64_t bytes, TensorRole role, std::string name, Life life);
  std::uint32_t view(std::uint32_t base, std::string name);
  std::uint64_t bytes_of(std::uint32_t t) const { return tr_.tensors[tr_.storage_of(t)].size.value; }
  std::uint64_t elems(std::uint32_t t) const { return bytes_of(t) / dtype_; }
  // Op with a roofline duration (generator.hpp); `mutated` tensors are also inputs.
  std::uint32_t op(std::string name, Ids inputs, Ids outputs, Ids mutated, double flops, bool random = false);
  // Metadata-only op whose output is a view of its input (declared in OpInfo::views).
  std::uint32_t view_op(std::string name, std::uint32_t in, std::uint32_t out);
  std::uint32_t add_op(std::string name, Ids inputs, Ids outputs, Ids mutated, SimTime dur, bool random);
  // GEMM-class op (linear / conv and their backward ops): optional private workspace.
  std::uint32_t gemm_op(const std::string& name, const std::string& ws_name, Ids inputs, Ids outputs, double flops);
  std::uint32_t workspace(const std::string& name, const Ids& inputs, const Ids& outputs);
  // Parameter with its gradient(s) and optimizer states; returns its index in params_.
  std::uint32_t param(std::uint64_t elements, std::string name);
  // Op writing other outputs plus the gradients of `ps` (in that order).
  GradOp grad_op(const std::string& name, const std::string& ws_name, Ids inputs, Ids other_outputs, Ids ps,
                 double flops, bool gemm);

  // ---- the network (training_step_network.cpp)
  void define();

  // ---- schedule of one iteration (training_step.cpp; raw: allocs but no frees yet)
  void touch(std::uint32_t t);
  void alloc(std::uint32_t t);
  void compute(std::uint32_t op_id);
  void compute_if_defined(std::uint32_t op_id) {
    if (op_id != kNoIndex) compute(op_id);
  }
  void access(std::uint32_t t, bool write);
  void mark(std::uint32_t label) { raw_.push_back(TraceEvent::mark(label)); }
  void run(const GradOp& g, std::int64_t micro);

  void schedule_micro_batch(std::int64_t micro);
  std::vector<TraceEvent> finish_iteration();

  const GeneratorOptions& o_;
  const OptimizerSpec& optimizer_;
  SplitMix64 rng_;
  Trace tr_;
  std::uint64_t dtype_ = 4;
  bool cnn_ = true;
  std::vector<Life> life_;
  std::vector<Param> params_;
  std::vector<Layer> layers_;  // index 0 unused; layers 1..L
  // tensors / ops outside the layers
  std::uint32_t input_ = kNoIndex, labels_ = kNoIndex, pooled_ = kNoIndex, flat_ = kNoIndex, logits_ = kNoIndex,
                loss_ = kNoIndex, log_softmax_ = kNoIndex, grad_logits_ = kNoIndex, grad_head_in_ = kNoIndex,
                grad_top_ = kNoIndex;
  std::uint32_t op_pool_ = kNoIndex, op_flatten_ = kNoIndex, op_head_ = kNoIndex, op_head_bias_ = kNoIndex,
                op_loss_ = kNoIndex, op_loss_bwd_ = kNoIndex, op_head_input_grad_ = kNoIndex, op_pool_bwd_ = kNoIndex;
  GradOp head_weight_grad_, head_bias_grad_;
  std::uint32_t label_forward_ = 0, label_backward_ = 1, label_optimizer_ = 2;

  struct Lifetime {
    std::uint32_t tensor;
    std::uint32_t alloc;  // raw position of the Alloc
    std::uint32_t last;   // raw position of the last use
    Life life;
  };
  std::vector<TraceEvent> raw_;
  std::vector<Lifetime> lifetimes_;
  Ids open_;  // per tensor: open lifetime or kNoIndex
};

}  // namespace coopsim::gen_detail
