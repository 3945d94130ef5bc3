// The simrd profile's runtime (include/coopsim/engine/simrd.hpp): simrd's RuntimeV2 with eager
// eviction (RuntimeV2EagerOptimized), run over a coopsim trace. Upstream references are to
// uwsampl/dtr-prototype@eff53cc4 simrd/simrd/ (runtime/v2.py unless said otherwise). The rules:
//  R1 constants: an `alloc` with no producing op is simrd's `constant` op (cost 0) computed at that
//     event, then pinned (parse/parse.py parse_file: GCompute + GGet(pin=True); v2.py pin). Pinned
//     storages are locked for good, so never candidates.
//  R2 release: the trace's `free` (the storage's last external reference) evicts the storage at
//     once unless it is pinned or already evicted (RuntimeV2EagerOptimized.release). Nothing is
//     ever freed for good: a dead storage stays in the graph, can be recomputed as a parent and
//     counts in neighbourhood costs.
//  R3 materialize (RuntimeV2._materialize): stamp every parent's last access with the clock before
//     anything runs; lock the defined parents; materialize the undefined ones in order (nested,
//     as recomputations) and lock them; evict until the op's total_size fits; compute; unlock.
//  R4 compute (RuntimeV2._compute): the clock advances by the op's cost; memory grows by the op's
//     total_size (all its outputs); siblings that were undefined become defined; the bytes of
//     siblings that were already defined are given back at once; storages that became material
//     join the end of the pool. Rematerialized parents are not evicted again (they stay resident).
//  R5 pool order (_make_evictable / _make_unevictable): a storage leaves the pool when locked and
//     is appended again when its last lock goes, so candidates are scanned in the order they last
//     became evictable.
//  R6 choice (heuristic/heuristic.py Heuristic.choose): scan the pool, keep a candidate whose cost
//     is <= the best so far (the last of equal costs wins), stop at a cost of exactly 0.
//  R7 out of memory: the pool is empty while the op does not fit (RuntimeV2._free: MemoryError).
//  R8 2x cut: after every materialization, recomputation time > baseline x (limit - 1) stops the
//     run (remat_limit, RematExceededError; eval/pareto/run.py: run_pareto, overhead_limit 2.0).
//  R9 outputs: storages still referenced at the end are rematerialized if evicted and pinned
//     (parse.py: OutputCondition.REMATERIALIZE), which counts in the overhead.
//  R10 new outputs' storages get last access = clock after the op (RuntimeV2Optimized.compute).
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <type_traits>

#include "coopsim/base/process_heap.hpp"
#include "coopsim/base/error.hpp"
#include "coopsim/policy/policy.hpp"

#include "detail.hpp"

