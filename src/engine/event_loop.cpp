// The event loop (event_loop.hpp): trace events in order on the compute stream, the policy
// loop, and the copy streams whose completions are kept in a time-ordered queue. What an event
// or a completed copy does to memory is the executor's business.
#include "event_loop.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace coopsim::engine_detail {

namespace {

// "running op 7 (6000000000000000000 ns) at 12 ns": what a clock overflow was doing.
std::string op_overflow(const OpInfo& op, SimTime at) {
  return fmt::format("running op {} ({} ns) at {} ns", op.file_id, op.duration.count(), at.count());
}

}  // namespace

std::optional<Block> EventLoop::obtain_block(AllocRequest req) {
  req.high_end = policy_.place_high(req.tensor, *exec_);
  bool needed_room = false;
  Bytes allocated_before;
  for (;;) {
    allocated_before = alloc_.stats().allocated;
    if (auto b = alloc_.allocate(req)) {
      ++rep_.counters.allocs;
      if (needed_room) {
        MemoryFigures& m = rep_.memory;
        const double frac =
            opt_.budget.value == 0
                ? 0.0
                : static_cast<double>(opt_.budget.value - std::min(opt_.budget, allocated_before).value) /
                      static_cast<double>(opt_.budget.value);
        ++m.coop_fragmentation_samples;
        m.coop_fragmentation += (frac - m.coop_fragmentation) / static_cast<double>(m.coop_fragmentation_samples);
      }
      observe_memory();
      return b;
    }
    if (!needed_room) ++rep_.counters.alloc_failures;
    needed_room = true;
    // Transfers in flight may free memory: wait for them before asking for more.
    if (swap_outs_in_flight_ > 0) {
      while (wait_for_next_completion()) {
        if (alloc_.stats().allocated < allocated_before) break;
      }
      continue;
    }
    const auto actions = timed_policy_call([&] { return policy_.on_alloc_failure(req, *exec_); });
    if (actions.empty()) {
      record_oom(req.tensor, req.size);
      return std::nullopt;
    }
    apply(actions);
    if (oom_) return std::nullopt;
  }
}

void EventLoop::release_block(TensorId storage, const Block& b) {
  alloc_.deallocate(b);
  ++rep_.counters.frees;
  log_free(storage, b);
  observe_memory();
}

void EventLoop::apply(const std::vector<Action>& actions) {
  for (const Action& a : actions) {
    if (oom_) return;
    exec_->apply(a);
  }
}

SimTime EventLoop::run_op(const OpInfo& op) {
  const SimTime start = now_;
  now_ = later(now_, op.duration, [&] { return op_overflow(op, now_); });
  ideal_ += op.duration;
  op_time_ += op.duration;
  ++rep_.counters.computes;
  return start;
}

void EventLoop::process(const TraceEvent& e) {
  if (e.timed()) {
    if (t0_ == TraceEvent::kNotRecorded) t0_ = e.time;
    const SimTime ts = e.time - t0_;
    ideal_ = std::max(ideal_, ts);
    // Stalls and recomputation delay everything after them (their sum is part of now_).
    const SimTime delay = rep_.time.stall + rep_.time.recompute_time;
    now_ = std::max(now_, later(ts, delay, [&] {
                      return fmt::format("timestamp {} ns plus {} ns of stalls and recomputation", ts.count(),
                                         delay.count());
                    }));
  }
  drain_until(now_);
  if (e.kind == EventKind::Iteration) iteration_ = e.iteration_index();
  exec_->process(e);
}

// --- Copy streams ---

