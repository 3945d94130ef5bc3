// Rematerialization graph: values, executions, eq-class union-find and neighbourhood costs
// (see include/coopsim/model/remat_graph.hpp).
#include "coopsim/model/remat_graph.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace coopsim {

ValueId RematGraph::add_value(TensorId storage, Bytes size, bool unevictable) {
  const ValueId v{static_cast<std::uint32_t>(values_.size())};
  RematValue& x = values_.emplace_back();
  x.storage = storage;
  x.size = size;
  x.unevictable = unevictable;
  x.last_access = clock_;
  x.state = ValueState::Gone;  // until place()
  consumers_.emplace_back();
  writers_.emplace_back();
  uf_parent_.push_back(v);
  uf_cost_.push_back(0);
  visit_mark_.push_back(0);
  reach_memo_.push_back(0);
  in_candidates_.push_back(0);
  eq_cost_.push_back(0);
  eq_valid_.push_back(0);
  eq_in_bound_.push_back(0);
  eq_generation_.push_back(0);
  watch_head_.push_back(kNoIndex);
  return v;
}

ExecutionId RematGraph::add_execution(OpId op, SimTime cost, std::vector<ValueId> inputs,
                                      std::vector<ValueId> outputs) {
  const ExecutionId e{static_cast<std::uint32_t>(executions_.size())};
  for (ValueId u : inputs) {
    auto& c = consumers_[index_of(u)];
    if (c.empty() || c.back() != e) c.push_back(e);
    reach_memo_[index_of(u)] = 0;  // u reaches the new outputs now
    forget_reach_above(u);
  }
  for (ValueId u : outputs) {
    auto& w = writers_[index_of(u)];
    if (w.empty() || w.back() != e) w.push_back(e);
  }
  executions_.push_back(RematExecution{op, cost, std::move(inputs), std::move(outputs)});
  produced_.emplace_back();
  return e;
}

void RematGraph::set_producer(ValueId v, ExecutionId execution) {
  // v leaves its class (its subtree now reports to v) and its compute may change: the class it
  // left, its own class and every reader of v see a change.
  const ValueId old_root = find_root(v);
  RematValue& x = at(v);
  x.producer = execution;
  x.compute = executions_[index_of(execution)].cost;
  x.compute_per_byte =
      x.size.value == 0 ? 0.0 : static_cast<double>(x.compute.count()) / static_cast<double>(x.size.value);
  produced_[index_of(execution)].push_back(v);
  uf_parent_[index_of(v)] = v;
  uf_cost_[index_of(v)] = static_cast<double>(x.compute.count());
  if (old_root != v) changed_class(old_root);
  changed_class(v);
  changed_value(v);
  invalidate_eq(v);
  // A candidate's compute changed: its block's bound takes the new compute in.
  if (in_candidates_[index_of(v)] != 0) candidates_.absorb_at(x.block.addr, CandidateBound::of(x));
  sync_candidate(v);
}

void RematGraph::set_unevictable(ValueId v) {
  at(v).unevictable = true;
  sync_candidate(v);
}

void RematGraph::set_state(ValueId v, ValueState s) {
  RematValue& x = at(v);
  const bool was_evicted = x.state == ValueState::Evicted;
  const bool changed = x.state != s;
  x.state = s;
  if (was_evicted != (s == ValueState::Evicted)) changed_value(v);
  if (changed) forget_reach_above(v);
  sync_candidate(v);
}

void RematGraph::sync_candidate(ValueId v) {
  const RematValue& x = value(v);
  const bool want = x.state == ValueState::Resident && !x.unevictable && x.producer != kNoExecution;
  auto& in = in_candidates_[index_of(v)];
  if (want == (in != 0)) return;
  if (want) {
    candidates_.insert(x.block.addr, v, CandidateBound::of(x));
  } else {
    candidates_.erase(x.block.addr);
  }
  in = want ? 1 : 0;
}

