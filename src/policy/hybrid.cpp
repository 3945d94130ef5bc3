// The hybrid policies' shared driver (src/policy/hybrid.hpp): per-iteration
// planning with re-simulation on serial lanes, parameters, and the runtime executor.
#include "hybrid.hpp"

#include "coopsim/base/error.hpp"
#include "hybrid_decisions.hpp"

namespace coopsim {

using hybrid_detail::Gap;
using hybrid_detail::HybridPlanner;

namespace {
constexpr int kConfirmRounds = 4;  // greedy + re-simulation rounds per iteration
}

HybridPolicy::HybridPolicy(HybridOptions o)
    : opts_(std::move(o)), executor_(std::make_unique<hybrid_detail::HybridExecutor>()) {}
HybridPolicy::~HybridPolicy() = default;

std::vector<ParamDoc> HybridPolicy::common_param_docs() {
  std::vector<ParamDoc> d{
      ParamDoc{
          "smallest_block", ParamType::Bytes, "1MiB", "smallest tensor considered for swapping or recomputing", {}},
      ParamDoc{"limit_ratio", ParamType::Float, "1.0", "modelled peak target as a fraction of the budget", {}},
      ParamDoc{"fallback",
               ParamType::Bool,
               "true",
               "on a failed allocation evict the smallest-MSPS value, else swap out the tensor used "
               "furthest in the future",
               {}},
  };
  std::vector<std::string> links{"engine"};
  for (const std::string& n : swap_detail::link_preset_names()) links.push_back(n);
  d.push_back(
      ParamDoc{"link", ParamType::String, "engine", "link the plan is timed with: the engine's, or a preset", links});
  for (auto& o : remat_option_docs(InPlaceMode::CopyOnWrite)) d.push_back(std::move(o));
  return d;
}

HybridOptions HybridPolicy::parse_common(const Params& p) {
  HybridOptions o;
  o.smallest_block = p.get_bytes("smallest_block");
  o.limit_ratio = p.get_float("limit_ratio");
  if (!(o.limit_ratio > 0.0 && o.limit_ratio <= 1.0)) {
    throw ConfigError(p.component() + ".limit_ratio", "must be in (0, 1]");
  }
  o.fallback = p.get_bool("fallback");
  o.link = p.get_string("link");
  o.remat = parse_remat_options(p);
  return o;
}

void HybridPolicy::prepare(const MemoryView& view) {
  const Trace& trace = view.trace();
  const LinkModel link = opts_.link == "engine" ? view.link() : swap_detail::planning_link(opts_.link);
  planner_ = std::make_unique<HybridPlanner>(trace, link, opts_.smallest_block);
  const double limit = opts_.limit_ratio * static_cast<double>(view.budget().value);
  std::vector<Gap> plan;
  for (const auto& [b, e] : swap_detail::iteration_ranges(trace)) {
    if (b >= e) continue;
    std::vector<Gap> chosen;
    std::vector<std::uint64_t> load = planner_->simulate(b, e, chosen, false);
    for (int round = 0; round < kConfirmRounds; ++round) {
      if (static_cast<double>(hybrid_detail::peak_of(load).first) <= limit) break;
      const std::size_t before = chosen.size();
      choose(*planner_, b, e, limit, load, chosen);
      // Confirm on serial copy lanes (this also fixes each swap's copy-in moment and its stall).
      load = planner_->simulate(b, e, chosen, true);
      // A swap whose copies do not hide after all is recomputed when that costs less (PoocH's
      // swap -> recompute phase; Capuchin's swap-or-recompute comparison).
      bool changed = false;
      hybrid_detail::ChosenRecomputes recomputes(chosen);
      for (Gap& g : chosen) {
        if (g.choice != hybrid_detail::Choice::Swap || !g.recomputable || g.cost == SimTime{0}) continue;
        const SimTime r = planner_->recompute_cost(g, recomputes);
        if (r < g.cost) {
          g.choice = hybrid_detail::Choice::Recompute;
          g.cost = r;
          recomputes.add(g);
          changed = true;
        }
      }
      if (changed) load = planner_->simulate(b, e, chosen, true);
      if (chosen.size() == before && !changed) break;  // nothing more to take
    }
    plan.insert(plan.end(), chosen.begin(), chosen.end());
  }
  executor_->set(plan);
}

std::vector<Action> HybridPolicy::after_event(const MemoryView& view) { return executor_->due(view); }

std::vector<Action> HybridPolicy::on_alloc_failure(const AllocRequest&, const MemoryView& view) {
  if (!opts_.fallback || !planner_) return {};
  return executor_->make_room(planner_->uses(), view);
}

std::vector<HybridPlanEntry> HybridPolicy::plan() const {
  std::vector<HybridPlanEntry> out;
  for (const Gap& g : executor_->plan()) {
    out.push_back({g.tensor, g.last_use, g.next_use, g.choice == hybrid_detail::Choice::Recompute, g.cost});
  }
  return out;
}

std::unique_ptr<Policy> PoochPolicy::create(const Params& p) { return std::make_unique<PoochPolicy>(parse_common(p)); }
std::unique_ptr<Policy> CapuchinPolicy::create(const Params& p) {
  return std::make_unique<CapuchinPolicy>(parse_common(p));
}

}  // namespace coopsim
