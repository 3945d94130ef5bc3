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
      if (needed_room) {
        rep_.allocated_after_making_room(opt_.budget, allocated_before);
      } else {
        rep_.allocated();
      }
      observe_memory();
      return b;
    }
    rep_.allocator_oom();
    if (!needed_room) rep_.alloc_failed();
    needed_room = true;
    // Transfers in flight may free memory: wait for them before asking for more.
    if (swap_outs_in_flight_ > 0) {
      while (wait_for_next_completion()) {
        if (alloc_.stats().allocated < allocated_before) break;
      }
      continue;
    }
    const auto actions = timed_policy_call([&] { return policy_.on_alloc_failure(req, *exec_); });
    if (search_limit_reached()) return std::nullopt;
    if (actions.empty()) {
      record_oom(req.tensor, req.size);
      return std::nullopt;
    }
    apply(actions);
    if (oom_) return std::nullopt;
  }
}

// limits.max_search_steps, checked after every policy call: the searches count the candidates
// they examine as they go (the report's search_scanned), so one run's search work is bounded.
bool EventLoop::search_limit_reached() {
  if (rep_.scanned_so_far() <= opt_.max_search_steps) return false;
  stop(RunStatus::Limited);
  rep_.limited_at(LimitPoint{event_index(), iteration(), opt_.max_search_steps});
  return true;
}

void EventLoop::release_block(TensorId storage, const Block& b) {
  alloc_.deallocate(b);
  rep_.freed();
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
  rep_.computed();
  return start;
}

void EventLoop::process(const TraceEvent& e) {
  if (e.timed()) {
    if (t0_ == TraceEvent::kNotRecorded) t0_ = e.time;
    const SimTime ts = e.time - t0_;
    ideal_ = std::max(ideal_, ts);
    // Stalls and recomputation delay everything after them (their sum is part of now_).
    const SimTime delay = rep_.delay();
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
    rep_.swapped_out(size);
  } else {
    rep_.swapped_in(size);
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
    rep_.stalled(c.time - now_);
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
  // The model's segment changes from here on go to the log (the seeded state is the start).
  if (logging()) opt_.log->segments_logged = alloc_.observe_segments(this);
  struct Detach {
    Allocator& allocator;
    ~Detach() { allocator.observe_segments(nullptr); }
  } const detach{alloc_};
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
    rep_.event_done();
    const auto actions = timed_policy_call([&] { return policy_.after_event(exec); });
    if (search_limit_reached()) break;
    if (!actions.empty()) apply(actions);
    if (opt_.paranoid) alloc_.check_invariants();
    if (opt_.residency_checks) exec.check_residency();
  }
  // Transfers still in flight finish on their copy streams; the compute stream is done.
  if (!oom_) drain_until(SimTime::max());
  if (logging() && opt_.log->segments_logged) {
    opt_.log->end_segments = alloc_.snapshot().value_or(std::vector<SeedSegment>{});
  }
  finish_report();
}

void EventLoop::finish_report() {
  rep_.finished(alloc_.stats(), {now_, ideal_, op_time_}, alloc_.pool_figures(), opt_.measure_search_latency);
}

}  // namespace coopsim::engine_detail
