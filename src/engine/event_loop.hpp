// Private to src/engine: the engine behind run_engine() (engine.hpp) is an event loop driving one
// of three executors, one per execution model, chosen once per run from
// Policy::execution_model() (engine.cpp):
//  * EventLoop (this header; event_loop.cpp, event_loop_state.cpp, event_loop_log.cpp): the
//    clock, the trace's events in order, the copy streams and their completion queue, memory
//    observation, OOM points, the policy loop (allocate; on failure ask the policy) and the run
//    log. It knows nothing of what a tensor's memory holds.
//  * SwapExecutor (swap_executor.hpp): trace storages resident, on the host or in flight, for
//    every policy that only swaps (or never acts).
//  * RematExecutor (remat_executor.hpp): DTR's values and executions for recompute policies,
//    with the hybrids' swaps.
//  * SimrdExecutor (simrd_executor.hpp): DTR's reference simulator's runtime (src/engine/simrd/),
//    which simulates the whole trace in setup().
// The loop reaches the executor through the small Executor interface, once per event, per
// completed copy and per policy action, never per tensor: so few virtual calls that simulation rates
// did not move when the engine was split (scripts/bench.sh measures them). The executor is also
// the MemoryView the policy sees, so a policy's queries still take one virtual call each.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <queue>
#include <stdexcept>

#include "coopsim/base/error.hpp"
#include "coopsim/engine/engine.hpp"
#include "coopsim/engine/report_builder.hpp"

namespace coopsim::engine_detail {

struct Completion {
  SimTime time;           // when the copy ends
  SimTime start;          // when it began on its stream
  std::uint8_t priority;  // at equal time: swap-out completions (which free memory) first
  std::uint64_t seq;
  std::uint32_t subject;  // index of what moves: a storage (SwapExecutor) or a ValueId (RematExecutor)
  Direction direction;
  friend bool operator>(const Completion& a, const Completion& b) {
    if (a.time != b.time) return a.time > b.time;
    if (a.priority != b.priority) return a.priority > b.priority;
    return a.seq > b.seq;
  }
};

// The allocator's state when a request failed, as memory_viz's segsum shows it, with the largest
// live blocks and their tensors (oom_explain.cpp).
OomSegsum explain_oom(const Allocator& allocator, const MemoryView& view, const Trace& trace);

class EventLoop;

// What the loop asks of an executor. The MemoryView parts that belong to the loop (time,
// allocator, budget, link) are answered here, the residency parts by the executor.
class Executor : public MemoryView {
 public:
  Executor(EventLoop& loop, const Trace& trace) : loop_(loop), trace_(trace) {}

  [[nodiscard]] SimTime now() const final;
  [[nodiscard]] const Trace& trace() const final { return trace_; }
  [[nodiscard]] EventId event_index() const final;
  [[nodiscard]] AllocatorStats allocator_stats() const final;
  [[nodiscard]] const Allocator& allocator() const final;
  [[nodiscard]] Bytes budget() const final;
  [[nodiscard]] const LinkModel& link() const final;
  void count_scanned(std::uint64_t n) const final;
  [[nodiscard]] bool cross_check() const final;

  // Once, after the allocator is prepared and before the recorded initial state is seeded.
  virtual void setup() {}
  // A storage of the recorded initial state, resident in `b` from the start.
  virtual void seed(TensorId storage, const Block& b) = 0;
  // One trace event, after the clock moved to it and the copies ending by then completed.
  virtual void process(const TraceEvent& e) = 0;
  // A copy ends (for a swap-out the loop has already counted it off the copies in flight).
  virtual void complete(const Completion& c) = 0;
  // One action of the policy, while the run has not stopped.
  virtual void apply(const Action& a) = 0;
  // engine.residency_checks, after every event: throws InvariantError on a broken plan.
  virtual void check_residency() const {}

 protected:
  EventLoop& loop_;
  const Trace& trace_;
};

// The loop is the allocator's SegmentObserver while the run is logged (segment_changed).
class EventLoop : private SegmentObserver {
 public:
  EventLoop(const Trace& trace, Allocator& allocator, Policy& policy, const EngineOptions& options,
            ReportBuilder& report)
      : trace_(trace), alloc_(allocator), policy_(policy), opt_(options), rep_(report) {}

  void run(Executor& exec);

  // --- For the executors ---
  [[nodiscard]] SimTime now() const { return now_; }
  [[nodiscard]] SimTime op_time() const { return op_time_; }
  // The event being processed, as reports and the view name it. EventId is 32 bits: it assumes
  // fewer than 2^32 - 1 events (limits.max_events defaults to 5 x 10^8 but is not capped there).
  [[nodiscard]] EventId event_index() const { return EventId{static_cast<std::uint32_t>(index_)}; }
  [[nodiscard]] std::uint32_t iteration() const { return iteration_; }
  [[nodiscard]] bool stopped() const { return oom_; }  // out of memory or thrashing
  [[nodiscard]] Allocator& alloc() const { return alloc_; }
  [[nodiscard]] const Policy& policy() const { return policy_; }
  [[nodiscard]] const EngineOptions& options() const { return opt_; }
  [[nodiscard]] ReportBuilder& report() const { return rep_; }

