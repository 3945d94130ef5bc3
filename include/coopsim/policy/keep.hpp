// keep: no eviction, no swapping. Every tensor stays where the allocator put it until the trace
// frees it; an allocation that does not fit ends the run with the exact OOM point.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "coopsim/policy/policy.hpp"

namespace coopsim {

class KeepPolicy final : public Policy {
 public:
  static constexpr std::string_view kName = "keep";
  static constexpr std::string_view kHelp = "no eviction or swapping: replay to the end or report the exact OOM point";
  static std::vector<ParamDoc> param_docs() { return {}; }
  static std::unique_ptr<Policy> create(const Params&) { return std::make_unique<KeepPolicy>(); }

  [[nodiscard]] std::vector<Action> on_alloc_failure(const AllocRequest&, const MemoryView&) override { return {}; }
  [[nodiscard]] bool needs_dataflow() const override { return false; }
};

}  // namespace coopsim
