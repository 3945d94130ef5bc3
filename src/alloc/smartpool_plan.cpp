// `smartpool` planning: from one iteration of the trace to pool offsets.
// Source: apache/singa PR #412 @0f3722d3 : src/core/memory/memory.cc (SmartMemPool::Plan,
// PoolOptInfoToBlockLifeTime, AssignColorToVertices, MergeColoredSegments,
// BestFitAllocation/FirstFitAllocation); docs/models/smartpool.md. The per-block offset
// rule is shared with `coopsim plan --method smartpool-bf|ff` (plan::place_in_order).
#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <string>

#include <fmt/format.h>

#include "smartpool.hpp"
#include "coopsim/base/error.hpp"
#include "coopsim/planner/planner.hpp"
#include "coopsim/model/trace.hpp"

namespace coopsim {

namespace {

// The iterations a trace has: its `iteration` events, or one when it has none.
std::uint32_t iteration_count(const Trace& trace) {
  std::uint32_t n = 0;
  for (const TraceEvent& e : trace.events)
    if (e.kind == EventKind::Iteration) ++n;
  return n == 0 ? 1 : n;
}

// Offsets for one class of blocks (all cross-iteration or all normal), from 0; returns the
// class height. Order: size descending, ties by r ascending (sort_by_size_r_idx_descending).
std::uint64_t place_class(SmartPoolPlan& plan, bool cross, const SmartPoolOptions& options) {
  plan::Problem problem;
  problem.file = "smartpool";
  std::vector<std::uint32_t> slot_of;  // problem buffer -> slot
  for (std::uint32_t k = 0; k < plan.slots.size(); ++k) {
    const SmartPoolSlot& s = plan.slots[k];
    if (s.cross_iteration != cross) continue;
    problem.buffers.push_back(plan::Buffer{std::to_string(k), static_cast<std::int64_t>(s.r),
                                           static_cast<std::int64_t>(s.d), static_cast<std::int64_t>(s.size.value), 0});
    slot_of.push_back(k);
  }
  if (problem.buffers.empty()) return 0;
  std::vector<std::size_t> order(problem.buffers.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  // Stable, so blocks with equal keys (impossible for trace events, whose r differ) keep their
  // allocation order, as `coopsim plan --method smartpool-*` keeps input order.
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const plan::Buffer& x = problem.buffers[a];
    const plan::Buffer& y = problem.buffers[b];
    return x.size != y.size ? x.size > y.size : x.lower < y.lower;
  });
  const plan::Fit fit = options.fit == SmartPoolFit::FirstFit
                            ? plan::Fit::First
                            : (options.bf_quirk ? plan::Fit::BestQuirk : plan::Fit::Best);
  const std::vector<std::int64_t> offsets = plan::place_in_order(problem, order, fit);
  for (std::size_t i = 0; i < offsets.size(); ++i)
    plan.slots[slot_of[i]].offset = static_cast<std::uint64_t>(offsets[i]);
  // A saturated height (2^63 - 1) means the class does not fit in 64-bit offsets.
  return static_cast<std::uint64_t>(plan::placement_height(problem, offsets));
}

constexpr std::uint64_t kUnrepresentable = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());

// Independent check of a placement: each class inside its band, and no two blocks of a class
// that are alive together share a byte (sweep over time, frees before allocs at equal times
// because lifetimes are half-open).
void validate(const SmartPoolPlan& plan) {
  const std::uint64_t cross = plan.cross_size.value;
  for (const bool cls : {true, false}) {
    const std::uint64_t lo = cls ? 0 : 2 * cross;
    const std::uint64_t hi = cls ? cross : plan.pool_size.value;
    struct Point {
      std::uint64_t time;
      bool start;
      std::uint32_t slot;
    };
    std::vector<Point> points;
    for (std::uint32_t k = 0; k < plan.slots.size(); ++k) {
      const SmartPoolSlot& s = plan.slots[k];
      if (s.cross_iteration != cls) continue;
      if (s.offset < lo || s.offset + s.size.value > hi) {
        throw InvariantError(fmt::format("smartpool: slot {} at [{}, {}) lies outside its band [{}, {})", k, s.offset,
                                         s.offset + s.size.value, lo, hi));
      }
      points.push_back({s.r, true, k});
      points.push_back({s.d, false, k});
    }
    std::sort(points.begin(), points.end(), [](const Point& a, const Point& b) {
      return a.time != b.time ? a.time < b.time : (!a.start && b.start);
    });
    std::map<std::uint64_t, std::uint32_t> live;  // offset -> slot
    for (const Point& p : points) {
      const SmartPoolSlot& s = plan.slots[p.slot];
      if (!p.start) {
        live.erase(s.offset);
        continue;
      }
      auto next = live.lower_bound(s.offset);
      const bool hits_next = next != live.end() && next->first < s.offset + s.size.value;
      const bool hits_prev =
          next != live.begin() && std::prev(next)->first + plan.slots[std::prev(next)->second].size.value > s.offset;
      if (hits_next || hits_prev) {
        const std::uint32_t other = hits_next ? next->second : std::prev(next)->second;
        throw InvariantError(
            fmt::format("smartpool: slots {} and {} are alive together and overlap in the pool", p.slot, other));
      }
      live.emplace(s.offset, p.slot);
    }
  }
}

}  // namespace

