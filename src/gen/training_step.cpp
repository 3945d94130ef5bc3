// Synthetic training-step trace: tensor/op definitions, one iteration's schedule with automatic
// alloc-before-first-write and free-after-last-use, then the schedule replicated per iteration.
// See generator.hpp for the network, allocation rules and the duration formula.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "coopsim/error.hpp"
#include "coopsim/generator.hpp"

namespace coopsim {

namespace {

using Ids = std::vector<std::uint32_t>;

// Largest trace built (events); 32 bytes each in memory.
constexpr std::uint64_t kMaxEvents = 400'000'000;

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
  Ids params;  // indices into Builder::params
};

struct Layer {
  std::uint32_t x = kNoIndex;       // input of the layer (input batch or view of previous output)
  std::uint32_t pre = kNoIndex;     // linear / conv output (h or y)
  std::uint32_t act = kNoIndex;     // tensor relu_ mutates (h for mlp, z for cnn)
  std::uint32_t out = kNoIndex;     // base of the next layer's input (act, or dropout output)
  std::uint32_t mask = kNoIndex;
  // forward ops
  std::uint32_t op_main = kNoIndex, op_bias = kNoIndex, op_bn = kNoIndex, op_residual = kNoIndex,
                op_relu = kNoIndex, op_dropout = kNoIndex, op_view = kNoIndex;
  // backward
  std::uint32_t op_dropout_bwd = kNoIndex, op_relu_bwd = kNoIndex;
  GradOp bias_grad, bn_bwd, weight_grad;
  std::uint32_t op_input_grad = kNoIndex;   // l >= 2
  std::uint32_t grad_x = kNoIndex;          // gradient w.r.t. x (l >= 2)
  std::uint32_t grad_relu = kNoIndex;       // gradient after relu_backward
  Ids skip_accumulate_ops;                  // add_(grad_x, grad_relu of layer j) for skips from x
};

class Builder {
 public:
  explicit Builder(const GeneratorOptions& o) : o_(o), rng_(o.seed) {}

  Trace build();

 private:
  // ---- definitions
  std::uint32_t tensor(std::uint64_t bytes, TensorRole role, std::string name, Life life) {
    const auto id = static_cast<std::uint32_t>(tr_.tensors.size());
    TensorInfo t;
    t.id = TensorId{id};
    t.file_id = id;
    t.size = Bytes{bytes};
    t.role = role;
    t.name = std::move(name);
    tr_.tensors.push_back(std::move(t));
    life_.push_back(life);
    return id;
  }
  std::uint32_t view(std::uint32_t base, std::string name) {
    const auto id = tensor(0, tr_.tensors[base].role, std::move(name), life_[base]);
    tr_.tensors[id].view_of = tr_.storage_of(base);
    return id;
  }
  std::uint64_t bytes_of(std::uint32_t t) const { return tr_.tensors[tr_.storage_of(t)].size.value; }
  std::uint64_t elems(std::uint32_t t) const { return bytes_of(t) / dtype_; }

  std::uint32_t op(std::string name, Ids inputs, Ids outputs, Ids mutated, double flops,
                   bool random = false) {
    for (auto m : mutated) {
      if (std::find(inputs.begin(), inputs.end(), m) == inputs.end()) inputs.push_back(m);
    }
    double bytes = 0;
    for (auto t : inputs) bytes += static_cast<double>(bytes_of(t));
    for (auto t : outputs) {
      if (!tr_.tensors[t].is_view()) bytes += static_cast<double>(bytes_of(t));
    }
    for (auto t : mutated) bytes += static_cast<double>(bytes_of(t));
    const double secs = std::max(flops / o_.peak_flops, bytes / o_.mem_bandwidth);
    const double ns = (secs * 1e9 + static_cast<double>(o_.launch_overhead.count())) *
                      (1.0 + o_.jitter * rng_.symmetric());
    const auto dur = std::max<std::int64_t>(1, std::llround(ns));
    return add_op(std::move(name), std::move(inputs), std::move(outputs), std::move(mutated),
                  SimTime{dur}, random);
  }
  // Metadata-only op whose output is a view of its input (declared in OpInfo::views).
  std::uint32_t view_op(std::string name, std::uint32_t in, std::uint32_t out) {
    const auto id = add_op(std::move(name), {in}, {out}, {}, SimTime{0}, false);
    tr_.ops[id].views.emplace_back(TensorId{out}, TensorId{in});
    return id;
  }
  std::uint32_t add_op(std::string name, Ids inputs, Ids outputs, Ids mutated, SimTime dur, bool random) {
    const auto id = static_cast<std::uint32_t>(tr_.ops.size());
    OpInfo op;
    op.id = OpId{id};
    op.file_id = id;
    op.name = std::move(name);
    op.duration = dur;
    for (auto t : inputs) op.inputs.push_back(TensorId{t});
    for (auto t : outputs) op.outputs.push_back(TensorId{t});
    for (auto t : mutated) op.mutated.push_back(TensorId{t});
    op.random = random;
    tr_.ops.push_back(std::move(op));
    return id;
  }