namespace coopsim::simrd {

namespace {

// simrd's programs are in SSA form (parse/parse.py: every GCompute makes new tensors): a tensor
// is written by one execution, never updated in place, and read only once computed or as a
// constant (a tensor no op writes). `import dtr --compat simrd` writes traces of that form; any
// other trace is refused with a one-line error before the simulation, whose rules assume it.
void refuse_outside_grammar(const Trace& trace) {
  std::vector<std::uint8_t> written(trace.tensors.size(), 0), has_producer(trace.tensors.size(), 0);
  for (const OpInfo& op : trace.ops) {
    for (TensorId o : op.outputs) has_producer[index_of(o)] = 1;
  }
  auto refuse = [&](std::size_t event, const OpInfo& op, const std::string& why) {
    throw Error(
        fmt::format("{}: event {}: dtr.compat=simrd refuses this trace: op {} {} (simrd's tensors are "
                    "written once, by one op execution: traces from `import dtr --compat simrd`)",
                    trace.path, event, op.file_id, why));
  };
  for (std::size_t e = 0; e < trace.events.size(); ++e) {
    if (trace.events[e].kind != EventKind::Compute) continue;
    const OpInfo& op = trace.op(trace.events[e].compute_op());
    if (!op.mutated.empty()) {
      refuse(e, op, fmt::format("updates tensor {} in place", trace.tensor(op.mutated.front()).file_id));
    }
    for (TensorId i : op.inputs) {
      if (has_producer[index_of(i)] != 0 && written[index_of(i)] == 0) {
        refuse(e, op, fmt::format("reads tensor {} before the op that writes it", trace.tensor(i).file_id));
      }
    }
    for (TensorId o : op.outputs) {
      if (written[index_of(o)] != 0)
        refuse(e, op, fmt::format("writes tensor {} a second time", trace.tensor(o).file_id));
      written[index_of(o)] = 1;
    }
  }
}

}  // namespace

Result simulate(const Trace& trace, const Config& config) {
  if (!simrd_runtime_supports(config.heuristic)) {
    throw std::invalid_argument("simrd profile: heuristic '" + std::string(to_string(config.heuristic)) +
                                "' is not one of simrd's deterministic heuristics");
  }
  refuse_outside_grammar(trace);
  auto state = std::make_unique<detail::State>(trace, config);
  Result result = state->run();
  dispose_before_exit(std::move(state));
  return result;
}

namespace detail {

State::State(const Trace& trace, const Config& config)
    : trace_(trace),
      config_(config),
      tensors_(trace.tensors.size()),
      storages_(trace.tensors.size()),
      material_(trace.tensors.size(), 0),
      compute_(trace.tensors.size(), 0),
      producer_(trace.tensors.size(), kNone),
      full_inputs_(trace.ops.size()),
      full_outputs_(trace.ops.size()),
      has_full_(trace.ops.size(), 0),
      root_(trace.tensors.size(), kNone),
      released_(trace.tensors.size(), 0) {
  for (std::uint32_t i = 0; i < trace.ops.size(); ++i) {
    for (TensorId o : trace.ops[i].outputs) producer_[index_of(o)] = i;
  }
  read_zero_byte_tensors();
  const EdgeCounts counts = count_edges();
  children_ = Adjacency(counts.children);
  parents_ = Adjacency(counts.parents);
}

// The most edges each storage can get: new_op's for every compute event of the trace (the
// constants' ops have no inputs), before it leaves out the pinned storages.
State::EdgeCounts State::count_edges() {
  EdgeCounts n{std::vector<std::uint32_t>(trace_.tensors.size(), 0),
               std::vector<std::uint32_t>(trace_.tensors.size(), 0)};
  auto add = [](std::uint32_t& count, std::size_t more) {
    if (more > std::numeric_limits<std::uint32_t>::max() - count) {
      throw std::invalid_argument("simrd profile: a storage has more than 2^32 - 1 edges");
    }
    count += static_cast<std::uint32_t>(more);
  };
  std::vector<std::uint32_t> ins, outs;
  auto distinct = [&](auto&& tensors, std::vector<std::uint32_t>& out) {
    out.clear();
    marks_.reset(storages_.size());
    for (const auto t : tensors) {
      std::uint32_t tensor = 0;  // a trace op's TensorId, or a tensor index of the header's lists
      if constexpr (std::is_same_v<std::decay_t<decltype(t)>, TensorId>) {
        tensor = index_of(t);
      } else {
        tensor = t;
      }
      const std::uint32_t s = storage_of(tensor);
      if (marks_.mark(s)) out.push_back(s);
    }
  };
  for (const TraceEvent& e : trace_.events) {
    if (e.kind != EventKind::Compute) continue;
    const std::uint32_t op = index_of(e.compute_op());
    if (has_full_[op] != 0) {
      distinct(full_inputs_[op], ins);
      distinct(full_outputs_[op], outs);
    } else {
      distinct(trace_.ops[op].inputs, ins);
      distinct(trace_.ops[op].outputs, outs);
    }
    for (std::uint32_t in : ins) add(n.children[in], outs.size());
    for (std::uint32_t out : outs) add(n.parents[out], ins.size());
  }
  return n;
}

void State::read_zero_byte_tensors() {
  const auto it = trace_.header.extra.find("simrd");
  if (it == trace_.header.extra.end()) return;
  const auto n_tensors = static_cast<std::uint64_t>(trace_.tensors.size());
  auto tensor = [&](const nlohmann::json& v) {
    const auto t = v.get<std::uint64_t>();
    if (t >= n_tensors)
      throw std::invalid_argument("simrd profile: header simrd: tensor " + std::to_string(t) + " out of range");
    return static_cast<std::uint32_t>(t);
  };
  for (const auto& [key, lists] : it->at("ops").items()) {
    const std::uint64_t op = std::stoull(key);
    if (op >= trace_.ops.size())
      throw std::invalid_argument("simrd profile: header simrd.ops: op " + key + " out of range");
    has_full_[op] = 1;
    for (const auto& t : lists.at("inputs")) full_inputs_[op].push_back(tensor(t));
    for (const auto& t : lists.at("outputs")) {
      full_outputs_[op].push_back(tensor(t));
      producer_[full_outputs_[op].back()] = static_cast<std::uint32_t>(op);
    }
  }
  for (const auto& r : it->at("roots")) root_[tensor(r.at(0))] = tensor(r.at(1));
  for (const auto& f : it->at("frees")) zero_frees_.emplace_back(f.at(0).get<std::size_t>(), tensor(f.at(1)));
  if (const auto o = it->find("outputs"); o != it->end()) {
    has_outputs_ = true;
    for (const auto& t : *o) outputs_.push_back(tensor(t));
  }
}

void State::advance(std::int64_t cost) {
  const auto next = checked_add(SimTime{clock_}, SimTime{cost});
  if (!next) {
    throw Error(
        fmt::format("{}: event {}: simulated time passes 2^63 - 1 ns (about 292 years): running an op of {} ns "
                    "at {} ns",
                    trace_.path, event_, cost, clock_ - 1));
  }
  clock_ = next->count();
}

Result State::run() {
  for (const TraceEvent& e : trace_.events) {
    if (e.kind == EventKind::Compute)  // saturated: the clock stops the run before it gets there
      result_.baseline = sat_add(SimTime{result_.baseline}, trace_.op(e.compute_op()).duration).count();
  }
  if (config_.overhead_limit > 0.0) {
    remat_limit_ = static_cast<double>(result_.baseline) * (config_.overhead_limit - 1.0);
  }
  std::size_t next_zero_free = 0;
  auto zero_frees_until = [&](std::size_t event) {
    for (; next_zero_free < zero_frees_.size() && zero_frees_[next_zero_free].first <= event; ++next_zero_free) {
      released_[zero_frees_[next_zero_free].second] = 1;
      on_release(zero_frees_[next_zero_free].second);
    }
  };
  try {
    for (event_ = 0; event_ < trace_.events.size(); ++event_) {
      zero_frees_until(event_);
      const TraceEvent& e = trace_.events[event_];
      switch (e.kind) {
        case EventKind::Alloc: {
          const std::uint32_t t = index_of(e.tensor());
          if (producer_[t] == kNone) on_constant(t);
          break;
        }
        case EventKind::Free: {
          const std::uint32_t t = index_of(e.tensor());
          released_[t] = 1;
          on_release(t);
          break;
        }
        case EventKind::Compute: on_compute(index_of(e.compute_op())); break;
        default: break;  // accesses (simrd's get), iterations and marks change nothing
      }
    }
    zero_frees_until(trace_.events.size());
    // R9 as simrd does it: per referenced tensor (a view is recomputed through its own op).
    for (std::uint32_t t : outputs_) {
      if (tensors_[t].op == kNone) continue;  // a 0-byte constant never used: pinned, inert
      if (!tensors_[t].defined) materialize(t, /*remat=*/true);
      pin(tensors_[t].storage);
    }
    // Without the importer's list (a trace from another importer): per live storage, its root.
    for (std::size_t i = 0; i < order_.size() && !has_outputs_; ++i) {  // order_ may not grow here: no new ops
      const std::uint32_t s = order_[i];
      if (released_[s] != 0 || storages_[s].pinned) continue;
      const std::uint32_t root = storages_[s].tensors.front();
      if (!tensors_[root].defined) materialize(root, /*remat=*/true);
      pin(s);
    }
    result_.outcome = Outcome::Completed;
  } catch (const RunStop& stop) {
    result_.outcome = stop.outcome;
    result_.stop_event = EventId{static_cast<std::uint32_t>(event_)};
    result_.requested = Bytes{static_cast<std::uint64_t>(requested_)};
  }
  if (result_.outcome == Outcome::Completed) result_.stop_event = kNoEvent;
  result_.clock = clock_ - 1;
  return result_;
}

std::uint32_t State::new_op(std::int64_t compute, std::span<const std::uint32_t> inputs,
                            std::span<const std::uint32_t> outputs) {
  flush_rebuilds();  // requested before these edges existed
  const auto id = static_cast<std::uint32_t>(ops_.size());
  if (op_tensors_.size() > std::numeric_limits<std::uint32_t>::max() - inputs.size() - outputs.size()) {
    throw std::invalid_argument("simrd profile: the ops list more than 2^32 - 1 tensors");
  }
  SOp op;
  op.compute = compute;
  op.inputs_begin = static_cast<std::uint32_t>(op_tensors_.size());
  op.inputs_size = static_cast<std::uint32_t>(inputs.size());
  op_tensors_.insert(op_tensors_.end(), inputs.begin(), inputs.end());
  op.outputs_begin = static_cast<std::uint32_t>(op_tensors_.size());
  op.outputs_size = static_cast<std::uint32_t>(outputs.size());
  op_tensors_.insert(op_tensors_.end(), outputs.begin(), outputs.end());
  // Tensor.from_op: an alias output joins its input's storage; the others get a fresh one.
  for (std::uint32_t o : outputs_of(op)) {
    STensor& t = tensors_[o];
    t.op = id;
    t.storage = storage_of(o);
    t.size = static_cast<std::int64_t>(trace_.tensors[o].size.value);
    op.total_size = t.size > kMaxBytes - op.total_size ? kMaxBytes : op.total_size + t.size;  // saturates
    SStorage& s = storages_[t.storage];
    if (!s.created) {
      s.created = true;
      order_.push_back(t.storage);
      s.size = t.size;
      s.ecn = static_cast<std::uint32_t>(uf_parent_.size());  // a fresh eq-class node of value 0
      uf_parent_.push_back(s.ecn);
      uf_value_.push_back(0);
    }
    s.tensors.push_back(o);
  }
  // The storage graph's edges of this op (SStorage::children / parents), each pair once.
  // Edges to a storage pinned already are left out: it is material for good, so every reader of
  // the edges (region walks, eq-class merges and costs) passes over it, and it is never the base
  // of a region walk, never evicted and never in a pool.
  auto distinct_storages = [&](std::span<const std::uint32_t> ts, std::vector<std::uint32_t>& out) {
    out.clear();
    marks_.reset(storages_.size());
    for (std::uint32_t t : ts) {
      const std::uint32_t s = tensors_[t].storage;
      if (material_[s] != kPinned && marks_.mark(s)) out.push_back(s);
    }
  };
  distinct_storages(inputs_of(op), scratch_);
  distinct_storages(outputs_of(op), scratch2_);
  for (std::uint32_t in : scratch_) children_.append(in, scratch2_);
  for (std::uint32_t out : scratch2_) parents_.append(out, scratch_);
  ops_.push_back(op);
  for (std::uint32_t o : outputs_of(op)) update_compute(tensors_[o].storage);  // Storage.get_compute
  return id;
}

void State::on_constant(std::uint32_t s) {
  const std::uint32_t outputs[] = {s};
  new_op(0, {}, outputs);
  materialize(s, /*remat=*/false);
  storages_[s].last_access = static_cast<double>(clock_);
  pin(s);
}

void State::on_compute(std::uint32_t op_index) {
  const OpInfo& info = trace_.ops[op_index];
  // The header's full lists, or the trace op's as tensor indexes (on_constant below and new_op
  // leave op_inputs_ and op_outputs_ alone).
  std::span<const std::uint32_t> inputs = full_inputs_[op_index], outputs = full_outputs_[op_index];
  if (has_full_[op_index] == 0) {
    op_inputs_.clear();
    op_outputs_.clear();
    for (TensorId t : info.inputs) op_inputs_.push_back(index_of(t));
    for (TensorId t : info.outputs) op_outputs_.push_back(index_of(t));
    inputs = op_inputs_;
    outputs = op_outputs_;
  }
  for (std::uint32_t p : inputs) {
    if (tensors_[p].op != kNone) continue;
    // A zero-byte constant (v1 allocates nothing for it): simrd computed and pinned it at its
    // record; a pinned 0-byte storage changes nothing until here, so it is created now.
    if (trace_.tensors[p].size.value != 0 || storage_of(p) != p || producer_[p] != kNone) {
      throw std::logic_error("simrd profile: op '" + info.name + "' reads a tensor that was never computed");
    }
    on_constant(p);
  }
  const std::uint32_t id = new_op(info.duration.count(), inputs, outputs);
  const SOp& op = ops_[id];  // ops_ and op_tensors_ grow only in new_op
  if (op.outputs_size == 0) {
    // An op whose results were all left out (0-byte storages, docs/import-dtr.md): run it as an
    // op with no outputs, which simrd never sees.
    for (std::uint32_t p : inputs_of(op)) storages_[tensors_[p].storage].last_access = static_cast<double>(clock_);
    for (std::uint32_t p : inputs_of(op)) {
      if (!tensors_[p].defined) materialize(p, true);
      lock(tensors_[p].storage);
    }
    advance(op.compute);
    for (std::uint32_t p : inputs_of(op)) unlock(tensors_[p].storage);
    return;
  }
  materialize(outputs_of(op).front(), /*remat=*/false);
  for (std::uint32_t o : outputs_of(op)) {
    storages_[tensors_[o].storage].last_access = static_cast<double>(clock_);  // R10
  }
}

void State::on_release(std::uint32_t s) {
  SStorage& st = storages_[s];
  if (!st.created || material_[s] == 0 || st.pinned) return;  // R2: a pinned constant stays resident
  if (st.locks != 0) throw std::logic_error("simrd profile: release of a locked storage");
  evict(s);
  ++result_.eager_evictions;
}

void State::pin(std::uint32_t s) {
  if (storages_[s].pinned) return;
  flush_rebuilds();  // while s, perhaps just made material, is not pinned: its frontiers' rebuilds
  lock(s);
  storages_[s].pinned = true;
  material_[s] = kPinned;  // pinned after a materialization: material
}

void State::materialize(std::uint32_t t, bool remat) {
  // ops_ and op_tensors_ do not grow below (no new op while materializing): the lists stay put.
  const SOp& op = ops_[tensors_[t].op];
  for (std::uint32_t p : inputs_of(op)) storages_[tensors_[p].storage].last_access = static_cast<double>(clock_);
  // The inputs undefined now, on a stack shared with the nested materializations (each pops its own).
  const std::size_t first_undefined = undefined_.size();
  for (std::uint32_t p : inputs_of(op)) {
    if (tensors_[p].defined) {
      lock(tensors_[p].storage);
    } else {
      undefined_.push_back(p);
    }
  }
  for (std::size_t i = first_undefined; i < undefined_.size(); ++i) {
    const std::uint32_t p = undefined_[i];
    if (!tensors_[p].defined) materialize(p, /*remat=*/true);  // a sibling may have brought it back
    lock(tensors_[p].storage);
  }
  undefined_.resize(first_undefined);
  if (!fits(op.total_size)) free_until(op.total_size);
  compute(t, remat);
  for (std::uint32_t p : inputs_of(op)) unlock(tensors_[p].storage);
  if (static_cast<double>(result_.remat_compute) > remat_limit_) throw RunStop{Outcome::Thrashed};  // R8
}

void State::compute(std::uint32_t t, bool remat) {
  const SOp& op = ops_[tensors_[t].op];
  std::vector<std::uint32_t>&dup = dup_, &fresh = fresh_, &remat_storages = remat_storages_;  // not reentrant
  dup.clear();
  fresh.clear();
  remat_storages.clear();
  bool seen_self = false;
  for (std::uint32_t u : outputs_of(op)) {
    if (u == t && !seen_self) {
      seen_self = true;
      continue;
    }
    (tensors_[u].defined ? dup : fresh).push_back(u);
    if (material_[tensors_[u].storage] == 0) remat_storages.push_back(tensors_[u].storage);
  }
  if (material_[tensors_[t].storage] == 0) remat_storages.push_back(tensors_[t].storage);
  advance(op.compute);  // remat_compute below is a part of the clock
  memory_ += op.total_size;
  result_.peak = std::max(result_.peak, Bytes{static_cast<std::uint64_t>(memory_)});
  if (remat) {
    result_.remat_compute += op.compute;
    ++result_.recomputes;
  }
  auto make_material = [&](std::uint32_t s) {
    if (material_[s] == kEvicted) material_[s] = kMaterial;  // a pinned storage stays kPinned
  };
  make_material(tensors_[t].storage);
  tensors_[t].defined = true;
  for (std::uint32_t u : fresh) {
    make_material(tensors_[u].storage);
    tensors_[u].defined = true;
  }
  for (std::uint32_t u : dup) memory_ -= tensors_[u].size;  // R4: outputs computed twice
  for (std::uint32_t s : remat_storages) make_evictable(s);
  after_compute(remat_storages);
}

}  // namespace detail
}  // namespace coopsim::simrd
