// The eq-class cost and its cache (see include/coopsim/model/remat_graph.hpp).
//
// eq_class_cost(v) reads: v's producer P, the state and compute of every value in P's inputs and
// outputs (v included), and for the evicted ones the cost of their class root. A cached cost is
// dropped when any of these changes:
//  * a value u turns evicted or stops being evicted, or gets a producer (its compute): every
//    value produced by an execution that reads or writes u is invalidated (changed_value);
//  * a class root r gains or loses members or cost (merge, computed, set_producer): the values
//    that read r when their cost was computed registered on r's watch list, which fires once and
//    is emptied (changed_class). A member moved to another root always goes through a change
//    of its old root (a merge names both roots; a member cut off by computed() or
//    set_producer() takes cost from, or leaves the subtree of, its old root), so the old
//    root's list covers it.
#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string>

#include "coopsim/model/remat_graph.hpp"

namespace coopsim {

double RematGraph::compute_eq_class_cost(ValueId v, bool watch) const {
  const RematValue& x = value(v);
  double c = static_cast<double>(x.compute.count());
  if (x.producer == kNoExecution) return c;
  const RematExecution& p = executions_[index_of(x.producer)];
  for (const auto* list : {&p.inputs, &p.outputs}) {
    for (ValueId u : *list) {
      const RematValue& y = value(u);
      if (y.state != ValueState::Evicted) continue;
      const ValueId r = find_root(u);
      if (watch) watch_class(r, v);
      c += std::max(uf_cost_[index_of(r)], static_cast<double>(y.compute.count()));
    }
  }
  return c;
}

double RematGraph::eq_class_cost_uncached(ValueId v) const {
  const std::uint32_t i = index_of(v);
  if (eq_valid_[i] != 0) {
    if (verify_eq_) {
      const double fresh = compute_eq_class_cost(v, false);
      if (std::bit_cast<std::uint64_t>(fresh) != std::bit_cast<std::uint64_t>(eq_cost_[i])) {
        throw std::logic_error("remat graph: cached eq-class cost of value " + std::to_string(i) + " is " +
                               std::to_string(eq_cost_[i]) + ", recomputed " + std::to_string(fresh));
      }
    }
    return eq_cost_[i];
  }
  eq_cost_[i] = compute_eq_class_cost(v, true);
  eq_valid_[i] = 1;
  return eq_cost_[i];
}

void RematGraph::invalidate_eq(ValueId v) const {
  const std::uint32_t i = index_of(v);
  if (eq_valid_[i] == 0) return;
  eq_valid_[i] = 0;
  ++eq_generation_[i];  // its entries on watch lists are stale from now on
  if (eq_in_bound_[i] != 0) {
    // Its block's bound may hold the cost that just went stale: the compute bounds the next one.
    eq_in_bound_[i] = 0;
    if (in_candidates_[i] != 0) candidates_.absorb_at(values_[i].block.addr, CandidateBound::of(values_[i]));
  }
}

double RematGraph::candidate_cost_per_byte(ValueId v) const {
  const std::uint32_t i = index_of(v);
  const RematValue& x = values_[i];
  if (eq_valid_[i] == 0 || x.size.value == 0) return x.compute_per_byte;
  eq_in_bound_[i] = 1;
  return eq_cost_[i] / static_cast<double>(x.size.value);
}

void RematGraph::watch_class(ValueId root, ValueId reader) const {
  std::uint32_t slot = watch_free_;
  if (slot != kNoIndex) {
    watch_free_ = watches_[slot].next;
  } else {
    slot = static_cast<std::uint32_t>(watches_.size());
    watches_.emplace_back();
  }
  std::uint32_t& head = watch_head_[index_of(root)];
  watches_[slot] = Watch{reader, eq_generation_[index_of(reader)], head};
  head = slot;
}

void RematGraph::changed_class(ValueId r) {
  std::uint32_t slot = watch_head_[index_of(r)];
  watch_head_[index_of(r)] = kNoIndex;
  while (slot != kNoIndex) {
    const Watch w = watches_[slot];
    if (w.generation == eq_generation_[index_of(w.reader)]) invalidate_eq(w.reader);
    watches_[slot].next = watch_free_;
    watch_free_ = slot;
    slot = w.next;
  }
}

void RematGraph::changed_value(ValueId u) {
  for (const auto* lists : {&consumers_[index_of(u)], &writers_[index_of(u)]}) {
    for (ExecutionId e : *lists) {
      for (ValueId w : produced_[index_of(e)]) invalidate_eq(w);
    }
  }
}

}  // namespace coopsim
