// dtr: Dynamic Tensor Rematerialization's eviction loop with its heuristic family, selectable by
// name (Kirisame et al., ICLR 2021; uwsampl/dtr-prototype @eff53cc4 simrd/simrd/heuristic/*.py;
// docs/models/dtr-dte.md). On a failed allocation it evicts the argmin of the heuristic over
// the evictable resident tensors (address order, lowest address on ties) and lets the engine
// retry, until the request fits or nothing is evictable (OOM). Default heuristic dtr-eq (the
// union-find approximation the DTR prototype and Coop's DTR baseline use) with copy-on-write
// in-place updates (Coop's baseline).
//
// `compat=simrd` selects the simrd compatibility profile instead: the policy asks for the
// engine's SimrdRuntime execution model (include/coopsim/engine/simrd.hpp), which follows the
// rules of DTR's reference simulator (RuntimeV2EagerOptimized) rather than coopsim's engine.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "coopsim/policy/policy.hpp"
#include "coopsim/policy/remat/victim.hpp"

namespace coopsim {

class DtrPolicy final : public Policy {
 public:
  static constexpr std::string_view kName = "dtr";
  static constexpr std::string_view kHelp =
      "DTR: evict the tensor with the smallest heuristic score until the allocation fits "
      "(heuristics dtr, dtr-eq, dtr-local, lru, largest, msps, random)";
  static std::vector<ParamDoc> param_docs();
  static std::unique_ptr<Policy> create(const Params& p);

  DtrPolicy(EvictionScore score, std::uint64_t seed, RematOptions options, bool simrd_compat = false)
      : score_(score), draws_(seed), options_(options), simrd_compat_(simrd_compat) {}

  // The simrd compatibility profile (dtr.compat=simrd): the engine's SimrdRuntime model.
  [[nodiscard]] ExecutionModel execution_model() const override {
    return simrd_compat_ ? ExecutionModel::SimrdRuntime : ExecutionModel::Remat;
  }
  [[nodiscard]] RuntimeRules runtime_rules() const override { return RuntimeRules{score_, options_.thrash_limit}; }
  [[nodiscard]] EvictionScore score() const { return score_; }

  [[nodiscard]] std::vector<Action> on_alloc_failure(const AllocRequest& request, const MemoryView& view) override;
  [[nodiscard]] std::optional<RematOptions> remat_options() const override { return options_; }

 private:
  EvictionScore score_;
  SeededDraws draws_;
  RematOptions options_;
  bool simrd_compat_ = false;
};

}  // namespace coopsim