std::vector<std::pair<std::uint64_t, ValueId>> RematGraph::holders_by_address() const {
  if (holders_ordered_) {
    std::vector<std::pair<std::uint64_t, ValueId>> out;
    out.reserve(holders_.size());
    ordered_holders_.for_each([&](std::uint64_t addr, ValueId v) { out.emplace_back(addr, v); });
    return out;
  }
  std::vector<std::pair<std::uint64_t, ValueId>> out;
  out.reserve(holders_.size());
  holders_.for_each([&](std::uint64_t addr, ValueId v) { out.emplace_back(addr, v); });
  std::sort(out.begin(), out.end());
  return out;
}

void RematGraph::keep_holders_ordered(bool on) {
  holders_ordered_ = on;
  ordered_holders_ = {};
  if (!on) return;
  holders_.for_each([&](std::uint64_t addr, ValueId v) { ordered_holders_.insert(addr, v); });
}

bool RematGraph::add_holder(std::uint64_t addr, ValueId v) {
  if (!holders_.insert(addr, v)) return false;
  if (holders_ordered_) ordered_holders_.insert(addr, v);
  return true;
}

void RematGraph::remove_holder(std::uint64_t addr) {
  holders_.erase(addr);
  if (holders_ordered_) ordered_holders_.erase(addr);
}

void RematGraph::place(ValueId v, const Block& b) {
  RematValue& x = at(v);
  if (!add_holder(b.addr, v)) {
    const ValueId there = *holders_.find(b.addr);
    const RematValue& o = value(there);
    throw std::logic_error("remat graph: two resident values at one address: value " + std::to_string(index_of(v)) +
                           " (storage " + std::to_string(index_of(x.storage)) + ") placed where value " +
                           std::to_string(index_of(there)) + " (storage " + std::to_string(index_of(o.storage)) +
                           ", state " + std::to_string(static_cast<int>(o.state)) + ") is");
  }
  x.block = b;
  set_state(v, ValueState::Resident);
}

void RematGraph::mark_evicted_without_memory(ValueId v) {
  if (value(v).state == ValueState::Resident) remove_holder(value(v).block.addr);
  set_state(v, ValueState::Evicted);
}

void RematGraph::evict(ValueId v) {
  mark_evicted_without_memory(v);
  // update_after_release: join the evicted inputs and outputs of the producer.
  const RematValue& x = value(v);
  if (x.producer == kNoExecution) return;
  const RematExecution& p = executions_[index_of(x.producer)];
  for (const auto* list : {&p.inputs, &p.outputs}) {
    for (ValueId u : *list) {
      if (u != v && value(u).state == ValueState::Evicted) merge(v, u);
    }
  }
}

void RematGraph::drop(ValueId v) {
  if (value(v).state == ValueState::Resident) remove_holder(value(v).block.addr);
  set_state(v, ValueState::Gone);
}

void RematGraph::begin_swap_out(ValueId v) {
  if (value(v).state != ValueState::Resident) throw std::logic_error("remat graph: swap-out of a value not resident");
  set_state(v, ValueState::SwappingOut);
}

void RematGraph::finish_swap_out(ValueId v) {
  if (value(v).state != ValueState::SwappingOut)
    throw std::logic_error("remat graph: swap-out completion out of order");
  remove_holder(value(v).block.addr);
  set_state(v, ValueState::SwappedOut);
}

void RematGraph::begin_swap_in(ValueId v, const Block& b) {
  RematValue& x = at(v);
  if (x.state != ValueState::SwappedOut) throw std::logic_error("remat graph: swap-in of a value not swapped out");
  if (!add_holder(b.addr, v)) throw std::logic_error("remat graph: two values at one address");
  x.block = b;
  set_state(v, ValueState::SwappingIn);
}

void RematGraph::finish_swap_in(ValueId v) {
  if (value(v).state != ValueState::SwappingIn) throw std::logic_error("remat graph: swap-in completion out of order");
  set_state(v, ValueState::Resident);
}

