// Walks over a value's evicted descendants: needed_by_evicted and lock_dependents, with their
// reach memos (see include/coopsim/model/remat_graph.hpp).
//
// Both walk from v to every value written by an execution that reads v, and onwards through
// the evicted ones. A parameter update settles every execution that read the parameter, and
// each settled value walks the region of released, evicted values below it: the same region
// once per value and per layer, quadratic in the layers (issue 34: 1.6 * 10^9 visits before
// event 605,032 of the 6,000-layer wide trace under dtr). A walk that ends without an answer
// leaves a memo on every value it went through:
//  * kReachNotNeeded: no evicted value still referenced is reachable: a later walk that meets
//    this value has nothing to find below it;
//  * kReachLocked: every resident or swapped value reachable is unevictable (the flag is never
//    cleared): a later lock walk has nothing to do below it.
// A memo holds while the values one edge below it keep their part: a change of a value's state
// (it becomes evicted and opens its descendants, or stops being evicted and may need locking),
// its release, or a new consumer clears the memos of its parents, and upwards through evicted
// parents that carry one. A parent without a memo ends the climb, because every evicted value a
// memo's walk goes through carries that memo too (set on all of them at once, cleared upwards
// along the same edges). The answers and the values locked are those of the plain walks, which
// engine.residency_checks (--paranoid) repeats on every call.
#include <stdexcept>
#include <string>
#include <vector>

#include "coopsim/model/remat_graph.hpp"

namespace coopsim {

namespace {

enum class Step { Stop, Pass, Expand };

// Visits every value written by an execution that reads v, and onwards through those that
// `visit` expands, each once; `visit(w)` may stop the walk. False when stopped.
template <class Visit>
bool walk_below(const RematGraph& g, ValueId v, std::vector<std::uint32_t>& mark, std::uint32_t epoch,
                std::vector<ValueId>& stack, Visit visit) {
  stack.assign(1, v);
  mark[index_of(v)] = epoch;
  while (!stack.empty()) {
    const ValueId x = stack.back();
    stack.pop_back();
    for (ExecutionId e : g.consumers(x)) {
      for (ValueId w : g.execution(e).outputs) {
        if (mark[index_of(w)] == epoch) continue;
        mark[index_of(w)] = epoch;
        const Step step = visit(w);
        if (step == Step::Stop) return false;
        if (step == Step::Expand) stack.push_back(w);
      }
    }
  }
  return true;
}

}  // namespace

void RematGraph::set_released(ValueId v) {
  at(v).released = true;
  forget_reach_above(v);
}

void RematGraph::forget_reach_above(ValueId z) const {
  auto& up = reach_touched_;
  up.assign(1, z);
  while (!up.empty()) {
    const ValueId x = up.back();
    up.pop_back();
    for (ExecutionId e : writers_[index_of(x)]) {
      for (ValueId p : executions_[index_of(e)].inputs) {
        auto& memo = reach_memo_[index_of(p)];
        if (memo == 0) continue;
        memo = 0;
        if (value(p).state == ValueState::Evicted) up.push_back(p);
      }
    }
  }
}

bool RematGraph::needed_by_evicted(ValueId v) const {
  const bool needed = needed_by_evicted_memo(v);
  if (verify_eq_ && needed != plain_walk_finds(v, /*unlocked=*/false)) {
    throw std::logic_error("remat graph: needed_by_evicted differs from the plain walk for value " +
                           std::to_string(index_of(v)));
  }
  return needed;
}

bool RematGraph::needed_by_evicted_memo(ValueId v) const {
  if ((reach_memo_[index_of(v)] & kReachNotNeeded) != 0) return false;
  reach_touched_.assign(1, v);
  const bool none = walk_below(*this, v, visit_mark_, ++visit_epoch_, stack_, [&](ValueId w) {
    const RematValue& y = value(w);
    if (y.state != ValueState::Evicted) return Step::Pass;
    if (!y.released) return Step::Stop;
    if ((reach_memo_[index_of(w)] & kReachNotNeeded) != 0) return Step::Pass;
    reach_touched_.push_back(w);
    return Step::Expand;
  });
  if (!none) return true;
  for (ValueId t : reach_touched_) reach_memo_[index_of(t)] |= kReachNotNeeded;
  return false;
}

void RematGraph::lock_dependents(ValueId v) {
  if ((reach_memo_[index_of(v)] & kReachLocked) == 0) {
    reach_touched_.assign(1, v);
    walk_below(*this, v, visit_mark_, ++visit_epoch_, stack_, [&](ValueId w) {
      RematValue& y = at(w);
      if (y.state == ValueState::Evicted) {
        if ((reach_memo_[index_of(w)] & kReachLocked) != 0) return Step::Pass;
        reach_touched_.push_back(w);
        return Step::Expand;
      }
      if (y.state != ValueState::Gone) {
        // Resident, or with its contents on the host: it must never be dropped to recompute.
        y.unevictable = true;
        sync_candidate(w);
      }
      return Step::Pass;
    });
    for (ValueId t : reach_touched_) reach_memo_[index_of(t)] |= kReachLocked;
  }
  if (verify_eq_ && plain_walk_finds(v, /*unlocked=*/true)) {
    throw std::logic_error("remat graph: lock_dependents left a value reachable from value " +
                           std::to_string(index_of(v)) + " evictable");
  }
}

bool RematGraph::plain_walk_finds(ValueId v, bool unlocked) const {
  std::vector<ValueId> stack;
  return !walk_below(*this, v, visit_mark_, ++visit_epoch_, stack, [&](ValueId w) {
    const RematValue& y = value(w);
    const bool evicted = y.state == ValueState::Evicted;
    if (!unlocked && evicted && !y.released) return Step::Stop;
    if (unlocked && !evicted && y.state != ValueState::Gone && !y.unevictable) return Step::Stop;
    return evicted ? Step::Expand : Step::Pass;
  });
}

}  // namespace coopsim
