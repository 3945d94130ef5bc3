// coop: Coop's co-optimization of tensor allocation and rematerialization (Zhang et al.,
// "Coop: Memory is not a Commodity", NeurIPS 2023; code Oneflow-Inc/oneflow @25c8978c1c
// oneflow/core/vm/remat/*; docs/models/coop.md). Three techniques, each switchable:
//  * layout-aware eviction: after best fit fails, the O(N) sliding window over the
//    allocator's address-ordered ranges finds the contiguous run (free ranges cost 0; pinned or
//    unevictable tensors and segment boundaries are barriers) of minimum summed h = eq-class
//    cost / staleness that is at least the rounded request, and evicts exactly its tensors; the
//    allocator's best fit then lands in the merged hole. When no window yields an eviction (no
//    window, or one that is already free but the allocator still refuses, e.g. PyTorch's pools)
//    and on address-blind allocators (fungible), it falls back to the per-tensor loop with the
//    same h (so OOM means nothing evictable is left);
//  * op-guided allocation / cheap tensor partitioning: expensive tensors take the low end
//    of the best-fit hole, cheap ones the high end (AllocRequest::high_end; honoured by bestfit).
//    Classified by producing op name (OneFlow's is_high_op list, mapped to ATen names) or by
//    cost density (op time / bytes) against a threshold (0 = the trace's median). Tensors with
//    no producing op (parameters, inputs) count as expensive: they are unevictable and belong
//    together at the low end;
//  * recomputable in-place: the engine's InPlaceMode::Recomputable; off = copy-on-write.
// `ablation` takes the paper's legend labels and turns one technique off.
// `compat=oneflow` follows OneFlow's code where coopsim's defaults differ (docs/models/coop.md,
// "compat=oneflow"): only the outputs of OneFlow's six expensive ops (allocator.cpp:423-424,
// mapped to the ATen ops OneFlow would run as them) take the low end, everything else the high
// end, parameters and inputs included (their ops, copies and initializers, are cheap there); and
// when no window yields an eviction the allocation fails (EvictAndFindPieceOnce has no per-tensor
// fallback: allocator.cpp:534-629, 671-673).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "coopsim/policy/policy.hpp"
#include "coopsim/policy/remat/victim.hpp"
#include "remat/layout_walk.hpp"
#include "remat/sliding_window.hpp"

namespace coopsim {

struct CoopOptions {
  bool layout_aware_eviction = true;
  bool op_guided_allocation = true;
  bool partition_by_density = false;  // false: by op name
  double density_threshold = 0.0;     // ns per byte; 0 = the trace's median density
  RematOptions remat{DeallocMode::Eager, InPlaceMode::Recomputable, 2.0};
  bool oneflow_compat = false;
};

class CoopPolicy final : public Policy {
 public:
  static constexpr std::string_view kName = "coop";
  static constexpr std::string_view kHelp =
      "Coop: sliding-window (contiguous) eviction, cheap/expensive tensor partitioning and "
      "recomputable in-place, each switchable (ablation)";
  static std::vector<ParamDoc> param_docs();
  static std::unique_ptr<Policy> create(const Params& p);

  explicit CoopPolicy(CoopOptions o) : opts_(o) {}

  void prepare(const MemoryView& view) override;
  [[nodiscard]] std::vector<Action> on_alloc_failure(const AllocRequest& request, const MemoryView& view) override;
  [[nodiscard]] std::optional<RematOptions> remat_options() const override { return opts_.remat; }
  [[nodiscard]] bool place_high(TensorId storage, const MemoryView&) const override {
    const std::uint32_t s = index_of(storage);
    return opts_.op_guided_allocation && s < cheap_.size() && cheap_[s] != 0;
  }

  // OneFlow's expensive ops (is_high_op) and their ATen counterparts; `name` as in traces
  // ("aten::convolution", "conv2d", ...).
  static bool expensive_op_name(std::string_view name);
  // compat=oneflow: OneFlow's six names and only the ATen ops OneFlow runs as one of them.
  static bool oneflow_expensive_op_name(std::string_view name);
  [[nodiscard]] const std::vector<std::uint8_t>& cheap() const { return cheap_; }

 private:
  std::vector<Action> window_eviction(const AllocRequest& request, const MemoryView& view);
  void pieces_from_ranges(const MemoryView& view);
  bool pieces_from_layout(const MemoryView& view);
  void add_barrier();
  void add_candidate(const RematGraph& g, ValueId v, Bytes size);

  CoopOptions opts_;
  std::vector<std::uint8_t> cheap_;  // per trace tensor (storage root)
  SeededDraws draws_{0};             // unused by coop's score
  // Scratch of the window search, kept between failures.
  std::vector<WindowPiece> pieces_;
  std::vector<ValueId> owner_;  // the value evicted with each piece, or kNoValue
  LayoutScratch layout_scratch_;
};

}  // namespace coopsim
