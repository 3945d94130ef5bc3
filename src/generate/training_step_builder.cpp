// Generator definition primitives: tensors and views, ops with the roofline duration of
// generator.hpp, GEMM workspaces, parameters with their gradients and optimizer states, and the
// gradient-producing ops (first micro-batch / accumulating variant / accumulate_grad_).
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "coopsim/base/error.hpp"
#include "training_step_impl.hpp"

namespace coopsim::gen_detail {

std::uint32_t Builder::tensor(std::uint64_t bytes, TensorRole role, std::string name, Life life) {
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

std::uint32_t Builder::view(std::uint32_t base, std::string name) {
  const auto id = tensor(0, tr_.tensors[base].role, std::move(name), life_[base]);
  tr_.tensors[id].view_of = TensorId{tr_.storage_of(base)};
  return id;
}

std::uint32_t Builder::op(std::string name, Ids inputs, Ids outputs, Ids mutated, double flops, bool random) {
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
  const double ns =
      (secs * 1e9 + static_cast<double>(o_.launch_overhead.count())) * (1.0 + o_.jitter * rng_.symmetric());
  // A slow enough device (peak_flops=1e-12) makes an op longer than a SimTime can hold: refused,
  // never wrapped (std::llround of a value past 2^63 is undefined).
  if (!(ns < 0x1p63)) {
    const char* key = flops / o_.peak_flops >= bytes / o_.mem_bandwidth ? "peak_flops" : "mem_bandwidth";
    throw ConfigError(key, fmt::format("op '{}' would run for {:.3g} ns, more than 2^63 - 1 ns (about 292 years)",
                                       name, ns));
  }
  const auto dur = std::max<std::int64_t>(1, std::llround(ns));
  return add_op(std::move(name), std::move(inputs), std::move(outputs), std::move(mutated), SimTime{dur}, random);
}

std::uint32_t Builder::view_op(std::string name, std::uint32_t in, std::uint32_t out) {
  const auto id = add_op(std::move(name), {in}, {out}, {}, SimTime{0}, false);
  tr_.ops[id].views.emplace_back(TensorId{out}, TensorId{in});
  return id;
}

std::uint32_t Builder::add_op(std::string name, Ids inputs, Ids outputs, Ids mutated, SimTime dur, bool random) {
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

std::uint32_t Builder::gemm_op(const std::string& name, const std::string& ws_name, Ids inputs, Ids outputs,
                               double flops) {
  if (o_.workspace) outputs.push_back(workspace(ws_name, inputs, outputs));
  return op(name, std::move(inputs), std::move(outputs), {}, flops);
}

std::uint32_t Builder::workspace(const std::string& name, const Ids& inputs, const Ids& outputs) {
  std::uint64_t b = 0;
  for (auto t : inputs) b = std::max(b, bytes_of(t));
  for (auto t : outputs) b = std::max(b, bytes_of(t));
  return tensor(b, TensorRole::Workspace, name, Life::LastUse);
}

std::uint32_t Builder::param(std::uint64_t elements, std::string name) {
  Param p;
  p.tensor = tensor(elements * dtype_, TensorRole::Parameter, name, Life::Persistent);
  p.grad = tensor(elements * dtype_, TensorRole::Gradient, name + ".grad", Life::IterEnd);
  if (o_.micro_batches > 1) {
    p.partial = tensor(elements * dtype_, TensorRole::Gradient, name + ".grad.partial", Life::LastUse);
  }
  for (int s = 0; s < optimizer_.n_states; ++s) {
    p.states.push_back(tensor(elements * dtype_, TensorRole::OptimizerState,
                              name + "." + optimizer_.state_names[static_cast<std::size_t>(s)], Life::Persistent));
  }
  params_.push_back(std::move(p));
  return static_cast<std::uint32_t>(params_.size() - 1);
}

GradOp Builder::grad_op(const std::string& name, const std::string& ws_name, Ids inputs, Ids other_outputs, Ids ps,
                        double flops, bool gemm) {
  GradOp g;
  g.params = ps;
  auto outputs = [&](bool partial) {
    Ids outs = other_outputs;
    for (auto p : ps) outs.push_back(partial ? params_[p].partial : params_[p].grad);
    return outs;
  };
  auto make = [&](bool partial) {
    return gemm ? gemm_op(name, ws_name, inputs, outputs(partial), flops)
                : op(name, inputs, outputs(partial), {}, flops);
  };
  g.first = make(false);
  if (o_.micro_batches > 1) {
    // The workspace of the accumulating variant is the same logical tensor (same size).
    if (gemm && o_.workspace) {
      Ids outs = outputs(true);
      outs.push_back(index_of(tr_.ops[g.first].outputs.back()));
      g.acc = op(name, inputs, std::move(outs), {}, flops);
    } else {
      g.acc = make(true);
    }
    for (auto p : ps) {
      auto& pr = params_[p];
      if (pr.accumulate_op == kNoIndex) {
        pr.accumulate_op =
            op("accumulate_grad_", {pr.grad, pr.partial}, {}, {pr.grad}, static_cast<double>(elems(pr.grad)));
      }
    }
  }
  return g;
}

}  // namespace coopsim::gen_detail