  // The policy loop: allocate, and while that fails let the policy make room. nullopt after
  // recording an OOM (the allocation was for trace storage `request.tensor`).
  std::optional<Block> obtain_block(AllocRequest request);
  // Gives `b` of `storage` back to the allocator: counted, logged and observed.
  void release_block(TensorId storage, const Block& b);
  // Starts a copy of `size` bytes of `subject` on the stream of direction `d`, counted as a swap.
  void start_copy(Direction d, Bytes size, std::uint32_t subject);
  // Stalls the compute stream until the earliest copy in flight completes; false when none is.
  bool wait_for_next_completion();
  // Runs a trace op on the compute stream (clock, trace compute, op time); returns its start.
  SimTime run_op(const OpInfo& op);
  // Moves the clock by `d` (a recomputation); returns the start. `what` names it on overflow.
  template <class F>
  SimTime advance(SimTime d, F&& what) {
    const SimTime start = now_;
    now_ = later(now_, d, std::forward<F>(what));
    return start;
  }
  void observe_memory();
  void check_address(std::uint64_t recorded, std::uint64_t placed);
  // Ends the run (the caller gives the report its oom or thrash point).
  void stop(RunStatus status) {
    oom_ = true;
    rep_.stopped(status);
  }
  // dtr.compat=simrd: the simulation ran elsewhere and hands over its clocks.
  void set_clocks(SimTime now, SimTime ideal, SimTime op_time) {
    now_ = now;
    ideal_ = ideal;
    op_time_ = op_time;
  }

  // The run's event log (EngineOptions::log, event_loop_log.cpp), written only when it is set.
  [[nodiscard]] bool logging() const { return opt_.log != nullptr; }
  void log_alloc(TensorId storage, const Block& b, bool fresh);
  void log_free(TensorId storage, const Block& b);
  void log_transfer(LogKind kind, const Completion& c, const LogRef& ref);
  // A record of `kind` at the current time and event touching `ref` (an access, an eviction).
  void log_point(LogKind kind, const LogRef& ref, bool forced = false);
  std::uint32_t log_op(LogKind kind, OpId op, SimTime start, const std::vector<LogRef>& reads,
                       const std::vector<LogRef>& writes, std::uint32_t origin = kNoRecord);

  // t + d on the engine's clocks; a run whose time would pass 2^63 - 1 ns stops with an Error
  // naming the event and `what()` (docs/limits.md, "Arithmetic"). Every other time the engine
  // keeps (stall, recompute time, trace compute time, op time) is a part of the clock.
  template <class F>
  SimTime later(SimTime t, SimTime d, F&& what) const {
    if (const auto sum = checked_add(t, d)) return *sum;
    time_overflow(what());
  }

 private:
  void process(const TraceEvent& e);
  void apply(const std::vector<Action>& actions);
  void drain_until(SimTime t);
  void complete(const Completion& c);
  void record_oom(TensorId t, Bytes requested);
  void seed_initial_state();
  [[nodiscard]] ConfigError seed_unsupported() const;
  void finish_report();
  void log_stall(SimTime from, SimTime to);
  void log_memory();
  void segment_changed(const SegmentChange& change) override;  // into RunLog::segments
  template <class F>
  auto timed_policy_call(F&& f);
  [[noreturn]] void time_overflow(const std::string& what) const;
  bool search_limit_reached();  // stops the run (status limit) past limits.max_search_steps

  const Trace& trace_;
  Allocator& alloc_;
  Policy& policy_;
  const EngineOptions& opt_;
  ReportBuilder& rep_;
  Executor* exec_ = nullptr;  // set by run()

  SimTime now_{0}, ideal_{0}, d2h_free_{0}, h2d_free_{0};
  SimTime op_time_{0};                     // the trace's op time (executed ops, no recomputation)
  SimTime t0_ = TraceEvent::kNotRecorded;  // the trace's first timestamp
  std::priority_queue<Completion, std::vector<Completion>, std::greater<>> queue_;
  std::uint64_t seq_ = 0;
  std::uint32_t swap_outs_in_flight_ = 0;  // queued D2H completions (they free memory)
  std::size_t index_ = 0;
  std::uint32_t iteration_ = 0;
  bool oom_ = false;  // the run stopped: out of memory, or (recompute policies) thrashing
  Bytes logged_allocated_{~0ULL}, logged_reserved_{~0ULL};  // the last Memory record's figures
};

inline SimTime Executor::now() const { return loop_.now(); }
inline EventId Executor::event_index() const { return loop_.event_index(); }
inline AllocatorStats Executor::allocator_stats() const { return loop_.alloc().stats(); }
inline const Allocator& Executor::allocator() const { return loop_.alloc(); }
inline Bytes Executor::budget() const { return loop_.options().budget; }
inline const LinkModel& Executor::link() const { return loop_.options().link; }
inline void Executor::count_scanned(std::uint64_t n) const { loop_.report().scanned(n); }
inline bool Executor::cross_check() const { return loop_.options().residency_checks; }

template <class F>
auto EventLoop::timed_policy_call(F&& f) {
  rep_.policy_decided();
  if (!opt_.measure_search_latency) return f();
  const auto start = std::chrono::steady_clock::now();
  auto result = f();
  rep_.policy_call_took(std::chrono::steady_clock::now() - start);
  return result;
}

}  // namespace coopsim::engine_detail
