// dte: MegEngine's DTR heuristic as Coop's DTE baseline (docs/models/dtr-dte.md;
// ONEFLOW_REMAT_HEURISTIC_DTE=1 in Oneflow-Inc/oneflow @25c8978c1c tensor_storage.cpp). The
// same per-tensor loop as dtr, scoring eq-class cost / (staleness x (bytes + the free bytes
// contiguous to the tensor on both sides)), so tensors next to free space go first; no
// 1.0001^recompute_times factor and no epsilon terms (as in Coop's baseline). Copy-on-write
// in-place updates by default. On the fungible allocator there are no neighbours: it scores as
// dtr-eq.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "coopsim/policy/policy.hpp"
#include "coopsim/policy/remat/victim.hpp"

namespace coopsim {

class DtePolicy final : public Policy {
 public:
  static constexpr std::string_view kName = "dte";
  static constexpr std::string_view kHelp =
      "DTE (MegEngine DTR): per-tensor eviction whose size term adds the free bytes adjacent to "
      "the tensor";
  static std::vector<ParamDoc> param_docs() { return remat_option_docs(InPlaceMode::CopyOnWrite); }
  static std::unique_ptr<Policy> create(const Params& p) { return std::make_unique<DtePolicy>(parse_remat_options(p)); }

  explicit DtePolicy(RematOptions options) : options_(options) {}

  [[nodiscard]] std::vector<Action> on_alloc_failure(const AllocRequest&, const MemoryView& view) override {
    if (auto v = find_victim(view, EvictionScore::Dte, draws_)) return {Action::evict(*v)};
    return {};
  }
  [[nodiscard]] std::optional<RematOptions> remat_options() const override { return options_; }

 private:
  SeededDraws draws_{0};  // unused by dte's score
  RematOptions options_;
};

}  // namespace coopsim
