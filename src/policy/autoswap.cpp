// autoswap policy (see src/policy/autoswap.hpp; docs/models/swap-policies.md).
#include "autoswap.hpp"
#include "coopsim/policy/registry.hpp"

#include <algorithm>
#include <numeric>

#include "coopsim/base/error.hpp"
#include "peak_tree.hpp"
#include "swap_schedule.hpp"

namespace coopsim {

using swap_detail::PlannedSwap;

namespace {

struct Candidate {
  std::uint32_t tensor = 0;
  std::uint32_t ready = 0, next_use = 0;  // the gap [ready, next_use) in event indices
  double doa_origin = 0, doa = 0, aoa = 0, wdoa = 0;
};

// True when event `at` writes storage `s` (SINGA's "Mutable"), false for a read.
bool writes(const Trace& trace, std::uint32_t at, std::uint32_t s) {
  const TraceEvent& e = trace.events[at];
  if (e.kind == EventKind::Access) return e.write;
  const OpInfo& op = trace.op(e.compute_op());
  for (const auto* list : {&op.outputs, &op.mutated}) {
    for (TensorId x : *list) {
      if (trace.storage_of(index_of(x)) == s) return true;
    }
  }
  return false;
}

// Rank order of `c` under `key` (descending); returns position per candidate.
std::vector<std::size_t> rank_desc(const std::vector<Candidate>& c, double Candidate::*key) {
  std::vector<std::size_t> order(c.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return c[a].*key > c[b].*key; });
  std::vector<std::size_t> pos(c.size());
  for (std::size_t i = 0; i < order.size(); ++i) pos[order[i]] = i;
  return pos;
}

// Candidates in priority order (SelectBlock's sort); base order (ready, tensor) breaks ties.
void prioritise(std::vector<Candidate>& c, SwapScore score) {
  std::vector<std::size_t> order(c.size());
  std::iota(order.begin(), order.end(), 0);
  std::vector<double> key(c.size());
  if (score == SwapScore::MajorityVote) {
    const auto a = rank_desc(c, &Candidate::doa_origin), b = rank_desc(c, &Candidate::aoa),
               w = rank_desc(c, &Candidate::wdoa);
    for (std::size_t i = 0; i < c.size(); ++i) key[i] = -static_cast<double>(a[i] + b[i] + w[i]);
  } else {
    double Candidate::*field = score == SwapScore::DoaOrigin ? &Candidate::doa_origin
                               : score == SwapScore::Doa     ? &Candidate::doa
                               : score == SwapScore::Aoa     ? &Candidate::aoa
                                                             : &Candidate::wdoa;
    for (std::size_t i = 0; i < c.size(); ++i) key[i] = c[i].*field;
  }
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return key[x] > key[y]; });
  std::vector<Candidate> sorted;
  sorted.reserve(c.size());
  for (std::size_t i : order) sorted.push_back(c[i]);
  c = std::move(sorted);
}

struct IterationPlanner {
  const Trace& trace;
  const AutoSwapOptions& opts;
  const swap_detail::UseIndex& uses;
  const swap_detail::EventTimes& times;
  const LinkModel& link;
  std::vector<std::uint64_t>& load;  // lowered as candidates are selected
  double limit;

  [[nodiscard]] std::uint64_t peak(std::size_t b, std::size_t e, std::size_t* at = nullptr) const {
    std::size_t best = b;
    for (std::size_t i = b; i < e; ++i) {
      if (load[i] > load[best]) best = i;
    }
    if (at != nullptr) *at = best;
    return load[best];
  }

  std::vector<Candidate> candidates(std::size_t b, std::size_t e, std::size_t max_idx) const {
    std::vector<Candidate> out;
    for (std::uint32_t s = 0; s < trace.tensors.size(); ++s) {
      const Bytes size = trace.tensors[s].size;
      if (trace.tensors[s].is_view() || size < opts.smallest_block) continue;
      const auto& u = uses.uses(s);
      // consecutive uses prev < max_idx < cur, both inside the iteration
      auto it = std::upper_bound(u.begin(), u.end(), max_idx);
      if (it == u.end() || it == u.begin() || *it >= e || *(it - 1) < b) continue;
      const std::uint32_t prev = *(it - 1), cur = *it;
      if (prev == max_idx) continue;  // used at the peak itself: not idle across it
      Candidate c;
      c.tensor = s;
      c.ready = prev + (writes(trace, prev, s) ? opts.write_buffer : opts.read_buffer);
      if (c.ready >= cur) continue;  // no room left in the gap for a swap
      c.next_use = cur;
      const double gap = static_cast<double>((times.start[cur] - times.end[prev]).count());
      const double sz = static_cast<double>(size.value);
      c.doa_origin = gap;
      c.doa = gap - static_cast<double>(link.transfer_time(Direction::DeviceToHost, size).count()) -
              static_cast<double>(link.transfer_time(Direction::HostToDevice, size).count());
      c.aoa = c.doa >= 0 ? c.doa * sz : c.doa / sz;
      for (std::uint32_t i = c.ready; i < cur; ++i) c.wdoa += static_cast<double>(load[i]) - limit;
      out.push_back(c);
    }
    return out;
  }

