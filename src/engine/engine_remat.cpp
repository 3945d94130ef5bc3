// Recompute policies: the engine's side of DTR's runtime rules
// (docs/models/dtr-dte.md) with Coop's in-place and pinning rules (docs/models/coop.md). The policy only chooses
// victims (Evict actions); everything here is mechanism:
//  * an op pins its inputs, rematerializes the evicted ones (parents first, with an explicit
//    stack, so long chains cannot overflow the C++ stack; limits.max_recompute_depth caps how
//    deep one may nest), runs, and unpins them (materialize/recompute: engine_recompute.cpp);
//  * rematerializing a value re-runs its producer execution with the exact input values it
//    once read; all outputs of that execution are produced (evicted siblings come back,
//    resident or gone ones get a temporary block that is dropped at once, as simrd counts them);
//  * values rematerialized only to feed a recomputation, and released siblings, are evicted
//    again right after use (eager eviction after recompute);
//  * the trace's free is a release: eager eviction, banishing or no-dealloc (RematOptions);
//  * unevictable: values of parameters, step inputs and optimizer state, outputs of random ops,
//    inputs mutated in place by an op that has other outputs (BN statistics, optimizer state),
//    accumulated gradients (a gradient read by an op that updates a parameter or optimizer
//    state), values with no producer, anything pinned, and values whose recomputation would
//    need a value freed for good (RematGraph::lock_dependents);
//  * a value that cannot be recomputed is freed for good on release unless an evicted value
//    that is still needed depends on it (then it stays, locked);
//  * the logical clock advances by every executed op's cost, recomputations included; the run
//    stops as "thrash" once recompute time reaches (thrash_limit - 1) x the trace's op time.
#include <algorithm>

#include "engine_impl.hpp"

