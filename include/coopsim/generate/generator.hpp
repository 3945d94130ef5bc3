// Synthetic training-step trace generator (`coopsim generate`).
//
// Produces a deterministic coopsim trace (trace.hpp) of N training iterations of an MLP- or
// CNN-like network: forward pass, loss, backward pass, optimizer step. One set of tensor and op
// definitions serves every iteration; per-iteration tensors are allocated and freed again in
// each iteration, parameters, optimizer states and BN running statistics are allocated (and
// initialised with an Access write) once before iteration 0 and never freed.
//
// Network (layers j = 1..L, x_1 = input batch, x_{j+1} = view of layer j's output):
//   mlp layer: linear(x_j, W_j) -> h_j; bias_add_(h_j, b_j); [add_(h_j, x_{j-k+1})]; relu_(h_j);
//              [dropout(h_j) -> (d_j, mask_j)]; view -> x_{j+1}
//   cnn layer: conv2d(x_j, W_j) -> y_j (3x3, stride 1, same padding); batch_norm(y_j, gamma_j,
//              beta_j, running_j; mutates running_j) -> (z_j, stats_j); [add_(z_j, x_{j-k+1})];
//              relu_(z_j); [dropout]; view -> x_{j+1}
//   head:      [cnn: avg_pool(x_{L+1}) -> p; flatten(p) -> f (view)]; linear(.., W_head) -> logits;
//              bias_add_(logits, b_head); cross_entropy(logits, labels) -> (loss, log_softmax)
//   backward:  Mark "backward"; reverse order: cross_entropy_backward, bias_grad,
//              linear/conv backward_weight and backward_input (backward_data), relu_backward,
//              batch_norm_backward (3 outputs), dropout_backward, avg_pool_backward; the skip
//              gradient of a residual add_ is accumulated in place (add_) into the gradient of
//              the skip's source. Parameter gradients are produced directly by the backward op
//              in the first micro-batch; later micro-batches produce a ".partial" gradient that
//              accumulate_grad_ adds in place into the parameter gradient.
//   optimizer: Mark "optimizer"; one in-place step per parameter (sgd_step_ / momentum_step_ /
//              adam_step_ mutating the parameter and its 0 / 1 / 2 optimizer states); then all
//              parameter gradients are freed (zero_grad(set_to_none=True)).
// Residual add_ every k = residual_every layers: layer j with j % k == 0 and j > k adds x_{j-k+1}
// (the output of layer j-k). Marks: "forward" (each micro-batch), "backward", "optimizer".
//
// Allocation: every non-view op output (including workspaces) is allocated right before the op;
// every per-iteration tensor is freed right after its last use (compute or access), except
// parameter gradients, freed at the end of the iteration. The loss is read by the host
// (Access read, loss.item()) at the end of each micro-batch. The input batch (dtype) and the
// labels (int64, 8 bytes each) are allocated and written (Access write) at the start of each
// micro-batch. Workspaces (workspace=true): every conv2d / linear op and its backward ops
// (weight and input) gets a private Workspace tensor as its last output, sized as the largest
// other operand of that op; it is allocated right before and freed right after the op.
//
// Durations (ns), a roofline with launch overhead and seeded jitter, per op definition:
//   duration = max(1, round((max(flops / peak_flops, bytes / mem_bandwidth) * 1e9
//                            + launch_overhead) * (1 + jitter * u)))
//   u uniform in [-1, 1) drawn per op in definition order from splitmix64(seed);
//   bytes = sum of input bytes + output bytes + mutated-input bytes (views count as the bytes
//   of their base; view outputs count 0). View ops (view, flatten) have duration 0.
//   flops: linear 2*B*in*out (fwd, backward_input, backward_weight alike); conv2d
//   2*B*C_out*S^2*C_in*9 (all three); elementwise ops 1 per element (bias_add_, relu_, add_,
//   relu_backward, dropout_backward, accumulate_grad_, bias_grad), dropout 2, batch_norm 8,
//   batch_norm_backward 12, avg_pool(_backward) 1, cross_entropy 4*B*classes, its backward
//   2*B*classes; sgd 2, momentum 4, adam 12 per parameter element.
// The same seed gives a bit-identical trace; a different seed changes op durations only.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "coopsim/base/params.hpp"
#include "coopsim/model/trace.hpp"
#include "coopsim/base/units.hpp"

