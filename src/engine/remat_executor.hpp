// Private to src/engine: the executor for recompute policies (Policy::remat_options(): dtr, dte,
// coop, and the pooch/capuchin hybrids that also swap). Memory holds values of the RematGraph,
// each storage's current one answering for it; the rules are in remat_executor.cpp, running ops
// and rematerializing in remat_compute.cpp, the hybrids' swaps in remat_hybrid.cpp. See
// event_loop.hpp for the split.
#pragma once

#include <algorithm>
#include <vector>

#include "event_loop.hpp"

namespace coopsim::engine_detail {

// Appends x unless v holds it already (op lists are short: a linear scan).
template <class Id>
inline void push_unique(std::vector<Id>& v, Id x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

class RematExecutor final : public Executor {
 public:
  RematExecutor(EventLoop& loop, const Trace& trace, const RematOptions& options)
      : Executor(loop, trace),
        options_(options),
        current_(trace.tensors.size(), kNoValue),
        acc_grad_(trace.tensors.size(), 0),
        storage_version_(trace.tensors.size(), 0),
        history_(trace.tensors.size()),
        lifetime_start_(trace.tensors.size(), 0),
        mutated_state_(trace.tensors.size(), 0) {}

  // MemoryView: a storage answers as its current value.
  [[nodiscard]] Residency residency(TensorId t) const override;
  [[nodiscard]] bool pinned(TensorId t) const override {
    const ValueId v = current_[index_of(t)];
    return v != kNoValue && graph_.value(v).pins > 0;
  }
  [[nodiscard]] std::optional<Block> block(TensorId t) const override {
    const ValueId v = current_[index_of(t)];
    if (v == kNoValue || graph_.value(v).state != ValueState::Resident) return std::nullopt;
    return graph_.value(v).block;
  }
  [[nodiscard]] const RematGraph* remat() const override { return &graph_; }
  [[nodiscard]] ValueId current_value(TensorId t) const override { return current_[index_of(t)]; }

  // Executor
  void setup() override;
  void seed(TensorId storage, const Block& b) override;
  void process(const TraceEvent& e) override;
  void complete(const Completion& c) override;
  void apply(const Action& a) override;
  void check_residency() const override;

 private:
  // remat_executor.cpp: trace events, release and eviction
  void alloc_storage(const TraceEvent& e);
  void free_storage(TensorId storage);
  void evict_value(ValueId value, bool forced);
  void release_value(ValueId value);
  void drop_value(ValueId value);
  void release_kept();
  void record_thrash();
  // remat_compute.cpp: an op of the trace, and the recomputations that bring values back
  void compute(OpId op_id);
  bool materialize(ValueId value);
  void note_history(TensorId storage, ExecutionId execution);
  bool settle_history(TensorId storage, bool all_lifetimes);
  bool recompute(ExecutionId execution, ValueId keep);
  // remat_hybrid.cpp: swaps under recompute policies (PoocH-like, Capuchin-like hybrids)
  void swap_out(ValueId value);
  bool swap_in(ValueId value);
  bool bring_back(ValueId value);  // a swapped value made resident again (stalls)
  [[nodiscard]] static bool in_swap(ValueState s) {
    return s == ValueState::SwappingOut || s == ValueState::SwappedOut || s == ValueState::SwappingIn;
  }
  // Parameters, step inputs, optimizer state and accumulated gradients: never recomputed.
  [[nodiscard]] bool constant(TensorId storage) const {
    const TensorRole r = trace_.tensor(storage).role;
    return r == TensorRole::Parameter || r == TensorRole::Input || r == TensorRole::OptimizerState ||
           acc_grad_[index_of(storage)] != 0;
  }
  // State keeps no history (the auditor's rule): constants, and inputs updated in place by an
  // op with outputs of its own, for the rest of their lifetime.
  [[nodiscard]] bool state(TensorId storage) const {
    return constant(storage) || mutated_state_[index_of(storage)] != 0;
  }
  // The run log: a value's version is the one its storage had when the value was written.
  [[nodiscard]] LogRef value_ref(ValueId value) const {
    const RematValue& x = graph_.value(value);
    return LogRef{x.storage, value_version_[index_of(value)], x.block.addr, x.block.size};
  }

  RematOptions options_;
  RematGraph graph_;
  std::vector<ValueId> current_;                // per storage: the value it holds (kNoValue: none)
  std::vector<std::uint8_t> acc_grad_;          // per storage: an accumulated gradient (unevictable)
  SimTime thrash_at_{-1};                       // recompute time at which the run thrashes (-1: never)
  std::vector<std::uint32_t> storage_version_;  // per storage: writes since its trace allocation
  // per storage: the executions that read or wrote it, not yet settled (settle_history), and
  // where in that list its current lifetime starts
  std::vector<std::vector<ExecutionId>> history_;
  std::vector<std::size_t> lifetime_start_;
  // per storage: updated in place by an op with outputs of its own in this lifetime (state until freed)
  std::vector<std::uint8_t> mutated_state_;
  std::vector<std::uint32_t> value_version_;  // per value: its content version
  std::vector<std::uint32_t> exec_record_;    // log record of each execution's first run
  // Released values kept (resident, or on the host) for evicted values that needed them.
  std::vector<ValueId> kept_;
};

}  // namespace coopsim::engine_detail