namespace coopsim::engine_detail {

namespace {

bool constant_role(TensorRole r) {
  return r == TensorRole::Parameter || r == TensorRole::Input || r == TensorRole::OptimizerState;
}

}  // namespace

void Engine::remat_setup() {
  current_.assign(trace_.tensors.size(), kNoIndex);
  acc_grad_.assign(trace_.tensors.size(), 0);
  for (const OpInfo& op : trace_.ops) {
    const bool updates_state = std::any_of(op.mutated.begin(), op.mutated.end(), [&](TensorId m) {
      const TensorRole r = trace_.tensors[trace_.storage_of(index_of(m))].role;
      return r == TensorRole::Parameter || r == TensorRole::OptimizerState;
    });
    if (!updates_state) continue;
    for (TensorId x : op.inputs) {
      const std::uint32_t s = trace_.storage_of(index_of(x));
      if (trace_.tensors[s].role == TensorRole::Gradient) acc_grad_[s] = 1;
    }
  }
  // The trace's op time, saturated: a run whose clock gets that far stops anyway (later()).
  SimTime total{0};
  for (const TraceEvent& e : trace_.events) {
    if (e.kind == EventKind::Compute)
      total = checked_add(total, trace_.ops[e.target].duration).value_or(SimTime::max());
  }
  if (remat_->thrash_limit > 0.0) {
    // A limit past 2^63 - 1 ns is no limit (the double would not convert).
    const double at = (remat_->thrash_limit - 1.0) * static_cast<double>(total.count());
    thrash_at_ = at < 0x1p63 ? SimTime{static_cast<std::int64_t>(at)} : SimTime::max();
  }
  if (simrd_profile()) run_simrd_profile();
}

void Engine::remat_process(const TraceEvent& e) {
  if (simrd_done_) return;  // dtr.compat=simrd: already replayed by simrd::replay
  switch (e.kind) {
    case EventKind::Alloc: remat_alloc(e); break;
    case EventKind::Free: remat_free(e.target); break;
    case EventKind::Access: {
      const std::uint32_t v = current_[trace_.storage_of(e.target)];
      graph_.pin(v);
      const bool ok = materialize(v);
      graph_.unpin(v);
      if (!ok) return;
      graph_.touch(v);
      ++rep_.counters.accesses;
      if (logging()) {
        LogRecord r;
        r.kind = LogKind::Access;
        r.start = r.end = now_;
        r.event = static_cast<std::uint32_t>(index_);
        opt_.log->add(r, {value_ref(v)});
      }
      break;
    }
    case EventKind::Compute: remat_compute(e.target); break;
    case EventKind::Iteration: iteration_ = e.target; break;
    case EventKind::Mark: break;
  }
}

void Engine::remat_alloc(const TraceEvent& e) {
  const std::uint32_t s = e.target;
  const TensorInfo& info = trace_.tensors[s];
  const std::uint32_t v = graph_.add_value(s, info.size, constant_role(info.role) || acc_grad_[s] != 0);
  value_version_.resize(graph_.value_count(), 0);
  version_[s] = 0;
  current_[s] = v;
  auto b = obtain_block(AllocRequest{info.size, e.stream, TensorId{s}});
  if (!b) return;
  graph_.place(v, *b);
  log_alloc(s, *b, /*fresh=*/true);
  residency_[s] = Residency::Resident;
  if (e.addr != 0) check_address(e.addr, b->addr);
}

void Engine::free_block(std::uint32_t storage, const Block& b) {
  alloc_.deallocate(b);
  ++rep_.counters.frees;
  log_free(storage, b);
  observe_memory();
}

void Engine::evict_value(std::uint32_t v, bool forced) {
  if (v >= graph_.value_count() || (forced && !graph_.evictable(v))) {
    throw std::logic_error("policy asked to evict value " + std::to_string(v) +
                           ", which is not resident and evictable");
  }
  const Block b = graph_.value(v).block;
  if (logging()) {
    LogRecord r;
    r.kind = LogKind::Evict;
    r.forced = forced;
    r.start = r.end = now_;
    r.event = static_cast<std::uint32_t>(index_);
    opt_.log->add(r, {value_ref(v)});
  }
  graph_.evict(v);
  free_block(graph_.value(v).storage, b);
  ++(forced ? rep_.counters.forced_evictions : rep_.counters.eager_evictions);
}

void Engine::remat_free(std::uint32_t storage) {
  const std::uint32_t v = current_[storage];
  current_[storage] = kNoIndex;
  residency_[storage] = Residency::NotAllocated;
  release_value(v);
}

// The last external reference to `v` is gone (trace free, or replaced by copy-on-write).
void Engine::release_value(std::uint32_t v) {
  graph_.set_released(v);
  const ValueState state = graph_.value(v).state;
  if (state == ValueState::SwappedOut) {  // on the host: kept only for evicted values needing it
    if (!graph_.needed_by_evicted(v)) graph_.drop(v);
    return;
  }
  // Evicted: stays recomputable. A copy in flight: decided when it completes.
  if (state != ValueState::Resident) return;
  // Unevictable values (constants, random outputs, state, locked ones) are not recomputed.
  if (!graph_.value(v).unevictable && graph_.recomputable(v, trace_)) {
    switch (remat_->dealloc) {
      case DeallocMode::Eager: evict_value(v, /*forced=*/false); return;
      case DeallocMode::NoDealloc: return;
      case DeallocMode::Banish:
        // Only possible when no evicted value that is still needed depends on it.
        if (graph_.needed_by_evicted(v)) {
          evict_value(v, /*forced=*/false);
        } else {
          drop_value(v);
        }
        return;
    }
  }
  // Cannot be recomputed (no producer, random, or a parent is gone): free it for good unless
  // an evicted value still needs it, in which case it stays, locked.
  if (graph_.needed_by_evicted(v)) {
    graph_.set_unevictable(v);
  } else {
    drop_value(v);
  }
}

// Frees v for good. Resident values that could only be recomputed through it are locked.
void Engine::drop_value(std::uint32_t v) {
  graph_.lock_dependents(v);
  const Block b = graph_.value(v).block;
  graph_.drop(v);
  free_block(graph_.value(v).storage, b);
}

// Plan checks (engine.plan_checks, --paranoid): resident values hold disjoint blocks inside the budget, and the
// allocator holds at least their bytes.
void Engine::check_remat_state() const {
  std::uint64_t end = 0;
  Bytes held;
  const bool addresses = alloc_.address_aware();
  for (const auto& [addr, v] : graph_.resident_by_address()) {
    const RematValue& x = graph_.value(v);
    const bool holds_block =
        x.state == ValueState::Resident || x.state == ValueState::SwappingOut || x.state == ValueState::SwappingIn;
    if (!holds_block || x.block.addr != addr) {
      throw InvariantError("remat: address map out of date at value " + std::to_string(v));
    }
    if (addresses && addr < end) throw InvariantError("remat: resident blocks overlap at " + std::to_string(addr));
    end = addr + x.block.size.value;
    held += x.block.size;
  }
  const AllocatorStats s = alloc_.stats();
  if (held > s.allocated) throw InvariantError("remat: resident values hold more than the allocator has allocated");
  if (s.reserved > opt_.budget) throw InvariantError("remat: the allocator reserved more than the budget");
}

void Engine::record_thrash() {
  oom_ = true;
  rep_.status = RunStatus::Thrashed;
  rep_.thrash = ThrashPoint{index_, iteration_, rep_.time.recompute_time, op_time_};
}

void Engine::remat_compute(std::uint32_t op_index) {
  const OpInfo& op = trace_.ops[op_index];
  const bool cow = remat_->inplace == InPlaceMode::CopyOnWrite;
  std::vector<std::uint32_t> inputs;  // values read, as listed (one pin each)
  for (TensorId t : op.inputs) inputs.push_back(current_[trace_.storage_of(index_of(t))]);
  std::vector<std::uint32_t> written;  // storages the op writes: outputs that are not views
  for (TensorId t : op.outputs) {
    if (!trace_.tensors[index_of(t)].is_view()) push_unique(written, index_of(t));
  }
  std::vector<std::uint32_t> mutated;
  for (TensorId t : op.mutated) push_unique(mutated, trace_.storage_of(index_of(t)));
  // Mutable inputs of an op with outputs of its own are state (BN statistics, optimizer state).
  if (!written.empty()) {
    for (std::uint32_t s : mutated) graph_.set_unevictable(current_[s]);
  } else {
    written = mutated;  // an in-place op: its result is the updated tensor
  }

  for (std::uint32_t v : inputs) graph_.pin(v);
  for (std::uint32_t v : inputs) {
    if (!materialize(v)) return;
  }
  // Storages the op writes without reading them may sit on the host (hybrid policies).
  std::vector<std::uint32_t> fetched;
  for (const auto* list : {&written, &mutated}) {
    for (std::uint32_t s : *list) {
      const std::uint32_t v = current_[s];
      if (!in_swap(graph_.value(v).state)) continue;
      graph_.pin(v);
      fetched.push_back(v);
      if (!bring_back(v)) return;
    }
  }
  for (std::uint32_t v : inputs) {  // plan check: the op never reads an absent value
    if (graph_.value(v).state != ValueState::Resident) throw std::logic_error("engine: op input not resident");
  }

  std::vector<std::uint32_t> fresh;       // values this execution produces
  std::vector<std::uint32_t> not_read;    // values written before ever being computed
  std::vector<std::uint32_t> replaced;    // old values of updated storages
  std::vector<std::uint32_t> hand_over;   // recomputable in-place: (old, new) pairs, flattened
  std::vector<Block> moved_away;          // copy-on-write constants: their old blocks
  std::vector<std::uint32_t> moved_from;  // and their storages
  std::vector<LogRef> reads_log, writes_log;
  std::vector<std::uint32_t> written_values;  // value holding each written storage's new version
  if (logging()) {
    std::vector<std::uint32_t> seen;
    for (std::uint32_t v : inputs) {
      if (std::find(seen.begin(), seen.end(), v) != seen.end()) continue;
      seen.push_back(v);
      reads_log.push_back(value_ref(v));
    }
  }
  for (std::uint32_t s : written) {
    const std::uint32_t old = current_[s];
    const RematValue& ov = graph_.value(old);
    const bool constant = constant_role(trace_.tensors[s].role) || acc_grad_[s] != 0;
    if (ov.producer == kNoIndex && !constant) {
      fresh.push_back(old);  // first computation (possibly by an in-place op on fresh memory)
      not_read.push_back(old);
      graph_.pin(old);
      written_values.push_back(old);
      continue;
    }
    if (ov.producer == kNoIndex) {
      // A constant updated in place: no history to keep. Copy-on-write moves it.
      written_values.push_back(old);
      if (!cow) continue;
      auto b = obtain_block(AllocRequest{ov.size, 0, TensorId{s}});
      if (!b) return;
      log_alloc(s, *b, /*fresh=*/false);
      moved_away.push_back(graph_.value(old).block);
      moved_from.push_back(s);
      graph_.drop(old);
      graph_.place(old, *b);
      continue;
    }
    const std::uint32_t n = graph_.add_value(s, ov.size, graph_.value(old).unevictable);
    value_version_.resize(graph_.value_count(), 0);
    written_values.push_back(n);
    current_[s] = n;
    replaced.push_back(old);
    fresh.push_back(n);
    if (cow) {
      auto b = obtain_block(AllocRequest{graph_.value(n).size, 0, TensorId{s}});
      if (!b) return;
      log_alloc(s, *b, /*fresh=*/false);
      graph_.place(n, *b);
      graph_.pin(n);
    } else {
      hand_over.push_back(old);
      hand_over.push_back(n);
    }
  }

  const SimTime start = now_;
  now_ = later(now_, op.duration, [&] { return op_overflow(op, now_, "running"); });
  graph_.advance(op.duration);  // the graph's clock leaves out stalls: at most now_
  ideal_ += op.duration;
  op_time_ += op.duration;
  ++rep_.counters.computes;

  // The execution reads what it read, except values it overwrites before their first
  // computation (their old contents were never a value).
  std::vector<std::uint32_t> reads;
  for (std::uint32_t v : inputs) {
    if (std::find(not_read.begin(), not_read.end(), v) == not_read.end()) reads.push_back(v);
  }
  const std::uint32_t exec = graph_.add_execution(op_index, op.duration, reads, fresh);
  for (std::size_t i = 0; i < hand_over.size(); i += 2) {
    const Block b = graph_.value(hand_over[i]).block;
    graph_.evict(hand_over[i]);  // the old value: no memory, recomputable by its producer
    graph_.place(hand_over[i + 1], b);
  }
  for (std::uint32_t v : fresh) {
    graph_.set_producer(v, exec);
    if (op.random) graph_.set_unevictable(v);
    graph_.computed(v);
  }
  // Content versions: each written storage, and each mutated state storage, gets the next one.
  for (std::uint32_t v : written_values) value_version_[v] = ++version_[graph_.value(v).storage];
  for (std::uint32_t s : mutated) {  // state mutated by an op with outputs of its own
    if (std::find(written.begin(), written.end(), s) != written.end()) continue;
    value_version_[current_[s]] = ++version_[s];
    written_values.push_back(current_[s]);
  }
  if (logging()) {
    for (std::uint32_t v : written_values) writes_log.push_back(value_ref(v));
    exec_record_.resize(exec + 1, kNoRecord);
    exec_record_[exec] = log_op(LogKind::Compute, op_index, start, reads_log, writes_log);
  }
  for (std::uint32_t v : fetched) graph_.unpin(v);
  for (std::uint32_t v : inputs) {
    graph_.touch(v);
    graph_.unpin(v);
  }
  for (std::uint32_t v : not_read) graph_.unpin(v);
  if (cow) {
    for (std::uint32_t v : fresh) {
      if (std::find(not_read.begin(), not_read.end(), v) == not_read.end()) graph_.unpin(v);
    }
  }
  for (std::uint32_t old : replaced) release_value(old);
  for (std::size_t i = 0; i < moved_away.size(); ++i) free_block(moved_from[i], moved_away[i]);
}

}  // namespace coopsim::engine_detail
