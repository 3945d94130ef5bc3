// The recompute executor (remat_executor.hpp): the engine's side of DTR's runtime rules
// (docs/models/dtr-dte.md) with Coop's in-place and pinning rules (docs/models/coop.md). The policy only chooses
// victims (Evict actions); everything here is mechanism:
//  * an op pins its inputs, rematerializes the evicted ones (parents first, with an explicit
//    stack, so long chains cannot overflow the C++ stack; limits.max_recompute_depth caps how
//    deep one may nest), runs, and unpins them (remat_compute.cpp); the storages it writes stay
//    pinned from once its inputs are in memory until it has run, so that making room for one
//    of them never moves another;
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
//    that is still needed depends on it (then it stays, locked); freeing a value for good, from
//    memory or from the host, locks the values that could only be recomputed through it;
//  * the logical clock advances by every executed op's cost, recomputations included; the run
//    stops as "thrash" once recompute time reaches (thrash_limit - 1) x the trace's op time.
#include "remat_executor.hpp"

#include <algorithm>
#include <string>

namespace coopsim::engine_detail {

void RematExecutor::setup() {
  graph_.verify_eq_cache(loop_.options().residency_checks);
  graph_.keep_holders_ordered(loop_.options().residency_checks);  // check_residency lists them in order
  for (const OpInfo& op : trace_.ops) {
    const bool updates_state = std::any_of(op.mutated.begin(), op.mutated.end(), [&](TensorId m) {
      const TensorRole r = trace_.tensor(trace_.storage_of(m)).role;
      return r == TensorRole::Parameter || r == TensorRole::OptimizerState;
    });
    if (!updates_state) continue;
    for (TensorId x : op.inputs) {
      const TensorId s = trace_.storage_of(x);
      if (trace_.tensor(s).role == TensorRole::Gradient) acc_grad_[index_of(s)] = 1;
    }
  }
  // The trace's op time, saturated: a run whose clock gets that far stops anyway (later()).
  SimTime total{0};
  for (const TraceEvent& e : trace_.events) {
    if (e.kind == EventKind::Compute)
      total = checked_add(total, trace_.op(e.compute_op()).duration).value_or(SimTime::max());
  }
  if (options_.thrash_limit > 0.0) {
    // A limit past 2^63 - 1 ns is no limit (the double would not convert).
    const double at = (options_.thrash_limit - 1.0) * static_cast<double>(total.count());
    thrash_at_ = at < 0x1p63 ? SimTime{static_cast<std::int64_t>(at)} : SimTime::max();
  }
}

void RematExecutor::seed(TensorId storage, const Block& b) {
  // Every live storage has a value in the remat graph (the trace's free releases it). A block
  // live before the recording has no producer: it can never be recomputed, so it is unevictable
  // and freed for good on release.
  const ValueId v = graph_.add_value(storage, trace_.tensor(storage).size, /*unevictable=*/true);
  value_version_.resize(graph_.value_count(), 0);
  current_[index_of(storage)] = v;
  graph_.place(v, b);
}

Residency RematExecutor::residency(TensorId t) const {
  const ValueId v = current_[index_of(t)];
  if (v == kNoValue) return Residency::NotAllocated;
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

void RematExecutor::process(const TraceEvent& e) {
  switch (e.kind) {
    case EventKind::Alloc: alloc_storage(e); break;
    case EventKind::Free: free_storage(e.tensor()); break;
    case EventKind::Access: {
      const ValueId v = current_[index_of(trace_.storage_of(e.tensor()))];
      graph_.pin(v);
      const bool ok = materialize(v);
      graph_.unpin(v);
      if (!ok) return;
      graph_.touch(v);
      loop_.report().accessed();
      if (loop_.logging()) loop_.log_point(LogKind::Access, value_ref(v));
      break;
    }
    case EventKind::Compute: compute(e.compute_op()); break;
    case EventKind::Iteration:  // the loop counts iterations
    case EventKind::Mark: break;
  }
}

void RematExecutor::apply(const Action& a) {
  if (a.kind == Action::Kind::Evict) {
    evict_value(a.value, /*forced=*/true);
    return;
  }
  if (index_of(a.tensor) >= current_.size()) throw std::logic_error("policy named an unknown tensor");
  // Hybrid policies: the storage's current value moves.
  const ValueId v = current_[index_of(trace_.storage_of(a.tensor))];
  if (v == kNoValue) throw std::logic_error("policy asked to swap a tensor that is not allocated");
  if (a.kind == Action::Kind::SwapOut) {
    swap_out(v);
  } else {
    swap_in(v);
  }
}

void RematExecutor::alloc_storage(const TraceEvent& e) {
  const TensorId s = e.tensor();
  const TensorInfo& info = trace_.tensor(s);
  const ValueId v = graph_.add_value(s, info.size, constant(s));
  value_version_.resize(graph_.value_count(), 0);
  storage_version_[index_of(s)] = 0;
  lifetime_start_[index_of(s)] = history_[index_of(s)].size();  // earlier lifetimes stay listed
  mutated_state_[index_of(s)] = 0;
  current_[index_of(s)] = v;
  auto b = loop_.obtain_block(AllocRequest{info.size, e.stream, s});
  if (!b) return;
  graph_.place(v, *b);
  loop_.log_alloc(s, *b, /*fresh=*/true);
  if (e.addr != 0) loop_.check_address(e.addr, b->addr);
}

void RematExecutor::evict_value(ValueId v, bool forced) {
  if (index_of(v) >= graph_.value_count() || (forced && !graph_.evictable(v))) {
    throw std::logic_error("policy asked to evict value " + std::to_string(index_of(v)) +
                           ", which is not resident and evictable");
  }
  const Block b = graph_.value(v).block;
  if (loop_.logging()) loop_.log_point(LogKind::Evict, value_ref(v), forced);
  graph_.evict(v);
  loop_.release_block(graph_.value(v).storage, b);
  loop_.report().evicted(forced);
}

void RematExecutor::free_storage(TensorId storage) {
  const ValueId v = current_[index_of(storage)];
  // State has no history: values computed from it are settled now rather than kept recomputable
  // from a copy of a lifetime that has ended (the auditor's rule).
  if (state(storage) && !settle_history(storage, /*all_lifetimes=*/true)) return;
  current_[index_of(storage)] = kNoValue;
  release_value(v);
  if (!kept_.empty()) release_kept();
}

// The last external reference to `v` is gone (trace free, or replaced by copy-on-write).
void RematExecutor::release_value(ValueId v) {
  graph_.set_released(v);
  const ValueState state = graph_.value(v).state;
  if (state == ValueState::SwappedOut) {  // on the host: kept only for evicted values needing it
    if (graph_.needed_by_evicted(v)) {
      kept_.push_back(v);
    } else {
      drop_value(v);
    }
    return;
  }
  // Evicted: stays recomputable. A copy in flight: decided when it completes.
  if (state != ValueState::Resident) return;
  // Unevictable values (constants, random outputs, state, locked ones) are not recomputed.
  if (!graph_.value(v).unevictable && graph_.recomputable(v, trace_)) {
    switch (options_.dealloc) {
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
  // an evicted value still needs it, in which case it stays, locked, until none does.
  if (graph_.needed_by_evicted(v)) {
    graph_.set_unevictable(v);
    kept_.push_back(v);
  } else {
    drop_value(v);
  }
}

// Released values kept for evicted values that needed them are dropped once none does: the
// trace has released those values since (checked after each trace free; otherwise the kept
// value would hold its memory to the end of the run, out of every policy's reach).
void RematExecutor::release_kept() {
  std::size_t n = 0;
  for (const ValueId v : kept_) {
    const RematValue& x = graph_.value(v);
    if (x.state == ValueState::Gone || x.state == ValueState::Evicted) continue;  // holds nothing now
    const bool settled = x.state == ValueState::Resident || x.state == ValueState::SwappedOut;
    if (settled && x.pins == 0 && !graph_.needed_by_evicted(v)) {
      drop_value(v);
      continue;
    }
    kept_[n++] = v;
  }
  kept_.resize(n);
}

// Frees v for good: its block if it is resident, its host copy if it is swapped out. The values
// that could only be recomputed through it (resident, or on the host) are locked, so none is
// evicted later with no way back.
void RematExecutor::drop_value(ValueId v) {
  graph_.lock_dependents(v);
  const bool holds_block = graph_.value(v).state == ValueState::Resident;
  const Block b = graph_.value(v).block;
  graph_.drop(v);
  if (holds_block) loop_.release_block(graph_.value(v).storage, b);
}

// Residency checks (engine.residency_checks, --paranoid): resident values hold disjoint blocks inside the budget, and
// the allocator holds at least their bytes.
void RematExecutor::check_residency() const {
  std::uint64_t end = 0;
  Bytes held;
  const bool addresses = loop_.alloc().address_aware();
  for (const auto& [addr, v] : graph_.holders_by_address()) {
    const RematValue& x = graph_.value(v);
    const bool holds_block =
        x.state == ValueState::Resident || x.state == ValueState::SwappingOut || x.state == ValueState::SwappingIn;
    if (!holds_block || x.block.addr != addr) {
      throw InvariantError("remat: address map out of date at value " + std::to_string(index_of(v)));
    }
    if (addresses && addr < end) throw InvariantError("remat: resident blocks overlap at " + std::to_string(addr));
    end = addr + x.block.size.value;
    held += x.block.size;
  }
  const AllocatorStats s = loop_.alloc().stats();
  if (held > s.allocated) throw InvariantError("remat: resident values hold more than the allocator has allocated");
  if (s.reserved > loop_.options().budget) throw InvariantError("remat: the allocator reserved more than the budget");
}

void RematExecutor::record_thrash() {
  loop_.stop(RunStatus::Thrashed);
  loop_.report().thrashed_at(loop_.event_index(), loop_.iteration(), loop_.op_time());
}

}  // namespace coopsim::engine_detail
