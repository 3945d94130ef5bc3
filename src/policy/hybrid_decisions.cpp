// Hybrid swap/recompute planning model and runtime executor (see hybrid_plan.hpp).
#include "hybrid_decisions.hpp"

#include <algorithm>
#include <limits>

#include "coopsim/policy/remat/victim.hpp"

namespace coopsim::hybrid_detail {

namespace {

bool constant_role(TensorRole r) {
  return r == TensorRole::Parameter || r == TensorRole::Input || r == TensorRole::OptimizerState;
}

constexpr int kMaxChainDepth = 8;  // recompute chains are costed this deep, then truncated

}  // namespace

std::pair<std::uint64_t, std::size_t> peak_of(const std::vector<std::uint64_t>& load) {
  std::size_t at = 0;
  for (std::size_t i = 1; i < load.size(); ++i) {
    if (load[i] > load[at]) at = i;
  }
  return {load.empty() ? 0 : load[at], at};
}

GreedyState::GreedyState(const HybridPlanner& planner, std::size_t b, std::size_t e,
                         const std::vector<std::uint64_t>& load, const std::vector<Gap>& chosen)
    : planner_(planner),
      b_(b),
      all_(planner.gaps(b, e)),
      recomputes_(chosen),
      load_(load, 0, load.size()),
      cost_(all_.size()),
      cost_version_(all_.size(), std::numeric_limits<std::uint64_t>::max()) {
  for (const Gap& g : chosen) taken_.emplace(g.tensor, g.last_use);
}

std::span<const Gap> GreedyState::opened_before(std::size_t at) const {
  const auto end = std::partition_point(all_.begin(), all_.end(), [&](const Gap& g) { return g.last_use < at; });
  return {all_.data(), static_cast<std::size_t>(end - all_.begin())};
}

std::pair<std::uint64_t, std::size_t> GreedyState::peak() const {
  const auto [value, offset] = load_.peak();
  return {value, b_ + offset};
}

SimTime GreedyState::recompute_cost(const Gap& g) {
  const auto k = static_cast<std::size_t>(&g - all_.data());
  if (cost_version_[k] != recomputes_.version()) {
    cost_[k] = planner_.recompute_cost(g, recomputes_);
    cost_version_[k] = recomputes_.version();
  }
  return cost_[k];
}

void GreedyState::take(const Gap& g, std::vector<Gap>& chosen) {
  planner_.apply(g, load_, b_);
  taken_.emplace(g.tensor, g.last_use);
  recomputes_.add(g);
  chosen.push_back(g);
}

HybridPlanner::HybridPlanner(const Trace& trace, const LinkModel& link, Bytes smallest)
    : trace_(trace),
      link_(link),
      smallest_(smallest),
      uses_(trace),
      times_(swap_detail::model_event_times(trace)),
      load_(swap_detail::load_curve(trace)),
      free_at_(trace.tensors.size(), kNoIndex),
      evictable_(trace.tensors.size(), 1) {
  // What the engine never evicts (remat_executor.cpp): constants, accumulated gradients, state
  // mutated by an op with outputs of its own, outputs of random ops.
  for (std::uint32_t s = 0; s < trace.tensors.size(); ++s) {
    if (constant_role(trace.tensors[s].role)) evictable_[s] = 0;
  }
  for (const OpInfo& op : trace.ops) {
    const bool has_outputs = std::any_of(op.outputs.begin(), op.outputs.end(),
                                         [&](TensorId t) { return !trace.tensors[index_of(t)].is_view(); });
    bool updates_state = false;
    for (TensorId m : op.mutated) {
      const std::uint32_t s = trace.storage_of(index_of(m));
      if (constant_role(trace.tensors[s].role)) updates_state = true;
      if (has_outputs) evictable_[s] = 0;
    }
    for (TensorId x : op.inputs) {
      const std::uint32_t s = trace.storage_of(index_of(x));
      if (updates_state && trace.tensors[s].role == TensorRole::Gradient) evictable_[s] = 0;
    }
    if (op.random) {
      for (TensorId x : op.outputs) evictable_[trace.storage_of(index_of(x))] = 0;
    }
  }
  writers_.resize(trace.tensors.size());
  for (std::size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& ev = trace.events[i];
    if (ev.kind == EventKind::Free) free_at_[index_of(ev.tensor())] = static_cast<std::uint32_t>(i);
    if (ev.kind != EventKind::Compute) continue;
    const OpInfo& op = trace.op(ev.compute_op());
    auto wrote = [&](std::uint32_t s) {
      if (writers_[s].empty() || writers_[s].back() != i) writers_[s].push_back(static_cast<std::uint32_t>(i));
    };
    for (TensorId t : op.outputs) {
      if (!trace.tensors[index_of(t)].is_view()) wrote(index_of(t));
    }
    for (TensorId t : op.mutated) wrote(trace.storage_of(index_of(t)));
  }
}

std::vector<Gap> HybridPlanner::gaps(std::size_t b, std::size_t e) const {
  std::vector<Gap> out;
  // The compute event that last wrote each storage, as the scan goes.
  std::vector<std::uint32_t> writer(trace_.tensors.size(), kNoIndex);
  for (std::size_t i = 0; i < e; ++i) {
    const TraceEvent& ev = trace_.events[i];
    if (ev.kind == EventKind::Alloc) writer[index_of(ev.tensor())] = kNoIndex;
    if (ev.kind != EventKind::Compute && ev.kind != EventKind::Access) continue;
    // Gaps opened by this use (uses are listed per storage in event order).
    auto open_gap = [&](std::uint32_t s) {
      const auto& u = uses_.uses(s);
      auto it = std::upper_bound(u.begin(), u.end(), static_cast<std::uint32_t>(i));
      if (i < b || it == u.end() || *it >= e || *it <= i + 1) return;
      if (trace_.tensors[s].size < smallest_) return;
      Gap g;
      g.tensor = s;
      g.last_use = static_cast<std::uint32_t>(i);
      g.next_use = *it;
      g.producer = writer[s];
      g.size = trace_.tensors[s].size;
      g.idle = times_.start[g.next_use] - times_.end[g.last_use];
      g.out = link_.transfer_time(Direction::DeviceToHost, g.size);
      g.in = link_.transfer_time(Direction::HostToDevice, g.size);
      g.recomputable =
          evictable_[s] != 0 && g.producer != kNoIndex && !trace_.op(trace_.events[g.producer].compute_op()).random;
      out.push_back(g);
    };
    std::vector<std::uint32_t> seen;
    auto once = [&](std::uint32_t s) {
      if (std::find(seen.begin(), seen.end(), s) != seen.end()) return;
      seen.push_back(s);
      open_gap(s);
    };
    if (ev.kind == EventKind::Access) {
      once(trace_.storage_of(index_of(ev.tensor())));
      continue;
    }
    const OpInfo& op = trace_.op(ev.compute_op());
    for (const auto* list : {&op.inputs, &op.outputs}) {
      for (TensorId x : *list) {
        const std::uint32_t s = trace_.storage_of(index_of(x));
        // A write makes this event the value's producer before the gap opens.
        const bool writes = (list == &op.outputs && !trace_.tensors[index_of(x)].is_view()) ||
                            std::any_of(op.mutated.begin(), op.mutated.end(),
                                        [&](TensorId m) { return trace_.storage_of(index_of(m)) == s; });
        if (writes) writer[s] = static_cast<std::uint32_t>(i);
      }
    }
    for (const auto* list : {&op.inputs, &op.outputs}) {
      for (TensorId x : *list) once(trace_.storage_of(index_of(x)));
    }
  }
  std::sort(out.begin(), out.end(), [](const Gap& x, const Gap& y) {
    return x.last_use != y.last_use ? x.last_use < y.last_use : x.tensor < y.tensor;
  });
  return out;
}

SimTime HybridPlanner::swap_stall(const Gap& g) {
  // Times here saturate (sat_add): a plan's estimates must not wrap on a very slow link.
  const SimTime excess = sat_add(g.out, g.in) - g.idle;
  return excess > SimTime{0} ? excess : SimTime{0};
}

std::size_t HybridPlanner::index_at(SimTime t, std::size_t b, std::size_t e) const {
  const auto first = times_.start.begin() + static_cast<std::ptrdiff_t>(b);
  const auto last = times_.start.begin() + static_cast<std::ptrdiff_t>(e);
  return static_cast<std::size_t>(std::lower_bound(first, last, t) - times_.start.begin());
}

std::pair<std::size_t, std::size_t> HybridPlanner::absence(const Gap& g) const {
  if (g.choice == Choice::Recompute) return {g.last_use, g.next_use};
  // Freed once the copy out ends; taken again after the last event that ends before the copy
  // in must start.
  const std::size_t from = index_at(sat_add(times_.end[g.last_use], g.out), g.last_use + 1, g.next_use);
  const SimTime in_start = times_.start[g.next_use] - g.in;
  std::size_t to = g.next_use;
  while (to > from && times_.end[to - 1] > in_start) --to;
  return {from, std::max(from, to)};
}

bool HybridPlanner::covers(const Gap& g, Choice choice, std::size_t at) const {
  Gap probe = g;
  probe.choice = choice;
  const auto [from, to] = absence(probe);
  return from <= at && at < to;
}

void HybridPlanner::apply(const Gap& g, std::vector<std::uint64_t>& load, std::size_t b) const {
  const auto [from, to] = absence(g);
  for (std::size_t i = from; i < to; ++i) load[i - b] -= std::min(load[i - b], g.size.value);
}

void HybridPlanner::apply(const Gap& g, swap_detail::PeakTree& load, std::size_t b) const {
  const auto [from, to] = absence(g);
  load.lower(from - b, to - b, g.size.value);
}

std::vector<std::uint64_t> HybridPlanner::simulate(std::size_t b, std::size_t e, std::vector<Gap>& chosen,
                                                   bool serial) const {
  std::vector<std::uint64_t> load(load_.begin() + static_cast<std::ptrdiff_t>(b),
                                  load_.begin() + static_cast<std::ptrdiff_t>(e));
  std::vector<Gap*> swaps;
  for (Gap& g : chosen) {
    if (g.choice == Choice::Recompute || !serial) {
      apply(g, load, b);
    } else {
      swaps.push_back(&g);
    }
  }
  if (swaps.empty()) return load;
  // Serial lanes: copies out in order of their gaps' opening, copies in backwards from the uses.
  std::vector<std::size_t> from(swaps.size()), to(swaps.size());
  std::vector<SimTime> out_end(swaps.size());
  SimTime lane{0};
  for (std::size_t k = 0; k < swaps.size(); ++k) {
    const Gap& g = *swaps[k];
    const SimTime start = std::max(times_.end[g.last_use], lane);
    lane = sat_add(start, g.out);
    out_end[k] = lane;
    from[k] = index_at(lane, g.last_use + 1, g.next_use);
  }
  std::vector<std::size_t> order(swaps.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    return swaps[x]->next_use != swaps[y]->next_use ? swaps[x]->next_use > swaps[y]->next_use : x < y;
  });
  SimTime in_lane = SimTime::max();
  for (std::size_t k : order) {
    const Gap& g = *swaps[k];
    const SimTime finish = std::min(times_.start[g.next_use], in_lane);
    const SimTime start = finish - g.in;
    std::size_t t = g.next_use;
    while (t > from[k] && times_.end[t - 1] > start) --t;
    to[k] = std::max(from[k], t);
    swaps[k]->in_at = static_cast<std::uint32_t>(t > 0 ? t - 1 : 0);  // issued after event t - 1
    // The copy in cannot start before the copy out ended: what is late is a stall at the use.
    const SimTime late = sat_add(std::max(start, out_end[k]), g.in) - times_.start[g.next_use];
    swaps[k]->cost = late > SimTime{0} ? late : SimTime{0};
    in_lane = std::max(start, out_end[k]) < in_lane ? std::max(start, out_end[k]) : in_lane;
  }
  for (std::size_t k = 0; k < swaps.size(); ++k) {
    for (std::size_t i = from[k]; i < to[k]; ++i) load[i - b] -= std::min(load[i - b], swaps[k]->size.value);
  }
  return load;
}

