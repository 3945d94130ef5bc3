// Discrete-event replay: compute stream + D2H and H2D copy streams (see engine.hpp).
#include "coopsim/engine.hpp"

#include <algorithm>
#include <chrono>
#include <queue>
#include <stdexcept>

#include "coopsim/error.hpp"

namespace coopsim {
namespace {

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

void Engine::observe_memory() {
  const AllocatorStats s = alloc_.stats();
  MemoryFigures& m = rep_.memory;
  m.peak_allocated = std::max(m.peak_allocated, s.allocated);
  m.peak_requested = std::max(m.peak_requested, s.requested);
  m.peak_footprint = std::max(m.peak_footprint, s.footprint);
  if (s.allocated >= s.requested) m.peak_internal_waste = std::max(m.peak_internal_waste, s.allocated - s.requested);
  if (s.reserved > m.peak_reserved) {
    m.peak_reserved = s.reserved;
    m.allocated_at_reserved_peak = s.allocated;
  } else if (s.reserved == m.peak_reserved) {
    m.allocated_at_reserved_peak = std::max(m.allocated_at_reserved_peak, s.allocated);
  }
}

void Engine::check_address(std::uint64_t recorded, std::uint64_t placed) {
  AddressCheck& a = rep_.addresses;
  ++a.checked;
  if (recorded == placed) return;
  if (a.mismatches++ == 0) {
    a.first_mismatch_event = index_;
    a.first_expected = recorded;
    a.first_got = placed;
  }
}

void Engine::complete(const Completion& c) {
  const std::uint32_t t = c.tensor;
  if (c.direction == Direction::DeviceToHost) {
    alloc_.deallocate(blocks_[t]);
    ++rep_.counters.frees;
    residency_[t] = freed_in_flight_[t] ? Residency::NotAllocated : Residency::SwappedOut;
  } else if (freed_in_flight_[t]) {
    alloc_.deallocate(blocks_[t]);
    residency_[t] = Residency::NotAllocated;
  } else {
    residency_[t] = Residency::Resident;
  }
  freed_in_flight_[t] = 0;
  observe_memory();
}

void Engine::drain_until(SimTime t) {
  while (!queue_.empty() && queue_.top().time <= t) {
    const Completion c = queue_.top();
    queue_.pop();
    complete(c);
  }
}

// Stall the compute stream until the earliest in-flight transfer completes.
bool Engine::wait_for_next_completion() {
  if (queue_.empty()) return false;
  const Completion c = queue_.top();
  queue_.pop();
  if (c.time > now_) {
    rep_.time.stall += c.time - now_;
    now_ = c.time;
  }
  complete(c);
  return true;
}

void Engine::start_swap_out(std::uint32_t t) {
  if (residency_[t] != Residency::Resident || pin_epoch_[t] == epoch_) {
    throw std::logic_error("policy asked to swap out tensor " +
                           std::to_string(trace_.tensors[t].file_id) +
                           ", which is not resident or is in use");
  }
  const Bytes size = trace_.tensors[t].size;
  const SimTime start = opt_.link.serial ? std::max(now_, d2h_free_) : now_;
  const SimTime end = start + opt_.link.transfer_time(Direction::DeviceToHost, size);
  d2h_free_ = end;
  residency_[t] = Residency::SwappingOut;
  queue_.push({end, 0, seq_++, t, Direction::DeviceToHost});
  ++rep_.time.swap_outs;
  rep_.time.swap_out_bytes += size;
}

void Engine::start_swap_in(std::uint32_t t) {
  if (residency_[t] != Residency::SwappedOut) {
    throw std::logic_error("swap-in of tensor " + std::to_string(trace_.tensors[t].file_id) +
                           ", which is not swapped out");
  }
  if (!allocate_storage(t, blocks_[t].stream)) return;  // OOM recorded
  const Bytes size = trace_.tensors[t].size;
  const SimTime start = opt_.link.serial ? std::max(now_, h2d_free_) : now_;
  const SimTime end = start + opt_.link.transfer_time(Direction::HostToDevice, size);
  h2d_free_ = end;
  residency_[t] = Residency::SwappingIn;
  queue_.push({end, 1, seq_++, t, Direction::HostToDevice});
  ++rep_.time.swap_ins;
  rep_.time.swap_in_bytes += size;
}

void Engine::apply(const std::vector<Action>& actions) {
  for (const Action& a : actions) {
    if (oom_) return;
    const std::uint32_t t = index_of(a.tensor);
    if (t >= residency_.size()) throw std::logic_error("policy named an unknown tensor");
    if (a.kind == Action::Kind::SwapOut) {
      start_swap_out(t);
    } else {
      start_swap_in(t);
    }
  }
}

void Engine::record_oom(std::uint32_t t, Bytes requested) {
  oom_ = true;
  rep_.status = RunStatus::OutOfMemory;
  OomPoint p;
  p.event_index = index_;
  p.iteration = iteration_;
  p.tensor_file_id = trace_.tensors[t].file_id;
  p.tensor_name = trace_.tensors[t].name;
  p.requested = requested;
  const AllocatorStats s = alloc_.stats();
  p.allocated = s.allocated;
  p.reserved = s.reserved;
  p.largest_free = s.largest_free;
  // The op this allocation is for: the next compute that reads or writes the tensor.
  for (std::size_t i = index_; i < trace_.events.size(); ++i) {
    const TraceEvent& e = trace_.events[i];
    if (e.kind != EventKind::Compute) continue;
    const OpInfo& op = trace_.ops[e.target];
    auto touches = [&](const std::vector<TensorId>& v) {
      return std::any_of(v.begin(), v.end(),
                         [&](TensorId x) { return trace_.storage_of(index_of(x)) == t; });
    };
    if (touches(op.outputs) || touches(op.inputs)) {
      p.has_op = true;
      p.op_name = op.name;
      p.op_file_id = op.file_id;
      break;
    }
  }
  rep_.oom = p;
}

// Place tensor t's storage, asking the policy for room as often as it can help.
bool Engine::allocate_storage(std::uint32_t t, std::uint16_t stream) {
  const AllocRequest req{trace_.tensors[t].size, stream, TensorId{t}};
  bool needed_room = false;
  Bytes allocated_before;
  for (;;) {
    allocated_before = alloc_.stats().allocated;
    if (auto b = alloc_.allocate(req)) {
      blocks_[t] = *b;
      ++rep_.counters.allocs;
      if (needed_room) {
        MemoryFigures& m = rep_.memory;
        const double frac = opt_.budget.value == 0 ? 0.0
            : static_cast<double>(opt_.budget.value - std::min(opt_.budget, allocated_before).value) /
                  static_cast<double>(opt_.budget.value);
        ++m.coop_fragmentation_samples;
        m.coop_fragmentation += (frac - m.coop_fragmentation) / static_cast<double>(m.coop_fragmentation_samples);
      }
      observe_memory();
      return true;
    }
    if (!needed_room) ++rep_.counters.alloc_failures;
    needed_room = true;
    // Transfers in flight may free memory: wait for them before asking for more.
    bool frees_pending = false;
    for (auto q = queue_; !q.empty(); q.pop()) {
      if (q.top().direction == Direction::DeviceToHost) {
        frees_pending = true;
        break;
      }
    }
    if (frees_pending) {
      while (wait_for_next_completion()) {
        if (alloc_.stats().allocated < allocated_before) break;
      }
      continue;
    }
    const auto actions = timed_policy_call([&] { return policy_.on_alloc_failure(req, *this); });
    if (actions.empty()) {
      record_oom(t, req.size);
      return false;
    }
    apply(actions);
    if (oom_) return false;
  }
}

void Engine::free_storage(std::uint32_t t) {
  switch (residency_[t]) {
    case Residency::Resident:
      alloc_.deallocate(blocks_[t]);
      ++rep_.counters.frees;
      residency_[t] = Residency::NotAllocated;
      observe_memory();
      break;
    case Residency::SwappingOut:
    case Residency::SwappingIn:
      freed_in_flight_[t] = 1;  // released when the copy completes
      break;
    case Residency::SwappedOut:
      residency_[t] = Residency::NotAllocated;
      break;
    case Residency::NotAllocated:
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
        throw std::logic_error("engine: use of a tensor that is not allocated");
      case Residency::Resident:
        break;
    }
  }
}

void Engine::process(const TraceEvent& e) {
  if (e.time >= 0) {
    if (t0_ < 0) t0_ = e.time;
    const SimTime ts{e.time - t0_};
    ideal_ = std::max(ideal_, ts);
    now_ = std::max(now_, ts + rep_.time.stall);
  }
  drain_until(now_);
  ++epoch_;
  switch (e.kind) {
    case EventKind::Alloc:
      allocate_storage(e.target, e.stream);
      if (oom_) break;
      residency_[e.target] = Residency::Resident;
      if (e.addr != 0) check_address(e.addr, blocks_[e.target].addr);
      break;
    case EventKind::Free:
      free_storage(e.target);
      break;
    case EventKind::Access: {
      const std::uint32_t s = trace_.storage_of(e.target);
      pin_epoch_[s] = epoch_;
      ensure_resident(s);
      ++rep_.counters.accesses;
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
      now_ += op.duration;
      ideal_ += op.duration;
      ++rep_.counters.computes;
      break;
    }
    case EventKind::Iteration:
      iteration_ = e.target;
      break;
    case EventKind::Mark:
      break;
  }
}

// A trace recorded from a running program starts from its recorded allocator state: the model
// takes the initial segments and the tensors in them are resident with their blocks. The
// recorded addresses of later segments go to the model as a placement plan.
void Engine::seed_initial_state() {
  alloc_.plan_segment_addresses(trace_.segment_addresses);
  if (trace_.initial_segments.empty()) return;
  std::vector<SeedSegment> seeds;
  std::vector<std::uint32_t> owners;  // tensor of each allocated seed block, in order
  seeds.reserve(trace_.initial_segments.size());
  for (const InitialSegment& s : trace_.initial_segments) {
    SeedSegment& g = seeds.emplace_back();
    g.addr = s.addr;
    g.stream = s.stream;
    g.pool = s.pool;
    for (const InitialBlock& b : s.blocks) {
      const bool allocated = !b.is_free();
      g.blocks.push_back({b.size, allocated ? trace_.tensors[b.tensor].size : Bytes{0}, allocated});
      if (allocated) owners.push_back(b.tensor);
    }
  }
  std::vector<Block> placed;
  try {
    placed = alloc_.seed(seeds);
  } catch (const SeedUnsupported&) {
    throw ConfigError("allocator", "allocator " + (rep_.allocator.empty() ? std::string("model") : rep_.allocator) +
                                       " cannot start from a recorded state (" + trace_.path +
                                       " begins with one: use an allocator that supports it, e.g. pytorch)");
  } catch (const ConfigError& e) {  // e.g. the recorded segments exceed the budget
    throw ConfigError("allocator", trace_.path + ": the recorded initial state cannot be installed: " + e.what());
  }
  if (placed.size() != owners.size()) throw std::logic_error("allocator seed() returned the wrong number of blocks");
  for (std::size_t i = 0; i < owners.size(); ++i) {
    blocks_[owners[i]] = placed[i];
    residency_[owners[i]] = Residency::Resident;
  }
}

void Engine::run() {
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
  }
  // Transfers still in flight finish on their copy streams; the compute stream is done.
  if (!oom_) drain_until(SimTime::max());
  const AllocatorStats s = alloc_.stats();
  rep_.memory.final_allocated = s.allocated;
  rep_.memory.final_reserved = s.reserved;
  rep_.memory.reserved_fragmentation =
      rep_.memory.peak_reserved.value == 0
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
  if (opt_.measure_search_latency) {
    rep_.search_latency = std::chrono::duration_cast<SimTime>(search_);
  }
}

}  // namespace

void run_engine(const Trace& trace, Allocator& allocator, Policy& policy,
                const EngineOptions& options, Report& report) {
  Engine engine(trace, allocator, policy, options, report);
  engine.run();
}

}  // namespace coopsim
