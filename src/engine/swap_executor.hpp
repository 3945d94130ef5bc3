// Private to src/engine: the executor for policies that swap or never act (keep, the online and
// offline swap policies). Memory holds trace storages, each not allocated, resident, on the host
// or in flight on a copy stream; an op pins its storages for the rest of its event and brings
// the swapped ones back on demand (the compute stream stalls). See event_loop.hpp for the split.
#pragma once

#include <vector>

#include "event_loop.hpp"

namespace coopsim::engine_detail {

class SwapExecutor final : public Executor {
 public:
  SwapExecutor(EventLoop& loop, const Trace& trace)
      : Executor(loop, trace),
        residency_(trace.tensors.size(), Residency::NotAllocated),
        blocks_(trace.tensors.size()),
        pin_epoch_(trace.tensors.size(), 0),
        freed_in_flight_(trace.tensors.size(), 0),
        version_(trace.tensors.size(), 0) {}

  // MemoryView
  [[nodiscard]] Residency residency(TensorId t) const override { return residency_[index_of(t)]; }
  [[nodiscard]] bool pinned(TensorId t) const override { return pin_epoch_[index_of(t)] == epoch_; }
  [[nodiscard]] std::optional<Block> block(TensorId t) const override {
    const Residency r = residency_[index_of(t)];
    if (r == Residency::NotAllocated || r == Residency::SwappedOut) return std::nullopt;
    return blocks_[index_of(t)];
  }

  // Executor
  void seed(TensorId storage, const Block& b) override;
  void process(const TraceEvent& e) override;
  void complete(const Completion& c) override;
  void apply(const Action& a) override;

 private:
  // Places storage t, asking the policy for room as often as it can help; false on OOM.
  bool allocate_storage(TensorId t, std::uint16_t stream);
  void free_storage(TensorId t);
  void ensure_resident(TensorId t);
  void start_swap_out(TensorId t);
  void start_swap_in(TensorId t);
  [[nodiscard]] LogRef storage_ref(TensorId storage) const;
  void log_compute(OpId op, SimTime start);  // bumps the written storages' versions

  // Per storage, indexed by index_of(TensorId):
  std::vector<Residency> residency_;
  std::vector<Block> blocks_;
  // A storage is pinned while the event that uses it runs: its pin epoch is the event's.
  std::vector<std::uint32_t> pin_epoch_;
  std::uint32_t epoch_ = 1;
  std::vector<std::uint8_t> freed_in_flight_;  // freed by the trace while a copy was in flight
  std::vector<std::uint32_t> version_;         // per storage: writes since its trace allocation
};

}  // namespace coopsim::engine_detail
