// dtr policy (see include/coopsim/policy/dtr.hpp).
#include "coopsim/policy/dtr.hpp"
#include "coopsim/policy/registry.hpp"

#include "coopsim/base/error.hpp"

namespace coopsim {

std::vector<ParamDoc> DtrPolicy::param_docs() {
  std::vector<ParamDoc> d{
      ParamDoc{"heuristic",
               ParamType::String,
               "dtr-eq",
               "eviction score (docs/models/dtr-dte.md): dtr = h_DTR with the full evicted "
               "neighbourhood e*, dtr-eq = its union-find approximation, dtr-local = no "
               "neighbourhood, lru, largest, msps (Capuchin), random (seeded)",
               {"dtr", "dtr-eq", "dtr-local", "lru", "largest", "msps", "random"}},
      ParamDoc{"seed", ParamType::Int, "0", "seed of the random heuristic (>= 0)", {}},
      ParamDoc{"compat",
               ParamType::String,
               "coopsim",
               "runtime rules: coopsim = this engine (allocator, values, pins); simrd = DTR's "
               "reference simulator RuntimeV2EagerOptimized, for traces from `import dtr --compat "
               "simrd` (docs/import-dtr.md; heuristics dtr, dtr-eq, dtr-local, msps, lru, largest; "
               "dealloc and inplace do not apply, thrash_limit is simrd's overhead cut)",
               {"coopsim", "simrd"}},
  };
  for (auto& o : remat_option_docs(InPlaceMode::CopyOnWrite)) d.push_back(std::move(o));
  return d;
}

std::unique_ptr<Policy> DtrPolicy::create(const Params& p) {
  const auto score = parse_eviction_score(p.get_string("heuristic"));
  if (!score) throw ConfigError(p.component() + ".heuristic", "unknown heuristic");
  const bool simrd = p.get_string("compat") == "simrd";
  if (simrd && !simrd_runtime_supports(*score)) {
    throw ConfigError(p.component() + ".heuristic",
                      "compat=simrd supports dtr, dtr-eq, dtr-local, msps, lru and largest (simrd's random "
                      "heuristic draws from Python's generator and cannot be reproduced)");
  }
  // A negative seed would wrap to a huge unsigned one: refused, as the generator's seed is.
  const std::int64_t seed = p.get_int("seed");
  if (seed < 0) throw ConfigError(p.component() + ".seed", "must be >= 0, got " + std::to_string(seed));
  return std::make_unique<DtrPolicy>(*score, static_cast<std::uint64_t>(seed), parse_remat_options(p), simrd);
}

std::vector<Action> DtrPolicy::on_alloc_failure(const AllocRequest&, const MemoryView& view) {
  if (auto v = find_victim(view, score_, draws_)) return {Action::evict(*v)};
  return {};
}

// Its line in the registry (src/policy/registry.cpp).
PolicyRegistry::Entry dtr_policy_entry() { return PolicyRegistry::entry_for<DtrPolicy>(); }

}  // namespace coopsim
