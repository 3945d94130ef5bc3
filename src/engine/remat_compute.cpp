// The recompute executor running ops (remat_executor.cpp has the rules): an op of the trace
// pins and brings back its inputs, runs, and produces new values; an evicted value is brought
// back by re-running its producer execution, parents first with an explicit stack (at most
// limits.max_recompute_depth deep); a swapped value is swapped back in (remat_hybrid.cpp).
#include <fmt/format.h>

#include <algorithm>

#include "remat_executor.hpp"

namespace coopsim::engine_detail {

void RematExecutor::compute(OpId op_id) {
  const OpInfo& op = trace_.op(op_id);
  const bool cow = options_.inplace == InPlaceMode::CopyOnWrite;
  std::vector<ValueId> inputs;  // values read, as listed (one pin each)
  for (TensorId t : op.inputs) inputs.push_back(current_[index_of(trace_.storage_of(t))]);
  std::vector<TensorId> written;  // storages the op writes: outputs that are not views
  for (TensorId t : op.outputs) {
    if (!trace_.tensor(t).is_view()) push_unique(written, t);
  }
  std::vector<TensorId> mutated;
  for (TensorId t : op.mutated) push_unique(mutated, trace_.storage_of(t));
  // Mutable inputs of an op with outputs of its own are state (BN statistics, optimizer state),
  // unless they are among those outputs (the auditor's rule, Auditor::state_from).
  std::vector<TensorId> state_updates;
  if (!written.empty()) {
    for (TensorId s : mutated) {
      if (std::find(written.begin(), written.end(), s) == written.end()) state_updates.push_back(s);
    }
  } else {
    written = mutated;  // an in-place op: its result is the updated tensor
  }

  for (ValueId v : inputs) graph_.pin(v);
  for (ValueId v : inputs) {
    if (!materialize(v)) return;
  }
  // The values of the storages the op writes are pinned until it has run: bringing one back
  // from the host (hybrid policies), or finding a block for a new version, may ask the policy
  // for room, and a hybrid policy would otherwise swap out one already checked resident (its
  // stale block would then be moved or freed twice).
  std::vector<ValueId> held;
  for (const auto* list : {&written, &mutated}) {
    for (TensorId s : *list) push_unique(held, current_[index_of(s)]);
  }
  for (ValueId v : held) graph_.pin(v);
  for (ValueId v : held) {  // a storage the op writes without reading it may sit on the host
    if (in_swap(graph_.value(v).state) && !bring_back(v)) return;
  }
  for (ValueId v : inputs) {  // plan check: the op never reads an absent value
    if (graph_.value(v).state != ValueState::Resident) throw std::logic_error("engine: op input not resident");
  }

  std::vector<ValueId> fresh;        // values this execution produces
  std::vector<ValueId> not_read;     // values written before ever being computed
  std::vector<ValueId> replaced;     // old values of updated storages
  std::vector<ValueId> hand_over;    // recomputable in-place: (old, new) pairs, flattened
  std::vector<Block> moved_away;     // copy-on-write constants: their old blocks
  std::vector<TensorId> moved_from;  // and their storages
  std::vector<LogRef> reads_log, writes_log;
  std::vector<ValueId> written_values;  // value holding each written storage's new version
  std::vector<ValueId> placed_new;      // new versions given a block of their own (pinned until run)
  if (loop_.logging()) {
    std::vector<ValueId> seen;
    for (ValueId v : inputs) {
      if (std::find(seen.begin(), seen.end(), v) != seen.end()) continue;
      seen.push_back(v);
      reads_log.push_back(value_ref(v));
    }
  }
  // Storages without history (state, and values never computed before) change in place: what
  // was computed from their old contents is settled first.
  for (TensorId s : written) {
    const RematValue& ov = graph_.value(current_[index_of(s)]);
    if ((ov.producer == kNoExecution || ov.unevictable) && !settle_history(s, state(s))) return;
  }
  for (TensorId s : state_updates) {
    if (!settle_history(s, /*all_lifetimes=*/true)) return;
    graph_.set_unevictable(current_[index_of(s)]);
    mutated_state_[index_of(s)] = 1;
  }
  for (TensorId s : written) {
    const ValueId old = current_[index_of(s)];
    const RematValue& ov = graph_.value(old);
    if (ov.producer == kNoExecution && !constant(s)) {
      fresh.push_back(old);  // first computation (possibly by an in-place op on fresh memory)
      not_read.push_back(old);
      graph_.pin(old);
      written_values.push_back(old);
      continue;
    }
    if (ov.producer == kNoExecution) {
      // A constant updated in place: no history to keep. Copy-on-write moves it.
      written_values.push_back(old);
      if (!cow) continue;
      auto b = loop_.obtain_block(AllocRequest{ov.size, 0, s});  // `old` is held (pinned)
      if (!b) return;
      loop_.log_alloc(s, *b, /*fresh=*/false);
      moved_away.push_back(graph_.value(old).block);
      moved_from.push_back(s);
      graph_.drop(old);
      graph_.place(old, *b);
      continue;
    }
    const ValueId n = graph_.add_value(s, ov.size, graph_.value(old).unevictable);
    value_version_.resize(graph_.value_count(), 0);
    written_values.push_back(n);
    current_[index_of(s)] = n;
    replaced.push_back(old);
    fresh.push_back(n);
    // In place, the new version takes the old one's block; an old version that was evicted
    // before this op (an output written again without being read) has no block to hand over.
    // An old version that cannot be recomputed (state, a random output, a locked value) and that
    // an evicted value still needs keeps its block too.
    const RematValue& o = graph_.value(old);
    if (cow || o.state != ValueState::Resident || (o.unevictable && graph_.needed_by_evicted(old))) {
      auto b = loop_.obtain_block(AllocRequest{graph_.value(n).size, 0, s});
      if (!b) return;
      loop_.log_alloc(s, *b, /*fresh=*/false);
      graph_.place(n, *b);
      graph_.pin(n);
      placed_new.push_back(n);
    } else {
      hand_over.push_back(old);
      hand_over.push_back(n);
    }
  }

  const SimTime start = loop_.run_op(op);
  graph_.advance(op.duration);  // the graph's clock leaves out stalls: at most the loop's

  // The execution reads what it read, except values it overwrites before their first
  // computation (their old contents were never a value).
  std::vector<ValueId> reads;
  for (ValueId v : inputs) {
    if (std::find(not_read.begin(), not_read.end(), v) == not_read.end()) reads.push_back(v);
  }
  // An execution that gives state a new value (no history) can never run again: its values are
  // unevictable. (A recompute writes only the execution's new values: constants it updates in
  // place, or state it mutates besides its outputs, BN statistics, are not among them.)
  const bool writes_state =
      std::any_of(written.begin(), written.end(), [&](TensorId s) { return mutated_state_[index_of(s)] != 0; });
  const ExecutionId exec = graph_.add_execution(op_id, op.duration, reads, fresh);
  for (ValueId v : reads) note_history(graph_.value(v).storage, exec);
  for (const auto* list : {&written, &mutated}) {
    for (TensorId s : *list) note_history(s, exec);
  }
  std::vector<ValueId> dropped;  // old versions that cannot be recomputed: gone
  for (std::size_t i = 0; i < hand_over.size(); i += 2) {
    const ValueId o = hand_over[i];
    const Block b = graph_.value(o).block;
    if (graph_.value(o).unevictable) {
      graph_.drop(o);
      dropped.push_back(o);
    } else {
      graph_.evict(o);  // the old value: no memory, recomputable by its producer
    }
    graph_.place(hand_over[i + 1], b);
  }
  // Once every new version is placed: they are among the values computed through the dropped ones.
  for (ValueId o : dropped) graph_.lock_dependents(o);
  for (ValueId v : fresh) {
    graph_.set_producer(v, exec);
    if (op.random || writes_state) graph_.set_unevictable(v);
    graph_.computed(v);
  }
  // Content versions: each written storage, and each mutated state storage, gets the next one.
  for (ValueId v : written_values) {
    value_version_[index_of(v)] = ++storage_version_[index_of(graph_.value(v).storage)];
  }
  for (TensorId s : mutated) {  // state mutated by an op with outputs of its own
    if (std::find(written.begin(), written.end(), s) != written.end()) continue;
    const ValueId v = current_[index_of(s)];
    value_version_[index_of(v)] = ++storage_version_[index_of(s)];
    written_values.push_back(v);
  }
  if (loop_.logging()) {
    for (ValueId v : written_values) writes_log.push_back(value_ref(v));
    exec_record_.resize(index_of(exec) + 1, kNoRecord);
    exec_record_[index_of(exec)] = loop_.log_op(LogKind::Compute, op_id, start, reads_log, writes_log);
  }
  for (ValueId v : held) graph_.unpin(v);
  for (ValueId v : inputs) {
    graph_.touch(v);
    graph_.unpin(v);
  }
  for (ValueId v : not_read) graph_.unpin(v);
  for (ValueId v : placed_new) graph_.unpin(v);
  for (ValueId old : replaced) release_value(old);
  for (std::size_t i = 0; i < moved_away.size(); ++i) loop_.release_block(moved_from[i], moved_away[i]);
}

void RematExecutor::note_history(TensorId s, ExecutionId execution) {
  auto& h = history_[index_of(s)];
  if (h.empty() || h.back() != execution) h.push_back(execution);  // executions come in order
}

// Storage `s` is about to change without history (state, or a value written for the first
// time) or to end as state: no execution that read or wrote it may run again (the auditor's
// rule: a recompute reads and writes exactly what its origin did, and never touches a storage
// that is state, whichever lifetime its values belong to). For state that is every execution
// that touched it in any lifetime (`all_lifetimes`), else those of the current lifetime. The
// evicted values among their outputs that are still needed are brought back now; then the
// resident ones are made unevictable (or dropped, when released and needed by nothing) and the
// dependents of the evicted ones locked. Settled executions are forgotten.
bool RematExecutor::settle_history(TensorId s, bool all_lifetimes) {
  auto& h = history_[index_of(s)];
  const std::size_t from = all_lifetimes ? 0 : std::min(lifetime_start_[index_of(s)], h.size());
  std::vector<ValueId> affected;
  for (std::size_t k = from; k < h.size(); ++k) {
    for (const ValueId w : graph_.execution(h[k]).outputs) affected.push_back(w);
  }
  h.resize(from);
  lifetime_start_[index_of(s)] = from;
  if (affected.empty()) return true;
  // Bringing one back may evict another, which then becomes needed: repeat until none is (at
  // most once per affected value, since those brought back stay pinned until the end).
  std::vector<ValueId> needed;
  for (bool more = true; more;) {
    more = false;
    for (const ValueId w : affected) {
      const RematValue& x = graph_.value(w);
      if (x.state != ValueState::Evicted || (x.released && !graph_.needed_by_evicted(w))) continue;
      if (!materialize(w)) {
        for (const ValueId u : needed) graph_.unpin(u);
        return false;
      }
      graph_.pin(w);
      needed.push_back(w);
      more = true;
    }
  }
  for (const ValueId w : needed) graph_.unpin(w);
  for (const ValueId w : affected) {
    const RematValue& x = graph_.value(w);
    if (x.state == ValueState::Evicted) {
      graph_.lock_dependents(w);  // it can no longer be recomputed: as good as gone
    } else if (x.state == ValueState::Resident && x.released && x.pins == 0 && !graph_.needed_by_evicted(w)) {
      drop_value(w);  // released and needed by nothing: freed for good, as release_value would
    } else if (x.state != ValueState::Gone) {
      graph_.set_unevictable(w);
    }
  }
  return true;
}

bool RematExecutor::materialize(ValueId target) {
  if (graph_.value(target).state == ValueState::Resident) return true;
  if (in_swap(graph_.value(target).state)) return bring_back(target);
  struct Frame {
    ExecutionId execution;
    std::uint32_t next_input;
    ValueId keep;  // the value the frame below waits for
  };
  auto frame_for = [&](ValueId v) {
    const RematValue& x = graph_.value(v);
    if (x.state != ValueState::Evicted || x.producer == kNoExecution) {
      throw std::logic_error("engine: value of tensor " + std::to_string(trace_.tensor(x.storage).file_id) +
                             " is needed but cannot be recomputed");
    }
    return Frame{x.producer, 0, v};
  };
  std::vector<Frame> stack{frame_for(target)};
  while (!stack.empty()) {
    Frame& f = stack.back();
    const RematExecution& x = graph_.execution(f.execution);
    if (f.next_input < x.inputs.size()) {
      const ValueId u = x.inputs[f.next_input];
      if (in_swap(graph_.value(u).state)) {
        graph_.pin(u);  // a released value whose swap-out completes meanwhile must not be dropped
        const bool back = bring_back(u);
        graph_.unpin(u);
        if (!back) return false;
      }
      if (graph_.value(u).state == ValueState::Resident) {
        graph_.pin(u);  // kept while its siblings are rematerialized
        ++f.next_input;
      } else {
        const std::uint64_t max_depth = loop_.options().max_recompute_depth;
        if (stack.size() >= max_depth) {
          throw Error(
              fmt::format("{}: event {}: rematerializing tensor {} needs more than {} nested "
                          "recomputations (limits.max_recompute_depth)",
                          trace_.path, index_of(loop_.event_index()),
                          trace_.tensor(graph_.value(target).storage).file_id, max_depth));
        }
        stack.push_back(frame_for(u));
      }
      continue;
    }
    const Frame done = f;
    stack.pop_back();
    if (!recompute(done.execution, done.keep)) return false;
  }
  return true;
}

// Re-runs `execution`, whose inputs are resident and pinned (one pin per listed input).
bool RematExecutor::recompute(ExecutionId execution, ValueId keep) {
  const RematExecution& x = graph_.execution(execution);
  std::vector<ValueId> placed;
  std::vector<Block> temporaries;
  std::vector<TensorId> temporary_of;  // their storages
  std::vector<ValueId> outputs;
  std::vector<LogRef> writes;
  for (ValueId w : x.outputs) push_unique(outputs, w);
  for (ValueId w : outputs) {
    const RematValue& wv = graph_.value(w);
    auto b = loop_.obtain_block(AllocRequest{wv.size, 0, wv.storage});
    if (!b) return false;
    loop_.log_alloc(wv.storage, *b, /*fresh=*/false);
    if (loop_.logging()) {
      writes.push_back(LogRef{wv.storage, value_version_[index_of(w)], b->addr, b->size});
    }
    if (wv.state == ValueState::Evicted) {
      graph_.place(w, *b);
      graph_.pin(w);
      placed.push_back(w);
    } else {
      temporaries.push_back(*b);  // a second copy of a resident, swapped or gone sibling
      temporary_of.push_back(wv.storage);
    }
  }
  const SimTime start = loop_.advance(x.cost, [&] {
    return fmt::format("recomputing op {} ({} ns) at {} ns", trace_.op(x.op).file_id, x.cost.count(),
                       loop_.now().count());
  });
  graph_.advance(x.cost);
  if (loop_.logging()) {
    std::vector<LogRef> reads;
    std::vector<ValueId> seen;
    for (ValueId u : x.inputs) {
      if (std::find(seen.begin(), seen.end(), u) != seen.end()) continue;
      seen.push_back(u);
      reads.push_back(value_ref(u));
    }
    loop_.log_op(LogKind::Recompute, x.op, start, reads, writes, exec_record_[index_of(execution)]);
  }
  loop_.report().recomputed(x.cost);
  for (ValueId w : placed) graph_.computed(w);
  for (ValueId u : x.inputs) {
    graph_.touch(u);
    graph_.unpin(u);
  }
  for (ValueId w : placed) graph_.unpin(w);
  for (std::size_t i = 0; i < temporaries.size(); ++i) loop_.release_block(temporary_of[i], temporaries[i]);
  // Eager eviction after recompute: released values were only needed for this.
  std::vector<ValueId> inputs;
  for (ValueId u : x.inputs) push_unique(inputs, u);
  for (ValueId u : inputs) {
    const RematValue& uv = graph_.value(u);
    if (uv.released && uv.pins == 0 && uv.state == ValueState::Resident && !uv.unevictable) evict_value(u, false);
  }
  for (ValueId w : placed) {
    const RematValue& wv = graph_.value(w);
    if (w != keep && wv.released && wv.pins == 0 && wv.state == ValueState::Resident) evict_value(w, false);
  }
  if (thrash_at_.count() >= 0 && loop_.report().recompute_time() > thrash_at_) {
    record_thrash();
    return false;
  }
  return true;
}

}  // namespace coopsim::engine_detail
