// Generator network definition: parameters (layer order, then head), forward ops, loss,
// backward ops (definition order = execution order) and one optimizer step per parameter.
// The network and its flop counts are documented in generator.hpp.
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

#include "training_step_impl.hpp"

namespace coopsim::gen_detail {

void Builder::define() {
  const auto B = static_cast<std::uint64_t>(o_.batch);
  const auto W = static_cast<std::uint64_t>(o_.width);
  const auto S = cnn_ ? static_cast<std::uint64_t>(o_.spatial) : 1ULL;
  const auto C = static_cast<std::uint64_t>(o_.classes);
  const auto L = static_cast<std::uint64_t>(o_.layers);
  const auto k = static_cast<std::uint64_t>(o_.residual_every);
  const auto Bd = static_cast<double>(B);
  const std::uint64_t in_features = cnn_ ? 3 : W;  // input channels (cnn) or features (mlp)
  const std::uint64_t act_elems = B * W * S * S;
  const double act_e = static_cast<double>(act_elems);
  auto layer_name = [](std::uint64_t j) { return fmt::format("L{}", j); };
  auto layer_in_channels = [&](std::uint64_t j) { return j == 1 ? in_features : W; };
  // linear: 2*B*in*out; conv2d (3x3): 2*B*C_out*S^2*C_in*9.
  auto layer_gemm_flops = [&](std::uint64_t j) {
    return 2.0 * Bd * static_cast<double>(layer_in_channels(j) * W) * static_cast<double>(S * S * (cnn_ ? 9 : 1));
  };

  input_ = tensor(B * in_features * S * S * dtype_, TensorRole::Input, "input", Life::LastUse);
  labels_ = tensor(B * 8, TensorRole::Input, "labels", Life::LastUse);

  // Parameters first (layer order, then head) so the optimizer steps follow definition order.
  struct LayerParams {
    std::uint32_t w, b, gamma, beta;
  };
  std::vector<LayerParams> lp(L + 1);
  std::vector<std::uint32_t> running(L + 1, kNoIndex);
  for (std::uint64_t j = 1; j <= L; ++j) {
    const std::string n = layer_name(j);
    const std::uint64_t cin = layer_in_channels(j);
    if (cnn_) {
      lp[j].w = param(W * cin * 9, n + ".conv.weight");
      lp[j].gamma = param(W, n + ".bn.weight");
      lp[j].beta = param(W, n + ".bn.bias");
      running[j] = tensor(2 * W * dtype_, TensorRole::Other, n + ".bn.running_stats", Life::Persistent);
    } else {
      lp[j].w = param(W * cin, n + ".linear.weight");
      lp[j].b = param(W, n + ".linear.bias");
    }
  }
  const std::uint32_t head_w = param(C * W, "head.weight");
  const std::uint32_t head_b = param(C, "head.bias");

  // ---- forward
  layers_.resize(L + 1);
  std::uint32_t x = input_;
  for (std::uint64_t j = 1; j <= L; ++j) {
    Layer& ly = layers_[j];
    const std::string n = layer_name(j);
    ly.x = x;
    const auto w = params_[lp[j].w].tensor;
    const double gemm_flops = layer_gemm_flops(j);
    if (cnn_) {
      ly.pre = tensor(act_elems * dtype_, TensorRole::Activation, n + ".conv.out", Life::LastUse);
      ly.op_main = gemm_op("conv2d", n + ".conv.workspace", {x, w}, {ly.pre}, gemm_flops);
      ly.act = tensor(act_elems * dtype_, TensorRole::Activation, n + ".bn.out", Life::LastUse);
      const auto stats = tensor(2 * W * dtype_, TensorRole::Activation, n + ".bn.saved_stats", Life::LastUse);
      ly.op_bn = op("batch_norm", {ly.pre, params_[lp[j].gamma].tensor, params_[lp[j].beta].tensor, running[j]},
                    {ly.act, stats}, {running[j]}, 8 * act_e);
    } else {
      ly.pre = tensor(act_elems * dtype_, TensorRole::Activation, n + ".linear.out", Life::LastUse);
      ly.op_main = gemm_op("linear", n + ".linear.workspace", {x, w}, {ly.pre}, gemm_flops);
      ly.act = ly.pre;
      ly.op_bias = op("bias_add_", {ly.act, params_[lp[j].b].tensor}, {}, {ly.act}, act_e);
    }
    if (k > 0 && j % k == 0 && j > k) {
      ly.op_residual = op("add_", {ly.act, layers_[j - k + 1].x}, {}, {ly.act}, act_e);
    }
    ly.op_relu = op("relu_", {ly.act}, {}, {ly.act}, act_e);
    ly.out = ly.act;
    if (o_.dropout) {
      ly.out = tensor(act_elems * dtype_, TensorRole::Activation, n + ".dropout.out", Life::LastUse);
      ly.mask = tensor(act_elems, TensorRole::Activation, n + ".dropout.mask", Life::LastUse);
      ly.op_dropout = op("dropout", {ly.act}, {ly.out, ly.mask}, {}, 2 * act_e, /*random=*/true);
    }
    x = view(ly.out, n + ".out.view");
    ly.op_view = view_op("view", ly.out, x);
  }
  // head
  std::uint32_t head_in = x;
  if (cnn_) {
    pooled_ = tensor(B * W * dtype_, TensorRole::Activation, "head.pool.out", Life::LastUse);
    op_pool_ = op("avg_pool", {x}, {pooled_}, {}, act_e);
    flat_ = view(pooled_, "head.flatten");
    op_flatten_ = view_op("flatten", pooled_, flat_);
    head_in = flat_;
  }
  const double head_flops = 2.0 * Bd * static_cast<double>(W * C);
  const double logit_e = static_cast<double>(B * C);
  logits_ = tensor(B * C * dtype_, TensorRole::Activation, "head.logits", Life::LastUse);
  op_head_ = gemm_op("linear", "head.linear.workspace", {head_in, params_[head_w].tensor}, {logits_}, head_flops);
  op_head_bias_ = op("bias_add_", {logits_, params_[head_b].tensor}, {}, {logits_}, logit_e);
  loss_ = tensor(dtype_, TensorRole::Activation, "loss", Life::LastUse);
  log_softmax_ = tensor(B * C * dtype_, TensorRole::Activation, "loss.log_softmax", Life::LastUse);
  op_loss_ = op("cross_entropy", {logits_, labels_}, {loss_, log_softmax_}, {}, 4 * logit_e);

  // ---- backward (definition order = execution order)
  grad_logits_ = tensor(B * C * dtype_, TensorRole::Gradient, "head.logits.grad", Life::LastUse);
  op_loss_bwd_ = op("cross_entropy_backward", {log_softmax_, labels_}, {grad_logits_}, {}, 2 * logit_e);
  head_bias_grad_ = grad_op("bias_grad", "", {grad_logits_}, {}, {head_b}, logit_e, false);
  head_weight_grad_ = grad_op("linear_backward_weight", "head.linear_backward_weight.workspace",
                              {grad_logits_, head_in}, {}, {head_w}, head_flops, true);
  grad_head_in_ =
      tensor(B * W * dtype_, TensorRole::Gradient, cnn_ ? "head.flatten.grad" : "head.in.grad", Life::LastUse);
  op_head_input_grad_ = gemm_op("linear_backward_input", "head.linear_backward_input.workspace",
                                {grad_logits_, params_[head_w].tensor}, {grad_head_in_}, head_flops);
  grad_top_ = grad_head_in_;
  if (cnn_) {
    grad_top_ = tensor(act_elems * dtype_, TensorRole::Gradient, "head.pool.in.grad", Life::LastUse);
    op_pool_bwd_ = op("avg_pool_backward", {grad_head_in_}, {grad_top_}, {}, act_e);
  }
  // Incoming gradient of each layer's output: grad_top_ for L, grad_x of layer j+1 otherwise.
  for (std::uint64_t j = L; j >= 1; --j) {
    Layer& ly = layers_[j];
    const std::string n = layer_name(j);
    const double gemm_flops = layer_gemm_flops(j);
    std::uint32_t g = j == L ? grad_top_ : layers_[j + 1].grad_x;
    // Skip gradients of residual adds whose source is this layer's output x_{j+1}.
    // (layer l = j + k adds x_{l-k+1} = x_{j+1}; its grad_relu is already defined).
    if (k > 0 && j + k <= L && layers_[j + k].op_residual != kNoIndex) {
      layers_[j + 1].skip_accumulate_ops.push_back(op("add_", {g, layers_[j + k].grad_relu}, {}, {g}, act_e));
    }
    if (o_.dropout) {
      const auto gd = tensor(act_elems * dtype_, TensorRole::Gradient, n + ".dropout.in.grad", Life::LastUse);
      ly.op_dropout_bwd = op("dropout_backward", {g, ly.mask}, {gd}, {}, act_e);
      g = gd;
    }
    ly.grad_relu = tensor(act_elems * dtype_, TensorRole::Gradient, n + ".relu.grad", Life::LastUse);
    ly.op_relu_bwd = op("relu_backward", {g, ly.act}, {ly.grad_relu}, {}, act_e);
    std::uint32_t g_pre = ly.grad_relu;  // gradient w.r.t. the linear/conv output
    if (cnn_) {
      const auto stats = index_of(tr_.ops[ly.op_bn].outputs[1]);
      g_pre = tensor(act_elems * dtype_, TensorRole::Gradient, n + ".conv.out.grad", Life::LastUse);
      ly.bn_bwd = grad_op("batch_norm_backward", "", {ly.grad_relu, ly.pre, params_[lp[j].gamma].tensor, stats},
                          {g_pre}, {lp[j].gamma, lp[j].beta}, 12 * act_e, false);
      ly.weight_grad = grad_op("conv2d_backward_weight", n + ".conv_backward_weight.workspace", {g_pre, ly.x}, {},
                               {lp[j].w}, gemm_flops, true);
    } else {
      ly.bias_grad = grad_op("bias_grad", "", {g_pre}, {}, {lp[j].b}, act_e, false);
      ly.weight_grad = grad_op("linear_backward_weight", n + ".linear_backward_weight.workspace", {g_pre, ly.x}, {},
                               {lp[j].w}, gemm_flops, true);
    }
    if (j >= 2) {
      ly.grad_x = tensor(B * W * S * S * dtype_, TensorRole::Gradient, n + ".in.grad", Life::LastUse);
      ly.op_input_grad = gemm_op(cnn_ ? "conv2d_backward_input" : "linear_backward_input",
                                 n + (cnn_ ? ".conv_backward_input.workspace" : ".linear_backward_input.workspace"),
                                 {g_pre, params_[lp[j].w].tensor}, {ly.grad_x}, gemm_flops);
    }
  }
  // ---- optimizer
  for (auto& p : params_) {
    Ids in{p.tensor, p.grad};
    Ids mut{p.tensor};
    for (auto s : p.states) {
      in.push_back(s);
      mut.push_back(s);
    }
    p.step_op =
        op(optimizer_.step_op, in, {}, mut, optimizer_.flops_per_element * static_cast<double>(elems(p.tensor)));
  }
}

}  // namespace coopsim::gen_detail