void EventLoop::start_copy(Direction d, Bytes size, std::uint32_t subject) {
  const bool out = d == Direction::DeviceToHost;
  SimTime& stream_free = out ? d2h_free_ : h2d_free_;
  const SimTime start = opt_.link.serial ? std::max(now_, stream_free) : now_;
  const SimTime copy = opt_.link.transfer_time(d, size);
  const SimTime end = later(start, copy, [&] {
    return fmt::format("a {} copy of {} bytes taking {} ns from {} ns", out ? "D2H" : "H2D", size.value, copy.count(),
                       start.count());
  });
  stream_free = end;
  queue_.push({end, start, static_cast<std::uint8_t>(out ? 0 : 1), seq_++, subject, d});
  if (out) {
    ++swap_outs_in_flight_;
    ++rep_.time.swap_outs;
    rep_.time.swap_out_bytes += size;
  } else {
    ++rep_.time.swap_ins;
    rep_.time.swap_in_bytes += size;
  }
}

void EventLoop::complete(const Completion& c) {
  if (c.direction == Direction::DeviceToHost) --swap_outs_in_flight_;
  exec_->complete(c);
}

void EventLoop::drain_until(SimTime t) {
  while (!queue_.empty() && queue_.top().time <= t) {
    const Completion c = queue_.top();
    queue_.pop();
    complete(c);
  }
}

bool EventLoop::wait_for_next_completion() {
  if (queue_.empty()) return false;
  const Completion c = queue_.top();
  queue_.pop();
  if (c.time > now_) {
    log_stall(now_, c.time);
    rep_.time.stall += c.time - now_;
    now_ = c.time;
  }
  complete(c);
  return true;
}

void EventLoop::time_overflow(const std::string& what) const {
  throw Error(
      fmt::format("{}: event {}: simulated time passes 2^63 - 1 ns (about 292 years): {}", trace_.path, index_, what));
}

// --- The run ---

void EventLoop::run(Executor& exec) {
  exec_ = &exec;
  alloc_.prepare(trace_);
  if (logging()) {
    opt_.log->budget = opt_.budget;
    opt_.log->address_aware = alloc_.address_aware();
    opt_.log->link = opt_.link;
  }
  exec.setup();
  seed_initial_state();
  {
    const auto ignored = timed_policy_call([&] {
      policy_.prepare(exec);
      return 0;
    });
    (void)ignored;
  }
  observe_memory();
  const auto& events = trace_.events;
  for (index_ = 0; index_ < events.size() && !oom_; ++index_) {
    process(events[index_]);
    if (oom_) break;
    ++rep_.counters.events;
    const auto actions = timed_policy_call([&] { return policy_.after_event(exec); });
    if (!actions.empty()) apply(actions);
    if (opt_.paranoid) alloc_.check_invariants();
    if (opt_.plan_checks) exec.check_plan();
  }
  // Transfers still in flight finish on their copy streams; the compute stream is done.
  if (!oom_) drain_until(SimTime::max());
  finish_report();
}

void EventLoop::finish_report() {
  const AllocatorStats s = alloc_.stats();
  rep_.memory.final_allocated = s.allocated;
  rep_.memory.final_reserved = s.reserved;
  rep_.memory.reserved_fragmentation = rep_.memory.peak_reserved.value == 0
                                           ? 0.0
                                           : 1.0 - static_cast<double>(rep_.memory.allocated_at_reserved_peak.value) /
                                                       static_cast<double>(rep_.memory.peak_reserved.value);
  rep_.counters.alloc_retries = s.alloc_retries;
  rep_.counters.device_mallocs = s.device_mallocs;
  rep_.counters.device_frees = s.device_frees;
  rep_.time.simulated = now_;
  rep_.time.trace_compute = ideal_;
  rep_.time.compute_overhead =
      ideal_.count() == 0 ? 1.0 : static_cast<double>(now_.count()) / static_cast<double>(ideal_.count());
  rep_.time.op_time = op_time_;
  rep_.time.recompute_overhead =
      op_time_.count() == 0
          ? 1.0
          : static_cast<double>((op_time_ + rep_.time.recompute_time).count()) / static_cast<double>(op_time_.count());
  rep_.counters.search_scanned = scanned_;
  rep_.pool = alloc_.pool_figures();
  if (opt_.measure_search_latency) {
    rep_.search_latency = std::chrono::duration_cast<SimTime>(search_);
  }
}

}  // namespace coopsim::engine_detail