namespace coopsim {

// Component name used for Params and in ConfigError keys ("generate.layers").
inline constexpr const char* kGeneratorComponent = "generate";

struct GeneratorOptions {
  std::string model = "cnn";        // "mlp" | "cnn"
  std::int64_t layers = 8;          // hidden layers (>= 1)
  std::int64_t batch = 32;          // samples per micro-batch
  std::int64_t width = 64;          // mlp: features (input and hidden); cnn: channels
  std::int64_t spatial = 32;        // cnn: height = width of every feature map (mlp: unused)
  std::int64_t classes = 10;        // classifier outputs
  std::int64_t iterations = 3;      // training iterations (optimizer steps), >= 1
  std::int64_t micro_batches = 1;   // forward/backward passes per iteration (grad accumulation)
  std::string optimizer = "adam";   // "sgd" | "momentum" | "adam" (0 / 1 / 2 states per param)
  std::int64_t residual_every = 2;  // k: in-place skip add_ every k layers; 0 = none
  bool workspace = true;            // conv/linear ops allocate a transient workspace
  bool dropout = false;             // random dropout op (2 outputs) after each ReLU
  std::int64_t dtype_bytes = 4;     // bytes per element of float tensors: 1, 2, 4 or 8
  std::uint64_t seed = 1;           // jitter seed, 0 .. 2^63-1
  double peak_flops = 19.5e12;      // FLOP/s (A100 fp32)
  double mem_bandwidth = 1.5e12;    // bytes/s (A100 HBM2e, roughly)
  SimTime launch_overhead{5000};    // added to every non-view op (5 us)
  double jitter = 0.05;             // relative duration jitter, 0 <= jitter < 1

  bool operator==(const GeneratorOptions&) const = default;
};

// The documented option list (keys = the field names above; the one place where the textual
// defaults live, equal to GeneratorOptions{}).
std::vector<ParamDoc> generator_param_docs();

// Options from checked parameters (Params built with generator_param_docs()); unset keys take
// the documented defaults. Validates; throws ConfigError("generate.<key>", ...).
GeneratorOptions generator_options_from(const Params& params);
// Shorthand: Params(kGeneratorComponent, object, generator_param_docs()) then the above.
GeneratorOptions generator_options_from_json(const nlohmann::json& object);

// Every option with its value, in documented order, in the canonical form Params::resolved()
// uses (launch_overhead in integer ns). generator_options_from_json() of it gives back `o`.
nlohmann::json generator_options_json(const GeneratorOptions& o);

// Throws ConfigError("generate.<key>", problem) for the first invalid option.
void validate_generator_options(const GeneratorOptions& o);

// "synthetic-cnn-L8-B32" (model, layers, batch).
std::string generator_model_name(const GeneratorOptions& o);

// The trace. Header: format coopsim-trace, version 1, model = generator_model_name(o),
// source = {"tool": "coopsim generate", "options": generator_options_json(o)}, time_unit "ns",
// iterations = o.iterations, extra = {}. Event times are -1, Alloc addresses 0; TensorInfo/OpInfo
// file_id equal their index; view ops declare OpInfo::views = {(output, input)} and the output's
// TensorInfo::view_of is the input; path empty; content_hash 0. Validates o first; a trace of
// more than 400M events is refused (ConfigError on generate.iterations, or generate.layers when
// one iteration alone is too long). Time and memory are linear in the number of events.
Trace generate_training_trace(const GeneratorOptions& o);

}  // namespace coopsim
