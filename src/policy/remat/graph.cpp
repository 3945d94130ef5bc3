// Rematerialization graph: values, executions, eq-class union-find and neighbourhood costs
// (see include/coopsim/policy/remat/graph.hpp).
#include "coopsim/policy/remat/graph.hpp"

#include <algorithm>
#include <stdexcept>

namespace coopsim {

std::uint32_t RematGraph::add_value(std::uint32_t storage, Bytes size, bool unevictable) {
  const auto v = static_cast<std::uint32_t>(values_.size());
  RematValue& x = values_.emplace_back();
  x.storage = storage;
  x.size = size;
  x.unevictable = unevictable;
  x.last_access = clock_;
  x.state = ValueState::Gone;  // until place()
  consumers_.emplace_back();
  uf_parent_.push_back(v);
  uf_cost_.push_back(0);
  visit_mark_.push_back(0);
  return v;
}

std::uint32_t RematGraph::add_execution(std::uint32_t op, SimTime cost, std::vector<std::uint32_t> inputs,
                                        std::vector<std::uint32_t> outputs) {
  const auto e = static_cast<std::uint32_t>(executions_.size());
  for (std::uint32_t u : inputs) {
    auto& c = consumers_[u];
    if (c.empty() || c.back() != e) c.push_back(e);
  }
  executions_.push_back(RematExecution{op, cost, std::move(inputs), std::move(outputs)});
  return e;
}

void RematGraph::set_producer(std::uint32_t v, std::uint32_t execution) {
  RematValue& x = values_[v];
  x.producer = execution;
  x.compute = executions_[execution].cost;
  uf_parent_[v] = v;
  uf_cost_[v] = static_cast<double>(x.compute.count());
}

void RematGraph::place(std::uint32_t v, const Block& b) {
  RematValue& x = values_[v];
  x.block = b;
  x.state = ValueState::Resident;
  if (!by_addr_.emplace(b.addr, v).second) {
    throw std::logic_error("remat graph: two resident values at one address");
  }
}

void RematGraph::mark_evicted_without_memory(std::uint32_t v) {
  RematValue& x = values_[v];
  if (x.state == ValueState::Resident) by_addr_.erase(x.block.addr);
  x.state = ValueState::Evicted;
}

void RematGraph::evict(std::uint32_t v) {
  mark_evicted_without_memory(v);
  // update_after_release: join the evicted inputs and outputs of the producer.
  const RematValue& x = values_[v];
  if (x.producer == kNoIndex) return;
  const RematExecution& p = executions_[x.producer];
  for (const auto* list : {&p.inputs, &p.outputs}) {
    for (std::uint32_t u : *list) {
      if (u != v && values_[u].state == ValueState::Evicted) merge(v, u);
    }
  }
}

void RematGraph::drop(std::uint32_t v) {
  RematValue& x = values_[v];
  if (x.state == ValueState::Resident) by_addr_.erase(x.block.addr);
  x.state = ValueState::Gone;
}

void RematGraph::begin_swap_out(std::uint32_t v) {
  if (values_[v].state != ValueState::Resident) throw std::logic_error("remat graph: swap-out of a value not resident");
  values_[v].state = ValueState::SwappingOut;
}

void RematGraph::finish_swap_out(std::uint32_t v) {
  RematValue& x = values_[v];
  if (x.state != ValueState::SwappingOut) throw std::logic_error("remat graph: swap-out completion out of order");
  by_addr_.erase(x.block.addr);
  x.state = ValueState::SwappedOut;
}

void RematGraph::begin_swap_in(std::uint32_t v, const Block& b) {
  RematValue& x = values_[v];
  if (x.state != ValueState::SwappedOut) throw std::logic_error("remat graph: swap-in of a value not swapped out");
  x.block = b;
  x.state = ValueState::SwappingIn;
  if (!by_addr_.emplace(b.addr, v).second) throw std::logic_error("remat graph: two values at one address");
}

void RematGraph::finish_swap_in(std::uint32_t v) {
  if (values_[v].state != ValueState::SwappingIn)
    throw std::logic_error("remat graph: swap-in completion out of order");
  values_[v].state = ValueState::Resident;
}

void RematGraph::computed(std::uint32_t v) {
  // update_after_compute: the class loses this member's cost; the value starts a new class.
  const std::uint32_t r = find_root(v);
  if (r != v) uf_cost_[r] -= static_cast<double>(values_[v].compute.count());
  uf_parent_[v] = v;
  uf_cost_[v] = static_cast<double>(values_[v].compute.count());
  values_[v].last_access = clock_;
}

std::uint32_t RematGraph::find_root(std::uint32_t v) const {
  while (uf_parent_[v] != v) {
    uf_parent_[v] = uf_parent_[uf_parent_[v]];
    v = uf_parent_[v];
  }
  return v;
}

void RematGraph::merge(std::uint32_t a, std::uint32_t b) {
  const std::uint32_t ra = find_root(a);
  const std::uint32_t rb = find_root(b);
  if (ra == rb) return;
  uf_parent_[rb] = ra;
  uf_cost_[ra] += uf_cost_[rb];
}

double RematGraph::eq_class_cost(std::uint32_t v) const {
  const RematValue& x = values_[v];
  double c = static_cast<double>(x.compute.count());
  if (x.producer == kNoIndex) return c;
  const RematExecution& p = executions_[x.producer];
  for (const auto* list : {&p.inputs, &p.outputs}) {
    for (std::uint32_t u : *list) {
      if (values_[u].state != ValueState::Evicted) continue;
      c += std::max(uf_cost_[find_root(u)], static_cast<double>(values_[u].compute.count()));
    }
  }
  return c;
}

// Sum of compute over evicted values reachable from v's neighbours through evicted values,
// upwards (producers' inputs) and/or downwards (consumers' outputs).
static double region_cost(const RematGraph& g, std::uint32_t v, bool up, bool down, std::vector<std::uint32_t>& mark,
                          std::uint32_t epoch, std::vector<std::uint32_t>& stack, std::uint64_t* scanned) {
  double total = 0;
  mark[v] = epoch;
  auto visit_neighbours = [&](std::uint32_t x) {
    const RematValue& val = g.value(x);
    if (up && val.producer != kNoIndex) {
      for (std::uint32_t u : g.execution(val.producer).inputs) {
        if (mark[u] != epoch && g.value(u).state == ValueState::Evicted) {
          mark[u] = epoch;
          stack.push_back(u);
        }
      }
    }
    if (down) {
      for (std::uint32_t e : g.consumers(x)) {
        for (std::uint32_t w : g.execution(e).outputs) {
          if (mark[w] != epoch && g.value(w).state == ValueState::Evicted) {
            mark[w] = epoch;
            stack.push_back(w);
          }
        }
      }
    }
  };
  stack.clear();
  visit_neighbours(v);
  while (!stack.empty()) {
    const std::uint32_t x = stack.back();
    stack.pop_back();
    if (scanned != nullptr) ++*scanned;
    total += static_cast<double>(g.value(x).compute.count());
    visit_neighbours(x);
  }
  return total;
}

// Visits every value written by an execution that reads v, and onwards through the evicted
// ones: `visit(w)` is called once per value and returns false to stop the walk. Returns false
// when stopped.
template <class Visit>
bool RematGraph::walk_descendants(std::uint32_t v, Visit visit) const {
  ++visit_epoch_;
  stack_.assign(1, v);
  visit_mark_[v] = visit_epoch_;
  while (!stack_.empty()) {
    const std::uint32_t x = stack_.back();
    stack_.pop_back();
    for (std::uint32_t e : consumers_[x]) {
      for (std::uint32_t w : executions_[e].outputs) {
        if (visit_mark_[w] == visit_epoch_) continue;
        visit_mark_[w] = visit_epoch_;
        if (!visit(w)) return false;
        if (values_[w].state == ValueState::Evicted) stack_.push_back(w);
      }
    }
  }
  return true;
}

bool RematGraph::needed_by_evicted(std::uint32_t v) const {
  return !walk_descendants(
      v, [&](std::uint32_t w) { return values_[w].state != ValueState::Evicted || values_[w].released; });
}

void RematGraph::lock_dependents(std::uint32_t v) {
  walk_descendants(v, [&](std::uint32_t w) {
    // Resident, or with its contents on the host: it must never be dropped to recompute.
    if (values_[w].state != ValueState::Evicted && values_[w].state != ValueState::Gone) values_[w].unevictable = true;
    return true;
  });
}

bool RematGraph::recomputable(std::uint32_t v, const Trace& trace) const {
  const RematValue& x = values_[v];
  if (x.producer == kNoIndex) return false;
  const RematExecution& p = executions_[x.producer];
  if (trace.ops[p.op].random) return false;
  return std::none_of(p.inputs.begin(), p.inputs.end(),
                      [&](std::uint32_t u) { return values_[u].state == ValueState::Gone; });
}

double RematGraph::neighbourhood_cost(std::uint32_t v, std::uint64_t* scanned) const {
  ++visit_epoch_;
  const double up = region_cost(*this, v, true, false, visit_mark_, visit_epoch_, stack_, scanned);
  ++visit_epoch_;
  const double down = region_cost(*this, v, false, true, visit_mark_, visit_epoch_, stack_, scanned);
  return static_cast<double>(values_[v].compute.count()) + up + down;
}

double RematGraph::ancestor_cost(std::uint32_t v, std::uint64_t* scanned) const {
  ++visit_epoch_;
  return static_cast<double>(values_[v].compute.count()) +
         region_cost(*this, v, true, false, visit_mark_, visit_epoch_, stack_, scanned);
}

}  // namespace coopsim
