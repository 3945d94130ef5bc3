// Private to src/engine: the Engine class behind run_engine() (engine.hpp), split over
// engine.cpp (event processing), engine_transfers.cpp (copy streams and completions) and
// engine_state.cpp (memory observation, OOM points, recorded addresses and initial state).
#pragma once

#include "coopsim/engine.hpp"

#include <algorithm>
#include <chrono>
#include <queue>
#include <stdexcept>

#include "coopsim/error.hpp"


namespace coopsim::engine_detail {

struct Completion {
  SimTime time;
  std::uint8_t priority;  // at equal time: swap-out completions (which free memory) first
  std::uint64_t seq;
  std::uint32_t tensor;
  Direction direction;
  friend bool operator>(const Completion& a, const Completion& b) {
    if (a.time != b.time) return a.time > b.time;
    if (a.priority != b.priority) return a.priority > b.priority;
    return a.seq > b.seq;
  }
};

class Engine final : public MemoryView {
 public:
  Engine(const Trace& trace, Allocator& allocator, Policy& policy, const EngineOptions& options,
         Report& report)
      : trace_(trace),
        alloc_(allocator),
        policy_(policy),
        opt_(options),
        rep_(report),
        residency_(trace.tensors.size(), Residency::NotAllocated),
        blocks_(trace.tensors.size()),
        pin_epoch_(trace.tensors.size(), 0),
        freed_in_flight_(trace.tensors.size(), 0) {}

  void run();

  // MemoryView
  [[nodiscard]] SimTime now() const override { return now_; }
  [[nodiscard]] const Trace& trace() const override { return trace_; }
  [[nodiscard]] std::size_t event_index() const override { return index_; }
  [[nodiscard]] Residency residency(TensorId t) const override { return residency_[index_of(t)]; }
  [[nodiscard]] bool pinned(TensorId t) const override { return pin_epoch_[index_of(t)] == epoch_; }
  [[nodiscard]] std::optional<Block> block(TensorId t) const override {
    const Residency r = residency_[index_of(t)];
    if (r == Residency::NotAllocated || r == Residency::SwappedOut) return std::nullopt;
    return blocks_[index_of(t)];
  }
  [[nodiscard]] AllocatorStats allocator_stats() const override { return alloc_.stats(); }
  [[nodiscard]] const Allocator& allocator() const override { return alloc_; }
  [[nodiscard]] Bytes budget() const override { return opt_.budget; }

 private:
  void process(const TraceEvent& e);
  bool allocate_storage(std::uint32_t t, std::uint16_t stream);
  void free_storage(std::uint32_t t);
  void ensure_resident(std::uint32_t t);
  void apply(const std::vector<Action>& actions);
  void start_swap_out(std::uint32_t t);
  void start_swap_in(std::uint32_t t);
  void drain_until(SimTime t);
  bool wait_for_next_completion();
  void complete(const Completion& c);
  void observe_memory();
  void check_address(std::uint64_t recorded, std::uint64_t placed);
  void record_oom(std::uint32_t t, Bytes requested);
  void seed_initial_state();
  template <class F>
  auto timed_policy_call(F&& f);

  const Trace& trace_;
  Allocator& alloc_;
  Policy& policy_;
  const EngineOptions& opt_;
  Report& rep_;

  std::vector<Residency> residency_;
  std::vector<Block> blocks_;
  std::vector<std::uint32_t> pin_epoch_;
  std::vector<std::uint8_t> freed_in_flight_;  // freed by the trace while a copy was in flight
  std::uint32_t epoch_ = 1;

  SimTime now_{0}, ideal_{0}, d2h_free_{0}, h2d_free_{0};
  std::int64_t t0_ = -1;
  std::priority_queue<Completion, std::vector<Completion>, std::greater<>> queue_;
  std::uint64_t seq_ = 0;
  std::uint32_t swap_outs_in_flight_ = 0;  // queued D2H completions (they free memory)
  std::size_t index_ = 0;
  std::uint32_t iteration_ = 0;
  bool oom_ = false;
  std::chrono::steady_clock::duration search_{0};
};

template <class F>
auto Engine::timed_policy_call(F&& f) {
  ++rep_.counters.policy_decisions;
  if (!opt_.measure_search_latency) return f();
  const auto start = std::chrono::steady_clock::now();
  auto result = f();
  search_ += std::chrono::steady_clock::now() - start;
  return result;
}

}  // namespace coopsim::engine_detail
