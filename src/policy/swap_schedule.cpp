// Shared swap-policy machinery (see swap_schedule.hpp).
#include "swap_schedule.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace coopsim::swap_detail {

UseIndex::UseIndex(const Trace& trace) : uses_(trace.tensors.size()) {
  const auto add = [&](std::uint32_t tensor, std::uint32_t at) {
    auto& u = uses_[trace.storage_of(tensor)];
    if (u.empty() || u.back() != at) u.push_back(at);
  };
  for (std::uint32_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    if (e.kind == EventKind::Access) {
      add(index_of(e.tensor()), i);
    } else if (e.kind == EventKind::Compute) {
      const OpInfo& op = trace.op(e.compute_op());
      for (TensorId x : op.inputs) add(index_of(x), i);
      for (TensorId x : op.outputs) add(index_of(x), i);
    }
  }
}

std::uint32_t UseIndex::next_use(std::uint32_t storage, std::size_t after) const {
  const auto& u = uses_[storage];
  auto it = std::upper_bound(u.begin(), u.end(), after);
  return it == u.end() ? kNoIndex : *it;
}

EventTimes model_event_times(const Trace& trace) {
  EventTimes t;
  t.start.resize(trace.events.size());
  t.end.resize(trace.events.size());
  SimTime now{0};
  SimTime t0 = TraceEvent::kNotRecorded;  // the first timestamp
  for (std::size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    if (e.timed()) {
      if (t0 == TraceEvent::kNotRecorded) t0 = e.time;
      now = std::max(now, e.time - t0);
    }
    t.start[i] = now;
    // Saturates: a trace whose op time passes 2^63 - 1 ns is stopped by the engine's clock.
    if (e.kind == EventKind::Compute) now = sat_add(now, trace.op(e.compute_op()).duration);
    t.end[i] = now;
  }
  return t;
}

std::vector<std::pair<std::size_t, std::size_t>> iteration_ranges(const Trace& trace) {
  std::vector<std::size_t> starts;
  for (std::size_t i = 0; i < trace.events.size(); ++i) {
    if (trace.events[i].kind == EventKind::Iteration && i > 0) starts.push_back(i);
  }
  std::vector<std::pair<std::size_t, std::size_t>> r;
  std::size_t first = 0;
  for (std::size_t s : starts) {
    r.emplace_back(first, s);
    first = s;
  }
  r.emplace_back(first, trace.events.size());
  return r;
}

std::vector<std::uint64_t> load_curve(const Trace& trace) {
  std::vector<std::uint64_t> load(trace.events.size());
  std::uint64_t live = 0;
  for (const InitialSegment& s : trace.initial_segments) {
    for (const InitialBlock& b : s.blocks) {
      if (!b.is_free()) live += trace.tensor(b.tensor).size.value;
    }
  }
  for (std::size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    if (e.kind == EventKind::Alloc) live += trace.tensor(e.tensor()).size.value;
    if (e.kind == EventKind::Free) live -= std::min(live, trace.tensor(e.tensor()).size.value);
    load[i] = live;
  }
  return load;
}

void SwapSchedule::set(std::vector<PlannedSwap> plan) {
  std::sort(plan.begin(), plan.end(), [](const PlannedSwap& a, const PlannedSwap& b) {
    return a.out_at != b.out_at ? a.out_at < b.out_at : a.tensor < b.tensor;
  });
  plan_ = std::move(plan);
  state_.assign(plan_.size(), State::Waiting);
  next_ = 0;
  awake_.clear();
  parked_ = {};
}

std::vector<Action> SwapSchedule::due(const MemoryView& view) {
  const std::size_t i = index_of(view.event_index());
  while (!parked_.empty() && parked_.top().first <= i) {
    awake_.insert(parked_.top().second);
    parked_.pop();
  }
  while (next_ < plan_.size() && plan_[next_].out_at <= i) awake_.insert(static_cast<std::uint32_t>(next_++));
  // Swap-outs go first: a swap-in's allocation may make the engine ask the fallback for room,
  // which could otherwise take a tensor this batch names next.
  std::vector<Action> actions, swap_ins;
  Bytes promised;  // swap-ins already asked for in this call
  std::vector<std::uint32_t> done, park;
  for (std::uint32_t k : awake_) {  // activation (= plan) order, as a list of every active entry had it
    const PlannedSwap& p = plan_[k];
    const TensorId t{p.tensor};
    if (i >= p.use_at) {
      state_[k] = State::Done;  // the use came: on-demand swap-in (if still out) is the engine's
      done.push_back(k);
      continue;
    }
    const Residency r = view.residency(t);
    if (state_[k] == State::Waiting) {
      if (r == Residency::Resident && !view.pinned(t)) {
        actions.push_back({Action::Kind::SwapOut, t});
        state_[k] = State::Out;
        // Nothing happens to it before its swap-in or its use: parked until then.
        if (std::min(p.in_at, p.use_at) > i + 1) park.push_back(k);
      } else if (i >= p.in_at) {
        state_[k] = State::Done;  // never got a chance to leave early enough
        done.push_back(k);
      }
    } else if (state_[k] == State::Out && i >= p.in_at) {
      if (r == Residency::SwappedOut) {
        const Bytes size = view.trace().tensors[p.tensor].size;
        const AllocatorStats s = view.allocator_stats();
        if (s.allocated + promised + size <= view.budget()) {
          swap_ins.push_back({Action::Kind::SwapIn, t});
          promised += size;
          state_[k] = State::Done;
          done.push_back(k);
        }
      } else if (r != Residency::SwappingOut) {
        state_[k] = State::Done;  // freed, or brought back already
        done.push_back(k);
      }
    }
  }
  for (std::uint32_t k : done) awake_.erase(k);
  for (std::uint32_t k : park) {
    awake_.erase(k);
    parked_.emplace(std::min(plan_[k].in_at, plan_[k].use_at), k);
  }
  actions.insert(actions.end(), swap_ins.begin(), swap_ins.end());
  return actions;
}

std::vector<Action> furthest_next_use_swap_out(const UseIndex& uses, const MemoryView& view) {
  const std::size_t now = index_of(view.event_index());
  const auto n = static_cast<std::uint32_t>(view.trace().tensors.size());
  std::uint32_t best = kNoIndex;
  std::uint64_t best_next = 0;
  for (std::uint32_t t = 0; t < n; ++t) {
    if (view.residency(TensorId{t}) != Residency::Resident || view.pinned(TensorId{t})) continue;
    const std::uint32_t nu = uses.next_use(t, now);
    const std::uint64_t next = nu == kNoIndex ? std::numeric_limits<std::uint64_t>::max() : nu;
    if (best == kNoIndex || next > best_next) {
      best = t;
      best_next = next;
    }
  }
  view.count_scanned(n);
  if (best == kNoIndex) return {};
  return {{Action::Kind::SwapOut, TensorId{best}}};
}

LinkModel planning_link(const std::string& preset) {
  for (const LinkPreset& p : link_presets()) {
    if (p.name == preset) {
      LinkModel m;
      m.name = p.name;
      m.d2h = p.d2h;
      m.h2d = p.h2d;
      return m;
    }
  }
  throw std::logic_error("unknown link preset " + preset);
}

std::vector<std::string> link_preset_names() {
  std::vector<std::string> names;
  for (const LinkPreset& p : link_presets()) names.push_back(p.name);
  return names;
}

}  // namespace coopsim::swap_detail
