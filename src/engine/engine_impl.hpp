// Private to src/engine: the Engine class behind run_engine() (engine.hpp), split over
// engine.cpp (event processing), engine_transfers.cpp (copy streams and completions) and
// engine_state.cpp (memory observation, OOM points, recorded addresses and initial state) and
// engine_remat.cpp (recompute policies: values, rematerialization, eviction, release).
#pragma once

#include "coopsim/engine/engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <queue>
#include <stdexcept>

#include "coopsim/base/error.hpp"

namespace coopsim::engine_detail {

// "running op 7 (6000000000000000000 ns) at 12 ns": what a clock overflow was doing.
inline std::string op_overflow(const OpInfo& op, SimTime at, const char* doing) {
  return fmt::format("{} op {} ({} ns) at {} ns", doing, op.file_id, op.duration.count(), at.count());
}

// Appends x unless v holds it already (op lists are short: a linear scan).
inline void push_unique(std::vector<std::uint32_t>& v, std::uint32_t x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

struct Completion {
  SimTime time;           // when the copy ends
  SimTime start;          // when it began on its stream
  std::uint8_t priority;  // at equal time: swap-out completions (which free memory) first
  std::uint64_t seq;
  std::uint32_t tensor;  // trace storage; under recompute policies the RematGraph value
  Direction direction;
  friend bool operator>(const Completion& a, const Completion& b) {
    if (a.time != b.time) return a.time > b.time;
    if (a.priority != b.priority) return a.priority > b.priority;
    return a.seq > b.seq;
  }
};

class Engine final : public MemoryView {
 public:
  Engine(const Trace& trace, Allocator& allocator, Policy& policy, const EngineOptions& options, Report& report)
      : trace_(trace),
        alloc_(allocator),
        policy_(policy),
        opt_(options),
        rep_(report),
        residency_(trace.tensors.size(), Residency::NotAllocated),
        blocks_(trace.tensors.size()),
        pin_epoch_(trace.tensors.size(), 0),
        freed_in_flight_(trace.tensors.size(), 0),
        version_(trace.tensors.size(), 0) {}

  void run();

  // MemoryView
  [[nodiscard]] SimTime now() const override { return now_; }
  [[nodiscard]] const Trace& trace() const override { return trace_; }
  [[nodiscard]] std::size_t event_index() const override { return index_; }
  [[nodiscard]] Residency residency(TensorId t) const override;
  [[nodiscard]] bool pinned(TensorId t) const override;
  [[nodiscard]] std::optional<Block> block(TensorId t) const override {
    if (remat_) {
      const std::uint32_t v = current_[index_of(t)];
      if (v == kNoIndex || graph_.value(v).state != ValueState::Resident) return std::nullopt;
      return graph_.value(v).block;
    }
    const Residency r = residency_[index_of(t)];
    if (r == Residency::NotAllocated || r == Residency::SwappedOut) return std::nullopt;
    return blocks_[index_of(t)];
  }
  [[nodiscard]] AllocatorStats allocator_stats() const override { return alloc_.stats(); }
  [[nodiscard]] const Allocator& allocator() const override { return alloc_; }
  [[nodiscard]] Bytes budget() const override { return opt_.budget; }
  [[nodiscard]] const LinkModel& link() const override { return opt_.link; }
  [[nodiscard]] const RematGraph* remat() const override { return remat_ ? &graph_ : nullptr; }
  [[nodiscard]] std::uint32_t current_value(TensorId t) const override {
    return remat_ ? current_[index_of(t)] : kNoIndex;
  }
  void count_scanned(std::uint64_t n) const override { scanned_ += n; }

 private:
  void process(const TraceEvent& e);
  // The policy loop: allocate, and while that fails let the policy make room. nullopt after
  // recording an OOM (the allocation was for trace tensor `t`).
  std::optional<Block> obtain_block(AllocRequest request);
  bool allocate_storage(std::uint32_t t, std::uint16_t stream);
  void free_storage(std::uint32_t t);
  void ensure_resident(std::uint32_t t);
  void apply(const std::vector<Action>& actions);
  void start_swap_out(std::uint32_t t);
  void start_swap_in(std::uint32_t t);
  // Books a copy of `size` on the stream of direction `d`: [start, end).
  std::pair<SimTime, SimTime> book_transfer(Direction d, Bytes size);
  void drain_until(SimTime t);
  bool wait_for_next_completion();
  void complete(const Completion& c);
  void observe_memory();
  void check_address(std::uint64_t recorded, std::uint64_t placed);
  void record_oom(std::uint32_t t, Bytes requested);
  void seed_initial_state();
  // engine_remat.cpp
  void remat_setup();
  // engine_simrd.cpp: dtr.compat=simrd hands the replay to simrd::replay
  [[nodiscard]] bool simrd_profile() const;
  void run_simrd_profile();
  void remat_process(const TraceEvent& e);
  void remat_alloc(const TraceEvent& e);
  void remat_free(std::uint32_t storage);
  void remat_compute(std::uint32_t op_index);
  bool materialize(std::uint32_t value);
  bool recompute(std::uint32_t execution, std::uint32_t keep);
  void evict_value(std::uint32_t value, bool forced);
  void release_value(std::uint32_t value);
  void drop_value(std::uint32_t value);
  void free_block(std::uint32_t storage, const Block& b);
  void record_thrash();
  void check_remat_state() const;
  // engine_hybrid.cpp: swaps under recompute policies (PoocH-like, Capuchin-like hybrids)
  void remat_swap_out(std::uint32_t value);
  bool remat_swap_in(std::uint32_t value);
  void remat_complete(const Completion& c);
  bool bring_back(std::uint32_t value);  // a swapped value made resident again (stalls)
  [[nodiscard]] static bool in_swap(ValueState s) {
    return s == ValueState::SwappingOut || s == ValueState::SwappedOut || s == ValueState::SwappingIn;
  }
  // engine_log.cpp: the run's event log (EngineOptions::log), written only when it is set
  [[nodiscard]] bool logging() const { return opt_.log != nullptr; }
  [[nodiscard]] LogRef storage_ref(std::uint32_t storage) const;  // swap engine
  [[nodiscard]] LogRef value_ref(std::uint32_t value) const;      // recompute engine
  void log_alloc(std::uint32_t storage, const Block& b, bool fresh);
  void log_free(std::uint32_t storage, const Block& b);
  void log_transfer(LogKind kind, const Completion& c, const LogRef& ref);
  void log_stall(SimTime from, SimTime to);
  void log_memory();
  void log_compute(std::uint32_t op, SimTime start);  // swap engine: bumps versions, logs the op
  std::uint32_t log_op(LogKind kind, std::uint32_t op, SimTime start, const std::vector<LogRef>& reads,
                       const std::vector<LogRef>& writes, std::uint32_t origin = kNoRecord);
  template <class F>
  auto timed_policy_call(F&& f);
  // t + d on the engine's clocks; a run whose time would pass 2^63 - 1 ns stops with an Error
  // naming the event and `what()` (docs/limits.md, "Arithmetic"). Every other time the engine
  // keeps (stall, recompute time, trace compute time, op time) is a part of the clock.
  template <class F>
  SimTime later(SimTime t, SimTime d, F&& what) const {
    if (const auto sum = checked_add(t, d)) return *sum;
    time_overflow(what());
  }
  [[noreturn]] void time_overflow(const std::string& what) const;

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
  std::vector<std::uint32_t> version_;  // per storage: writes since its trace allocation

  SimTime now_{0}, ideal_{0}, d2h_free_{0}, h2d_free_{0};
  std::int64_t t0_ = -1;
  std::priority_queue<Completion, std::vector<Completion>, std::greater<>> queue_;
  std::uint64_t seq_ = 0;
  std::uint32_t swap_outs_in_flight_ = 0;  // queued D2H completions (they free memory)
  std::size_t index_ = 0;
  std::uint32_t iteration_ = 0;
  bool oom_ = false;  // the run stopped: out of memory, or (recompute policies) thrashing
  std::chrono::steady_clock::duration search_{0};
  mutable std::uint64_t scanned_ = 0;

  // Recompute policies only (remat_ set): the graph, each storage's current value, which
  // storages are accumulated gradients, and the recompute time at which the run thrashes.
  std::optional<RematOptions> remat_;
  RematGraph graph_;
  std::vector<std::uint32_t> current_;
  std::vector<std::uint8_t> acc_grad_;
  SimTime thrash_at_{-1};
  SimTime op_time_{0};                        // the trace's op time (executed ops, no recomputation)
  std::vector<std::uint32_t> value_version_;  // content version of each value
  std::vector<std::uint32_t> exec_record_;    // log record of each execution's first run
  std::uint64_t logged_allocated_ = ~0ULL, logged_reserved_ = ~0ULL;
  bool simrd_done_ = false;  // dtr.compat=simrd: the replay ran in remat_setup; events are skipped
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