  // GEMM-class op (linear / conv and their backward ops): optional private workspace.
  std::uint32_t gemm_op(const std::string& name, const std::string& ws_name, Ids inputs, Ids outputs,
                        double flops) {
    if (o_.workspace) outputs.push_back(workspace(ws_name, inputs, outputs));
    return op(name, std::move(inputs), std::move(outputs), {}, flops);
  }
  std::uint32_t workspace(const std::string& name, const Ids& inputs, const Ids& outputs) {
    std::uint64_t b = 0;
    for (auto t : inputs) b = std::max(b, bytes_of(t));
    for (auto t : outputs) b = std::max(b, bytes_of(t));
    return tensor(b, TensorRole::Workspace, name, Life::LastUse);
  }

  std::uint32_t param(std::uint64_t elements, std::string name) {
    Param p;
    p.tensor = tensor(elements * dtype_, TensorRole::Parameter, name, Life::Persistent);
    p.grad = tensor(elements * dtype_, TensorRole::Gradient, name + ".grad", Life::IterEnd);
    if (o_.micro_batches > 1) {
      p.partial = tensor(elements * dtype_, TensorRole::Gradient, name + ".grad.partial", Life::LastUse);
    }
    const int n_states = o_.optimizer == "sgd" ? 0 : o_.optimizer == "momentum" ? 1 : 2;
    static constexpr const char* kStateNames[2][2] = {{"momentum", ""}, {"adam_m", "adam_v"}};
    for (int s = 0; s < n_states; ++s) {
      p.states.push_back(tensor(elements * dtype_, TensorRole::OptimizerState,
                                name + "." + kStateNames[n_states - 1][s], Life::Persistent));
    }
    params_.push_back(std::move(p));
    return static_cast<std::uint32_t>(params_.size() - 1);
  }

  // Op writing other outputs plus the gradients of `ps` (in that order).
  GradOp grad_op(const std::string& name, const std::string& ws_name, Ids inputs, Ids other_outputs,
                 Ids ps, double flops, bool gemm) {
    GradOp g;
    g.params = ps;
    auto make = [&](bool partial) {
      Ids outs = other_outputs;
      for (auto p : ps) outs.push_back(partial ? params_[p].partial : params_[p].grad);
      return gemm ? gemm_op(name, ws_name, inputs, std::move(outs), flops)
                  : op(name, inputs, std::move(outs), {}, flops);
    };
    g.first = make(false);
    if (o_.micro_batches > 1) {
      // The workspace of the accumulating variant is the same logical tensor (same size).
      if (gemm && o_.workspace) {
        Ids outs = other_outputs;
        for (auto p : ps) outs.push_back(params_[p].partial);
        const auto& first_outs = tr_.ops[g.first].outputs;
        outs.push_back(index_of(first_outs.back()));
        g.acc = op(name, inputs, std::move(outs), {}, flops);
      } else {
        g.acc = make(true);
      }
      for (auto p : ps) {
        auto& pr = params_[p];
        if (pr.accumulate_op == kNoIndex) {
          pr.accumulate_op = op("accumulate_grad_", {pr.grad, pr.partial}, {}, {pr.grad},
                                static_cast<double>(elems(pr.grad)));
        }
      }
    }
    return g;
  }

