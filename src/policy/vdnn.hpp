// vdnn: vDNN's layer-wise offload (Rhu et al., "vDNN: Virtualized Deep Neural Networks for
// Scalable, Memory-Efficient Neural Network Design", MICRO 2016; docs/models/swap-policies.md).
// Per iteration, the forward pass is the part before the trace's "backward" mark; its layers are
// the compute events (vdnn-all) or only the convolutions (vdnn-conv: op name contains "conv").
// The input feature maps of those layers (activation/input storages used again in backward) are
// offloaded right after their last forward use and prefetched one layer ahead in backward: the
// swap-in starts just before the backward compute event that precedes the first backward use,
// so it overlaps that layer. Departures: layers are the trace's ops (no layer graph); the engine
// overlaps copies with compute instead of vDNN's per-layer synchronisation, so waits show up only
// as stalls on a use or on memory; prefetches wait until they fit the budget by allocated bytes;
// vDNN_dyn (convolution algorithm choice) is not modelled; optional Belady fallback on a failed
// allocation (off by default: vDNN has none and runs out of memory).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "coopsim/policy/policy.hpp"
#include "scheduled_swap.hpp"

namespace coopsim {

struct VdnnOptions {
  bool conv_only = false;  // vDNN_conv; false = vDNN_all
  bool fallback = false;
};

class VdnnPolicy final : public ScheduledSwapPolicy {
 public:
  static constexpr std::string_view kName = "vdnn";
  static constexpr std::string_view kHelp =
      "vDNN: offload layer input feature maps after their last forward use and prefetch them "
      "one layer ahead in backward (variant all or conv)";
  static std::vector<ParamDoc> param_docs();
  static std::unique_ptr<Policy> create(const Params& p);

  explicit VdnnPolicy(VdnnOptions o);
  ~VdnnPolicy() override;

  void prepare(const MemoryView& view) override;

  // vDNN_conv's layer test on an op name ("aten::convolution", "conv2d", ...).
  static bool is_conv(std::string_view op_name);

 private:
  VdnnOptions opts_;
};

}  // namespace coopsim
