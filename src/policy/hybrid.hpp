// Hybrid swap/recompute policies, planned offline from the trace
// (docs/models/pooch.md, docs/models/swap-policies.md); the model they share is in src/policy/hybrid_decisions.hpp. Per
// iteration, while the modelled peak of requested bytes exceeds limit_ratio x budget, they take a tensor's idle gap
// that covers the current peak out of memory, by swapping it (free when the copies hide under
// the gap's compute, else the excess is a stall) or by evicting it after the use that opens
// the gap so the engine recomputes it on demand (costing its producer and, recursively, the
// producers of inputs that will be gone). Then the plan is re-simulated with serial copy lanes
// and the loop resumes from that curve while the confirmed peak is still over the limit.
//
//  * pooch — PoocH-like (Ito et al., "Profiling-based Out-of-core Hybrid method", PPoPP'19
//    poster): each step picks, over the gaps covering the peak, the action with the least
//    estimated added time per byte saved (swap preferred on ties). The original greedy is not
//    public; this follows the reading of it (docs/models/pooch.md).
//  * capuchin — Capuchin-like (Peng et al., ASPLOS'20): swaps first, in descending FreeTime =
//    idle - out - in, while the copies can hide (FreeTime > 0); then, for the rest, the gap
//    with the highest MSPS = bytes / recompute time, swapped or recomputed, whichever adds less
//    time; recompute costs are re-evaluated after every choice (chains through evicted sources).
//
// Runtime (the engine's DTR mode with swaps): planned swap-outs after the opening use, swap-ins
// issued on the lane schedule when they fit the budget, planned evictions after the opening
// use; on a failed allocation the evictable value with the smallest MSPS score, else the
// resident tensor used furthest in the future is swapped out (Belady). Departures: tensors
// rather than layers; timing from the engine's link (or a named preset); one plan per
// iteration from the trace instead of a profiled first iteration.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "coopsim/policy/policy.hpp"

namespace coopsim {

namespace swap_detail {
class UseIndex;
}
namespace hybrid_detail {
class HybridPlanner;
class HybridExecutor;
struct Gap;
}  // namespace hybrid_detail

struct HybridOptions {
  Bytes smallest_block{1U << 20};
  std::string link = "engine";  // or a preset name
  double limit_ratio = 1.0;
  bool fallback = true;
  RematOptions remat;
};

// One planned decision, for tests and reports.
struct HybridPlanEntry {
  std::uint32_t tensor, last_use, next_use;
  bool recompute;  // false: swap
  SimTime cost;    // estimated added time
};

class HybridPolicy : public Policy {
 public:
  explicit HybridPolicy(HybridOptions o);
  ~HybridPolicy() override;

  void prepare(const MemoryView& view) override;
  [[nodiscard]] std::vector<Action> on_alloc_failure(const AllocRequest& request, const MemoryView& view) override;
  [[nodiscard]] std::vector<Action> after_event(const MemoryView& view) override;
  [[nodiscard]] std::optional<RematOptions> remat_options() const override { return opts_.remat; }

  [[nodiscard]] std::vector<HybridPlanEntry> plan() const;

  static std::vector<ParamDoc> common_param_docs();
  static HybridOptions parse_common(const Params& p);

 protected:
  // Chooses gaps for iteration [b, e) until the modelled peak of `load` is <= limit; appends
  // them (with choice and cost set) to `chosen` and lowers `load`.
  virtual void choose(const hybrid_detail::HybridPlanner& planner, std::size_t b, std::size_t e, double limit,
                      std::vector<std::uint64_t>& load, std::vector<hybrid_detail::Gap>& chosen) = 0;

 private:
  HybridOptions opts_;
  std::unique_ptr<hybrid_detail::HybridPlanner> planner_;
  std::unique_ptr<hybrid_detail::HybridExecutor> executor_;
};

class PoochPolicy final : public HybridPolicy {
 public:
  static constexpr std::string_view kName = "pooch";
  static constexpr std::string_view kHelp =
      "PoocH-like hybrid: greedily swap or recompute the tensor whose action adds the least "
      "estimated time per byte saved at the peak, re-simulated on serial copy lanes";
  static std::vector<ParamDoc> param_docs() { return common_param_docs(); }
  static std::unique_ptr<Policy> create(const Params& p);
  using HybridPolicy::HybridPolicy;

 protected:
  void choose(const hybrid_detail::HybridPlanner& planner, std::size_t b, std::size_t e, double limit,
              std::vector<std::uint64_t>& load, std::vector<hybrid_detail::Gap>& chosen) override;
};

class CapuchinPolicy final : public HybridPolicy {
 public:
  static constexpr std::string_view kName = "capuchin";
  static constexpr std::string_view kHelp =
      "Capuchin-like hybrid: swap tensors by descending free time while the copies hide, then "
      "swap or recompute by memory saving per second (MSPS), whichever adds less time";
  static std::vector<ParamDoc> param_docs() { return common_param_docs(); }
  static std::unique_ptr<Policy> create(const Params& p);
  using HybridPolicy::HybridPolicy;

 protected:
  void choose(const hybrid_detail::HybridPlanner& planner, std::size_t b, std::size_t e, double limit,
              std::vector<std::uint64_t>& load, std::vector<hybrid_detail::Gap>& chosen) override;
};

}  // namespace coopsim