  void define();

  // ---- schedule of one iteration (raw: allocs but no frees yet)
  void touch(std::uint32_t t) {
    const auto s = tr_.storage_of(t);
    if (life_[s] == Life::Persistent) return;
    if (open_[s] == kNoIndex) {
      throw std::logic_error("generator: " + tr_.tensors[s].name + " used before allocation");
    }
    lifetimes_[open_[s]].last = static_cast<std::uint32_t>(raw_.size() - 1);
  }
  // Every non-view op output starts a new lifetime (the previous one, if any, ended earlier).
  void alloc(std::uint32_t t) {
    if (open_[t] != kNoIndex && lifetimes_[open_[t]].life == Life::IterEnd) {
      throw std::logic_error("generator: " + tr_.tensors[t].name + " rewritten before iteration end");
    }
    raw_.push_back(event(EventKind::Alloc, t));
    const auto pos = static_cast<std::uint32_t>(raw_.size() - 1);
    open_[t] = static_cast<std::uint32_t>(lifetimes_.size());
    lifetimes_.push_back({t, pos, pos, life_[t]});
  }
  void compute(std::uint32_t op_id) {
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
    raw_.push_back(event(EventKind::Compute, op_id));
    for (auto in : op.inputs) touch(index_of(in));
    for (auto out : op.outputs) touch(index_of(out));
  }
  void access(std::uint32_t t, bool write) {
    TraceEvent e = event(EventKind::Access, t);
    e.write = write;
    raw_.push_back(e);
    touch(t);
  }
  void mark(std::uint32_t label) { raw_.push_back(event(EventKind::Mark, label)); }
  void run(const GradOp& g, std::int64_t micro) {
    if (micro == 0) {
      compute(g.first);
      return;
    }
    compute(g.acc);
    for (auto p : g.params) compute(params_[p].accumulate_op);
  }
  static TraceEvent event(EventKind k, std::uint32_t target) {
    TraceEvent e;
    e.kind = k;
    e.target = target;
    return e;
  }

  void schedule_micro_batch(std::int64_t micro);
  std::vector<TraceEvent> finish_iteration();

  const GeneratorOptions& o_;
  SplitMix64 rng_;
  Trace tr_;
  std::uint64_t dtype_ = 4;
  bool cnn_ = true;
  std::vector<Life> life_;
  std::vector<Param> params_;
  std::vector<Layer> layers_;  // index 0 unused; layers 1..L
  // tensors / ops outside the layers
  std::uint32_t input_ = kNoIndex, labels_ = kNoIndex, pooled_ = kNoIndex, flat_ = kNoIndex,
                logits_ = kNoIndex, loss_ = kNoIndex, log_softmax_ = kNoIndex,
                grad_logits_ = kNoIndex, grad_head_in_ = kNoIndex, grad_top_ = kNoIndex;
  std::uint32_t op_pool_ = kNoIndex, op_flatten_ = kNoIndex, op_head_ = kNoIndex,
                op_head_bias_ = kNoIndex, op_loss_ = kNoIndex, op_loss_bwd_ = kNoIndex,
                op_head_input_grad_ = kNoIndex, op_pool_bwd_ = kNoIndex;
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

  input_ = tensor(B * in_features * S * S * dtype_, TensorRole::Input, "input", Life::LastUse);
  labels_ = tensor(B * 8, TensorRole::Input, "labels", Life::LastUse);