ChosenRecomputes::ChosenRecomputes(const std::vector<Gap>& chosen) {
  for (const Gap& g : chosen) add(g);
}

void ChosenRecomputes::add(const Gap& g) {
  if (g.choice != Choice::Recompute) return;
  gaps_[g.tensor].emplace_back(g.last_use, g.next_use);
  ++version_;
}

bool ChosenRecomputes::out_at(std::uint32_t storage, std::uint32_t at) const {
  const auto it = gaps_.find(storage);
  if (it == gaps_.end()) return false;
  return std::any_of(it->second.begin(), it->second.end(),
                     [&](const auto& gap) { return gap.first < at && at <= gap.second; });
}

SimTime HybridPlanner::recompute_cost(const Gap& g, const ChosenRecomputes& chosen) const {
  if (g.producer == kNoIndex) return SimTime::max();
  return chain_cost(g.producer, g.next_use, chosen, 0);
}

// The producer at event `producer_event` re-run at event `at`, plus the producers of its
// inputs that will be out of memory then.
SimTime HybridPlanner::chain_cost(std::uint32_t producer_event, std::uint32_t at, const ChosenRecomputes& chosen,
                                  int depth) const {
  const OpInfo& op = trace_.op(trace_.events[producer_event].compute_op());
  SimTime cost = op.duration;
  if (depth >= kMaxChainDepth) return cost;
  std::vector<std::uint32_t> seen;
  for (TensorId x : op.inputs) {
    const std::uint32_t s = trace_.storage_of(index_of(x));
    if (std::find(seen.begin(), seen.end(), s) != seen.end() || !evictable_[s]) continue;
    seen.push_back(s);
    const bool freed = free_at_[s] != kNoIndex && free_at_[s] < at;
    const bool chosen_out = chosen.out_at(s, at);
    if (!freed && !chosen_out) continue;
    // Its value as the producer read it: the last write before the producer ran.
    const auto& w = writers_[s];
    auto it = std::lower_bound(w.begin(), w.end(), producer_event);
    if (it != w.begin()) cost = sat_add(cost, chain_cost(*(it - 1), at, chosen, depth + 1));
  }
  return cost;
}