  // SelectBlock + Scheduling for iteration [b, e); appends to `plan`.
  void plan_iteration(std::size_t b, std::size_t e, std::vector<PlannedSwap>& plan) {
    std::size_t max_idx = b;
    if (static_cast<double>(peak(b, e, &max_idx)) < limit) return;
    auto cands = candidates(b, e, max_idx);
    prioritise(cands, opts.score);
    std::vector<Candidate> chosen;
    swap_detail::PeakTree tree(load, b, e);  // the passes "lower the gap, find the peak", in O(log n)
    for (const Candidate& c : cands) {
      tree.lower(c.ready, c.next_use, trace.tensors[c.tensor].size.value);
      chosen.push_back(c);
      if (static_cast<double>(tree.peak().first) < limit) break;
    }
    tree.store(load);
    // Swap-ins in descending next use on one serial lane, each finishing by its use or by the
    // start of the one after it, no earlier than just after the peak.
    std::sort(chosen.begin(), chosen.end(), [](const Candidate& x, const Candidate& y) {
      return x.next_use != y.next_use ? x.next_use > y.next_use : x.tensor < y.tensor;
    });
    SimTime lane_free = SimTime::max();
    for (const Candidate& c : chosen) {
      const SimTime in = link.transfer_time(Direction::HostToDevice, trace.tensors[c.tensor].size);
      const SimTime finish = std::min(times.start[c.next_use], lane_free);
      const SimTime start = finish - in;
      std::size_t at = c.next_use - 1;  // issued after event `at`, i.e. at times.end[at]
      while (at > max_idx && at > c.ready && times.end[at] > start) --at;
      lane_free = times.end[at];
      plan.push_back({c.tensor, c.ready, static_cast<std::uint32_t>(at), c.next_use});
    }
  }
};

std::optional<SwapScore> parse_score(const std::string& s) {
  if (s == "doa-origin") return SwapScore::DoaOrigin;
  if (s == "doa") return SwapScore::Doa;
  if (s == "aoa") return SwapScore::Aoa;
  if (s == "wdoa") return SwapScore::Wdoa;
  if (s == "majority") return SwapScore::MajorityVote;
  return std::nullopt;
}

}  // namespace

std::vector<ParamDoc> AutoSwapPolicy::param_docs() {
  return {
      ParamDoc{"score",
               ParamType::String,
               "majority",
               "priority score (docs/models/swap-policies.md): doa-origin = idle time, doa = idle time - "
               "swap-out - swap-in time, aoa = doa x size, wdoa = sum of (load - limit) over the "
               "gap, majority = sum of the doa-origin, aoa and wdoa ranks (AutoSwap's Plan())",
               {"doa-origin", "doa", "aoa", "wdoa", "majority"}},
      ParamDoc{"smallest_block", ParamType::Bytes, "1MiB", "smallest tensor considered for swapping", {}},
      ParamDoc{"read_buffer", ParamType::Int, "4", "events after a read before a swap-out may start", {}},
      ParamDoc{"write_buffer", ParamType::Int, "6", "events after a write before a swap-out may start", {}},
      ParamDoc{"limit_ratio", ParamType::Float, "1.0", "memory-load target as a fraction of the budget", {}},
      ParamDoc{"link", ParamType::String, "pcie3-x16",
               "link preset the plan is timed with (the engine's link is not visible to policies)",
               swap_detail::link_preset_names()},
      ParamDoc{"fallback",
               ParamType::Bool,
               "true",
               "on a failed allocation swap out the tensor used furthest in the future (Belady)",
               {}},
  };
}

std::unique_ptr<Policy> AutoSwapPolicy::create(const Params& p) {
  AutoSwapOptions o;
  const auto score = parse_score(p.get_string("score"));
  if (!score) throw ConfigError(p.component() + ".score", "unknown score");
  o.score = *score;
  o.smallest_block = p.get_bytes("smallest_block");
  const auto buffer = [&](std::string_view key) {
    const std::int64_t v = p.get_int(key);
    if (v < 1 || v > 1000000) throw ConfigError(p.component() + "." + std::string(key), "must be in 1..1000000");
    return static_cast<std::uint32_t>(v);
  };
  o.read_buffer = buffer("read_buffer");
  o.write_buffer = buffer("write_buffer");
  o.limit_ratio = p.get_float("limit_ratio");
  if (!(o.limit_ratio > 0.0 && o.limit_ratio <= 1.0)) {
    throw ConfigError(p.component() + ".limit_ratio", "must be in (0, 1]");
  }
  o.link = p.get_string("link");
  o.fallback = p.get_bool("fallback");
  return std::make_unique<AutoSwapPolicy>(o);
}

AutoSwapPolicy::AutoSwapPolicy(AutoSwapOptions o) : ScheduledSwapPolicy(o.fallback), opts_(std::move(o)) {}
AutoSwapPolicy::~AutoSwapPolicy() = default;

void AutoSwapPolicy::prepare(const MemoryView& view) {
  const Trace& trace = view.trace();
  const swap_detail::UseIndex& uses = index_uses(trace);
  const auto times = swap_detail::model_event_times(trace);
  const LinkModel link = swap_detail::planning_link(opts_.link);
  auto load = swap_detail::load_curve(trace);
  IterationPlanner planner{
      trace, opts_, uses, times, link, load, opts_.limit_ratio * static_cast<double>(view.budget().value)};
  std::vector<PlannedSwap> plan;
  for (const auto& [b, e] : swap_detail::iteration_ranges(trace)) {
    if (b < e) planner.plan_iteration(b, e, plan);
  }
  set_plan(std::move(plan));
}

// Its line in the registry (src/policy/registry.cpp).
PolicyRegistry::Entry autoswap_policy_entry() { return PolicyRegistry::entry_for<AutoSwapPolicy>(); }

}  // namespace coopsim