  // Parameters first (layer order, then head) so the optimizer steps follow definition order.
  struct LayerParams {
    std::uint32_t w, b, gamma, beta;
  };
  std::vector<LayerParams> lp(L + 1);
  std::vector<std::uint32_t> running(L + 1, kNoIndex);
  for (std::uint64_t j = 1; j <= L; ++j) {
    const std::string n = fmt::format("L{}", j);
    const std::uint64_t cin = j == 1 ? in_features : W;
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
    const std::string n = fmt::format("L{}", j);
    const std::uint64_t cin = j == 1 ? in_features : W;
    ly.x = x;
    const auto w = params_[lp[j].w].tensor;
    const double gemm_flops = 2.0 * Bd * static_cast<double>(cin * W) * static_cast<double>(S * S * (cnn_ ? 9 : 1));
    const double act_e = static_cast<double>(act_elems);
    if (cnn_) {
      ly.pre = tensor(act_elems * dtype_, TensorRole::Activation, n + ".conv.out", Life::LastUse);
      ly.op_main = gemm_op("conv2d", n + ".conv.workspace", {x, w}, {ly.pre}, gemm_flops);
      ly.act = tensor(act_elems * dtype_, TensorRole::Activation, n + ".bn.out", Life::LastUse);
      const auto stats = tensor(2 * W * dtype_, TensorRole::Activation, n + ".bn.saved_stats", Life::LastUse);
      ly.op_bn = op("batch_norm",
                    {ly.pre, params_[lp[j].gamma].tensor, params_[lp[j].beta].tensor, running[j]},
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
    op_pool_ = op("avg_pool", {x}, {pooled_}, {}, static_cast<double>(act_elems));
    flat_ = view(pooled_, "head.flatten");
    op_flatten_ = view_op("flatten", pooled_, flat_);
    head_in = flat_;
  }
  const double head_flops = 2.0 * Bd * static_cast<double>(W * C);
  const double logit_e = static_cast<double>(B * C);
  logits_ = tensor(B * C * dtype_, TensorRole::Activation, "head.logits", Life::LastUse);
  op_head_ = gemm_op("linear", "head.linear.workspace", {head_in, params_[head_w].tensor}, {logits_},
                     head_flops);
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
  grad_head_in_ = tensor(B * W * dtype_, TensorRole::Gradient, cnn_ ? "head.flatten.grad" : "head.in.grad",
                         Life::LastUse);
  op_head_input_grad_ = gemm_op("linear_backward_input", "head.linear_backward_input.workspace",
                                {grad_logits_, params_[head_w].tensor}, {grad_head_in_}, head_flops);
  grad_top_ = grad_head_in_;
  if (cnn_) {
    grad_top_ = tensor(act_elems * dtype_, TensorRole::Gradient, "head.pool.in.grad", Life::LastUse);
    op_pool_bwd_ = op("avg_pool_backward", {grad_head_in_}, {grad_top_}, {}, static_cast<double>(act_elems));
  }
  // Incoming gradient of each layer's output: grad_top_ for L, grad_x of layer j+1 otherwise.
  for (std::uint64_t j = L; j >= 1; --j) {
    Layer& ly = layers_[j];
    const std::string n = fmt::format("L{}", j);
    const std::uint64_t cin = j == 1 ? in_features : W;
    const double act_e = static_cast<double>(act_elems);
    const double gemm_flops = 2.0 * Bd * static_cast<double>(cin * W) * static_cast<double>(S * S * (cnn_ ? 9 : 1));
    std::uint32_t g = j == L ? grad_top_ : layers_[j + 1].grad_x;
    // Skip gradients of residual adds whose source is this layer's output x_{j+1}.
    // (layer l = j + k adds x_{l-k+1} = x_{j+1}; its grad_relu is already defined).
    if (k > 0 && j + k <= L && layers_[j + k].op_residual != kNoIndex) {
      layers_[j + 1].skip_accumulate_ops.push_back(
          op("add_", {g, layers_[j + k].grad_relu}, {}, {g}, act_e));
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
      ly.bn_bwd = grad_op("batch_norm_backward", "",
                          {ly.grad_relu, ly.pre, params_[lp[j].gamma].tensor, stats}, {g_pre},
                          {lp[j].gamma, lp[j].beta}, 12 * act_e, false);
      ly.weight_grad = grad_op("conv2d_backward_weight", n + ".conv_backward_weight.workspace",
                               {g_pre, ly.x}, {}, {lp[j].w}, gemm_flops, true);
    } else {
      ly.bias_grad = grad_op("bias_grad", "", {g_pre}, {}, {lp[j].b}, act_e, false);
      ly.weight_grad = grad_op("linear_backward_weight", n + ".linear_backward_weight.workspace",
                               {g_pre, ly.x}, {}, {lp[j].w}, gemm_flops, true);
    }
    if (j >= 2) {
      ly.grad_x = tensor(B * W * S * S * dtype_, TensorRole::Gradient, n + ".in.grad", Life::LastUse);
      ly.op_input_grad = gemm_op(cnn_ ? "conv2d_backward_input" : "linear_backward_input",
                                 n + (cnn_ ? ".conv_backward_input.workspace" : ".linear_backward_input.workspace"),
                                 {g_pre, params_[lp[j].w].tensor}, {ly.grad_x}, gemm_flops);
    }
  }
  // ---- optimizer
  const double per_elem = o_.optimizer == "sgd" ? 2 : o_.optimizer == "momentum" ? 4 : 12;
  const char* step_name = o_.optimizer == "sgd" ? "sgd_step_" : o_.optimizer == "momentum" ? "momentum_step_"
                                                                                              : "adam_step_";
  for (auto& p : params_) {
    Ids in{p.tensor, p.grad};
    Ids mut{p.tensor};
    for (auto s : p.states) {
      in.push_back(s);
      mut.push_back(s);
    }
    p.step_op = op(step_name, in, {}, mut, per_elem * static_cast<double>(elems(p.tensor)));
  }
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
      if (id != kNoIndex) compute(id);
    }
  }
  for (auto id : {op_pool_, op_flatten_, op_head_, op_head_bias_, op_loss_}) {
    if (id != kNoIndex) compute(id);
  }
  mark(label_backward_);
  compute(op_loss_bwd_);
  run(head_bias_grad_, micro);
  run(head_weight_grad_, micro);
  compute(op_head_input_grad_);
  if (op_pool_bwd_ != kNoIndex) compute(op_pool_bwd_);
  for (std::size_t j = L; j >= 1; --j) {
    const Layer& ly = layers_[j];
    if (j < L) {
      for (auto id : layers_[j + 1].skip_accumulate_ops) compute(id);
    }
    if (ly.op_dropout_bwd != kNoIndex) compute(ly.op_dropout_bwd);
    compute(ly.op_relu_bwd);
    if (cnn_) {
      run(ly.bn_bwd, micro);
    } else {
      run(ly.bias_grad, micro);
    }
    run(ly.weight_grad, micro);
    if (ly.op_input_grad != kNoIndex) compute(ly.op_input_grad);
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
      out.push_back(event(EventKind::Free, s));
    }
  };
  for (std::uint32_t i = 0; i < raw_.size(); ++i) {
    const TraceEvent& e = raw_[i];
    out.push_back(e);
    switch (e.kind) {
      case EventKind::Alloc:
        current[e.target] = next++;
        break;
      case EventKind::Compute: {
        const auto& op = tr_.ops[e.target];
        for (auto t : op.inputs) maybe_free(index_of(t), i);
        for (auto t : op.outputs) maybe_free(index_of(t), i);
        break;
      }
      case EventKind::Access:
        maybe_free(e.target, i);
        break;
      default:
        break;
    }
  }
  for (std::uint32_t lt = 0; lt < lifetimes_.size(); ++lt) {
    if (lifetimes_[lt].life == Life::IterEnd) {
      freed[lt] = true;
      out.push_back(event(EventKind::Free, lifetimes_[lt].tensor));
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
    tr_.events.push_back(event(EventKind::Alloc, t));
    TraceEvent init = event(EventKind::Access, t);
    init.write = true;
    tr_.events.push_back(init);
  }
  for (std::uint64_t it = 0; it < n; ++it) {
    tr_.events.push_back(event(EventKind::Iteration, static_cast<std::uint32_t>(it)));
    tr_.events.insert(tr_.events.end(), iteration.begin(), iteration.end());
  }
  return std::move(tr_);
}

}  // namespace

Trace generate_training_trace(const GeneratorOptions& o) {
  validate_generator_options(o);
  return Builder(o).build();
}

}  // namespace coopsim
