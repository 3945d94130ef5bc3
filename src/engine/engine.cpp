// Discrete-event replay: compute stream + D2H and H2D copy streams (see engine.hpp). The
// Engine class is declared in engine_impl.hpp; this file processes trace events.
#include <fmt/format.h>

#include "engine_impl.hpp"

namespace coopsim {
namespace engine_detail {

Residency Engine::residency(TensorId t) const {
  if (!remat_) return residency_[index_of(t)];
  const std::uint32_t v = current_[index_of(t)];
  if (v == kNoIndex) return Residency::NotAllocated;
  switch (graph_.value(v).state) {
    case ValueState::Resident: return Residency::Resident;
    case ValueState::SwappingOut: return Residency::SwappingOut;
    case ValueState::SwappedOut: return Residency::SwappedOut;
    case ValueState::SwappingIn: return Residency::SwappingIn;
    case ValueState::Evicted:
    case ValueState::Gone: break;
  }
  return Residency::Evicted;
}

bool Engine::pinned(TensorId t) const {
  if (!remat_) return pin_epoch_[index_of(t)] == epoch_;
  const std::uint32_t v = current_[index_of(t)];
  return v != kNoIndex && graph_.value(v).pins > 0;
}

// Place tensor t's storage, asking the policy for room as often as it can help.
bool Engine::allocate_storage(std::uint32_t t, std::uint16_t stream) {
  auto b = obtain_block(AllocRequest{trace_.tensors[t].size, stream, TensorId{t}});
  if (!b) return false;
  blocks_[t] = *b;
  return true;
}

std::optional<Block> Engine::obtain_block(AllocRequest req) {
  const std::uint32_t t = index_of(req.tensor);
  req.high_end = policy_.place_high(t, *this);
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
    const auto actions = timed_policy_call([&] { return policy_.on_alloc_failure(req, *this); });
    if (actions.empty()) {
      record_oom(t, req.size);
      return std::nullopt;
    }
    apply(actions);
    if (oom_) return std::nullopt;
  }
}

void Engine::free_storage(std::uint32_t t) {
  switch (residency_[t]) {
    case Residency::Resident:
      alloc_.deallocate(blocks_[t]);
      ++rep_.counters.frees;
      log_free(t, blocks_[t]);
      residency_[t] = Residency::NotAllocated;
      observe_memory();
      break;
    case Residency::SwappingOut:
    case Residency::SwappingIn:
      freed_in_flight_[t] = 1;  // released when the copy completes
      break;
    case Residency::SwappedOut: residency_[t] = Residency::NotAllocated; break;
    case Residency::NotAllocated:
    case Residency::Evicted:  // recompute policies only (engine_remat.cpp)
      throw std::logic_error("engine: free of a tensor that is not allocated");
  }
}

void Engine::ensure_resident(std::uint32_t t) {
  while (!oom_ && residency_[t] != Residency::Resident) {
    switch (residency_[t]) {
      case Residency::SwappedOut:
        start_swap_in(t);  // on demand: the compute stream waits for it below
        break;
      case Residency::SwappingOut:
      case Residency::SwappingIn:
        if (!wait_for_next_completion()) throw std::logic_error("engine: transfer lost");
        break;
      case Residency::NotAllocated:
      case Residency::Evicted: throw std::logic_error("engine: use of a tensor that is not allocated");
      case Residency::Resident: break;
    }
  }
}

void Engine::process(const TraceEvent& e) {
  if (e.time >= 0) {
    if (t0_ < 0) t0_ = e.time;
    const SimTime ts{e.time - t0_};
    ideal_ = std::max(ideal_, ts);
    // Stalls and recomputation delay everything after them (their sum is part of now_).
    const SimTime delay = rep_.time.stall + rep_.time.recompute_time;
    now_ = std::max(now_, later(ts, delay, [&] {
                      return fmt::format("timestamp {} ns plus {} ns of stalls and recomputation", ts.count(),
                                         delay.count());
                    }));
  }
  drain_until(now_);
  ++epoch_;
  if (remat_) {
    remat_process(e);
    return;
  }
  switch (e.kind) {
    case EventKind::Alloc:
      allocate_storage(e.target, e.stream);
      if (oom_) break;
      residency_[e.target] = Residency::Resident;
      version_[e.target] = 0;
      log_alloc(e.target, blocks_[e.target], /*fresh=*/true);
      if (e.addr != 0) check_address(e.addr, blocks_[e.target].addr);
      break;
    case EventKind::Free: free_storage(e.target); break;
    case EventKind::Access: {
      const std::uint32_t s = trace_.storage_of(e.target);
      pin_epoch_[s] = epoch_;
      ensure_resident(s);
      ++rep_.counters.accesses;
      if (logging() && !oom_) {
        LogRecord r;
        r.kind = LogKind::Access;
        r.start = r.end = now_;
        r.event = static_cast<std::uint32_t>(index_);
        opt_.log->add(r, {storage_ref(s)});
      }
      break;
    }
    case EventKind::Compute: {
      const OpInfo& op = trace_.ops[e.target];
      for (const auto* list : {&op.inputs, &op.outputs}) {
        for (TensorId x : *list) pin_epoch_[trace_.storage_of(index_of(x))] = epoch_;
      }
      for (const auto* list : {&op.inputs, &op.outputs}) {
        for (TensorId x : *list) ensure_resident(trace_.storage_of(index_of(x)));
      }
      const SimTime start = now_;
      now_ = later(now_, op.duration, [&] { return op_overflow(op, now_, "running"); });
      ideal_ += op.duration;
      op_time_ += op.duration;
      ++rep_.counters.computes;
      if (logging() && !oom_) log_compute(e.target, start);
      break;
    }
    case EventKind::Iteration: iteration_ = e.target; break;
    case EventKind::Mark: break;
  }
}

void Engine::time_overflow(const std::string& what) const {
  throw Error(
      fmt::format("{}: event {}: simulated time passes 2^63 - 1 ns (about 292 years): {}", trace_.path, index_, what));
}

void Engine::run() {
  alloc_.prepare(trace_);
  if (logging()) {
    opt_.log->budget = opt_.budget;
    opt_.log->address_aware = alloc_.address_aware();
    opt_.log->link = opt_.link;
  }
  remat_ = policy_.remat_options();
  if (remat_) remat_setup();
  seed_initial_state();
  {
    const auto ignored = timed_policy_call([&] {
      policy_.prepare(*this);
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
    const auto actions = timed_policy_call([&] { return policy_.after_event(*this); });
    if (!actions.empty()) apply(actions);
    if (opt_.paranoid) alloc_.check_invariants();
    if (opt_.plan_checks && remat_) check_remat_state();
  }
  // Transfers still in flight finish on their copy streams; the compute stream is done.
  if (!oom_) drain_until(SimTime::max());
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

}  // namespace engine_detail

void run_engine(const Trace& trace, Allocator& allocator, Policy& policy, const EngineOptions& options,
                Report& report) {
  engine_detail::Engine engine(trace, allocator, policy, options, report);
  engine.run();
}

}  // namespace coopsim
