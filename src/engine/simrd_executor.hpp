// Private to src/engine: the third execution model, DTR's reference simulator's runtime
// (Policy::execution_model() == ExecutionModel::SimrdRuntime: dtr.compat=simrd). Its model (one
// memory counter, storages, simrd's pool order) cannot be expressed through the allocator and the
// per-value graph, so setup() hands the whole trace to simrd::simulate (src/engine/simrd/) and the
// events that follow are already accounted for.
#pragma once

#include "event_loop.hpp"

namespace coopsim::engine_detail {

class SimrdExecutor final : public Executor {
 public:
  SimrdExecutor(EventLoop& loop, const Trace& trace, EvictionScore heuristic, double overhead_limit)
      : Executor(loop, trace), heuristic_(heuristic), overhead_limit_(overhead_limit) {}

  // MemoryView: nothing lives in the allocator; simrd's counter holds the run's memory.
  [[nodiscard]] Residency residency(TensorId) const override { return Residency::NotAllocated; }
  [[nodiscard]] bool pinned(TensorId) const override { return false; }
  [[nodiscard]] std::optional<Block> block(TensorId) const override { return std::nullopt; }

  void setup() override;
  void seed(TensorId, const Block&) override {}
  void process(const TraceEvent&) override {}
  void complete(const Completion&) override {}
  void apply(const Action&) override {}

 private:
  EvictionScore heuristic_;
  double overhead_limit_;
};

}  // namespace coopsim::engine_detail