void HybridExecutor::set(const std::vector<Gap>& chosen) {
  plan_ = chosen;
  std::vector<swap_detail::PlannedSwap> swaps;
  evictions_.clear();
  next_eviction_ = 0;
  for (const Gap& g : chosen) {
    if (g.choice == Choice::Swap) {
      // Issued after the opening use; brought back after event in_at (planned on the lane).
      swaps.push_back({g.tensor, g.last_use, std::max(g.last_use + 1, g.in_at), g.next_use});
    } else if (g.choice == Choice::Recompute) {
      evictions_.emplace_back(g.last_use, g.tensor);
    }
  }
  std::sort(evictions_.begin(), evictions_.end());
  swaps_.set(std::move(swaps));
}

std::vector<Action> HybridExecutor::due(const MemoryView& view) {
  std::vector<Action> out;
  const std::size_t i = index_of(view.event_index());
  const RematGraph* g = view.remat();
  while (next_eviction_ < evictions_.size() && evictions_[next_eviction_].first <= i) {
    const auto [at, s] = evictions_[next_eviction_++];
    if (at < i || g == nullptr) continue;  // its moment passed
    const ValueId v = view.current_value(TensorId{s});
    if (v != kNoValue && g->evictable(v)) out.push_back(Action::evict(v));
  }
  auto swaps = swaps_.due(view);
  out.insert(out.end(), swaps.begin(), swaps.end());
  return out;
}

std::vector<Action> HybridExecutor::make_room(const swap_detail::UseIndex& uses, const MemoryView& view) {
  if (auto v = find_victim(view, EvictionScore::Msps, draws_)) return {Action::evict(*v)};
  return swap_detail::furthest_next_use_swap_out(uses, view);
}

}  // namespace coopsim::hybrid_detail