void place_smartpool_slots(SmartPoolPlan& plan, const SmartPoolOptions& options) {
  // Cross-iteration blocks first, from 0; the pool is then doubled (a primary and a backup copy
  // of every cross block) and normal blocks go above, from local_offset = 2 x cross height.
  const std::uint64_t cross = place_class(plan, true, options);
  const std::uint64_t normal = place_class(plan, false, options);
  std::uint64_t pool = 0;
  if (cross >= kUnrepresentable || normal >= kUnrepresentable || __builtin_mul_overflow(cross, 2, &pool) ||
      __builtin_add_overflow(pool, normal, &pool)) {
    // Live blocks of 2^63 bytes or more (e.g. 1,024 of 2^53): no 64-bit pool holds them, so
    // none is created and every request goes to the device, which runs out like any model.
    plan.oversized = true;
    plan.cross_size = Bytes{std::min(cross, kUnrepresentable)};
    plan.pool_size = Bytes{std::numeric_limits<std::uint64_t>::max()};
    return;
  }
  for (SmartPoolSlot& s : plan.slots)
    if (!s.cross_iteration) s.offset += 2 * cross;
  plan.cross_size = Bytes{cross};
  plan.pool_size = Bytes{pool};
  validate(plan);
}

SmartPoolPlan plan_smartpool(const Trace& trace, const SmartPoolOptions& options) {
  const std::uint32_t iterations = iteration_count(trace);
  std::uint32_t chosen = iterations >= 2 ? 1 : 0;
  if (options.plan_iteration >= 0) {
    if (options.plan_iteration >= static_cast<std::int64_t>(iterations)) {
      throw ConfigError("smartpool.plan_iteration",
                        fmt::format("{} is not an iteration of {} (it has {}: 0 to {})", options.plan_iteration,
                                    trace.path, iterations, iterations - 1));
    }
    chosen = static_cast<std::uint32_t>(options.plan_iteration);
  } else if (options.plan_iteration != -1) {
    throw ConfigError(
        "smartpool.plan_iteration",
        fmt::format("must be -1 (automatic) or an iteration index >= 0 (got {})", options.plan_iteration));
  }

  SmartPoolPlan plan;
  plan.iteration = chosen;
  const bool has_markers = std::any_of(trace.events.begin(), trace.events.end(),
                                       [](const TraceEvent& e) { return e.kind == EventKind::Iteration; });
  // Without markers the whole trace is iteration 0; with them, events before iteration 0's
  // marker belong to no iteration.
  std::int64_t current = has_markers ? -1 : 0;
  std::uint64_t window_end = trace.events.size();
  std::map<std::uint32_t, std::uint32_t> open;  // tensor -> slot allocated and not yet freed
  for (std::uint64_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    if (e.kind == EventKind::Iteration) {
      current = e.iteration_index();
      if (current == static_cast<std::int64_t>(chosen) + 1) {
        window_end = i;
        break;
      }
      continue;
    }
    const bool inside = current == static_cast<std::int64_t>(chosen);
    if (e.kind == EventKind::Alloc) {
      if (!inside) {
        ++plan.first_alloc;
        continue;
      }
      const std::uint32_t t = index_of(e.tensor());
      open[t] = static_cast<std::uint32_t>(plan.slots.size());
      plan.slots.push_back(SmartPoolSlot{t, trace.tensors[t].size, i, 0, false, 0});
    } else if (e.kind == EventKind::Free && inside) {
      // A free of a tensor allocated before the iteration has no block (SINGA skips a pair
      // that starts with a Free).
      auto it = open.find(index_of(e.tensor()));
      if (it == open.end()) continue;
      plan.slots[it->second].d = i;
      open.erase(it);
    }
  }
  for (const auto& [tensor, slot] : open) {
    plan.slots[slot].cross_iteration = true;
    plan.slots[slot].d = window_end;
  }
  place_smartpool_slots(plan, options);
  return plan;
}

}  // namespace coopsim