void RematGraph::computed(ValueId v) {
  // update_after_compute: the class loses this member's cost; the value starts a new class.
  const ValueId r = find_root(v);
  RematValue& x = at(v);
  if (r != v) {
    uf_cost_[index_of(r)] -= static_cast<double>(x.compute.count());
    changed_class(r);
  }
  uf_parent_[index_of(v)] = v;
  uf_cost_[index_of(v)] = static_cast<double>(x.compute.count());
  changed_class(v);
  x.last_access = clock_;
}

ValueId RematGraph::find_root(ValueId v) const {
  while (uf_parent_[index_of(v)] != v) {
    uf_parent_[index_of(v)] = uf_parent_[index_of(uf_parent_[index_of(v)])];
    v = uf_parent_[index_of(v)];
  }
  return v;
}

void RematGraph::merge(ValueId a, ValueId b) {
  const ValueId ra = find_root(a);
  const ValueId rb = find_root(b);
  if (ra == rb) return;
  uf_parent_[index_of(rb)] = ra;
  uf_cost_[index_of(ra)] += uf_cost_[index_of(rb)];
  changed_class(ra);
  changed_class(rb);
}

// Sum of compute over evicted values reachable from v's neighbours through evicted values,
// upwards (producers' inputs) and/or downwards (consumers' outputs).
static double region_cost(const RematGraph& g, ValueId v, bool up, bool down, std::vector<std::uint32_t>& mark,
                          std::uint32_t epoch, std::vector<ValueId>& stack, std::uint64_t* scanned) {
  double total = 0;
  mark[index_of(v)] = epoch;
  auto visit_neighbours = [&](ValueId x) {
    const RematValue& val = g.value(x);
    if (up && val.producer != kNoExecution) {
      for (ValueId u : g.execution(val.producer).inputs) {
        if (mark[index_of(u)] != epoch && g.value(u).state == ValueState::Evicted) {
          mark[index_of(u)] = epoch;
          stack.push_back(u);
        }
      }
    }
    if (down) {
      for (ExecutionId e : g.consumers(x)) {
        for (ValueId w : g.execution(e).outputs) {
          if (mark[index_of(w)] != epoch && g.value(w).state == ValueState::Evicted) {
            mark[index_of(w)] = epoch;
            stack.push_back(w);
          }
        }
      }
    }
  };
  stack.clear();
  visit_neighbours(v);
  while (!stack.empty()) {
    const ValueId x = stack.back();
    stack.pop_back();
    if (scanned != nullptr) ++*scanned;
    total += static_cast<double>(g.value(x).compute.count());
    visit_neighbours(x);
  }
  return total;
}

bool RematGraph::recomputable(ValueId v, const Trace& trace) const {
  const RematValue& x = value(v);
  if (x.producer == kNoExecution) return false;
  const RematExecution& p = executions_[index_of(x.producer)];
  if (trace.op(p.op).random) return false;
  return std::none_of(p.inputs.begin(), p.inputs.end(), [&](ValueId u) { return value(u).state == ValueState::Gone; });
}

double RematGraph::neighbourhood_cost(ValueId v, std::uint64_t* scanned) const {
  ++visit_epoch_;
  const double up = region_cost(*this, v, true, false, visit_mark_, visit_epoch_, stack_, scanned);
  ++visit_epoch_;
  const double down = region_cost(*this, v, false, true, visit_mark_, visit_epoch_, stack_, scanned);
  return static_cast<double>(value(v).compute.count()) + up + down;
}

double RematGraph::ancestor_cost(ValueId v, std::uint64_t* scanned) const {
  ++visit_epoch_;
  return static_cast<double>(value(v).compute.count()) +
         region_cost(*this, v, true, false, visit_mark_, visit_epoch_, stack_, scanned);
}

}  // namespace coopsim
