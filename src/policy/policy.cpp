#include "coopsim/policy/policy.hpp"

#include "coopsim/base/error.hpp"

namespace coopsim {

bool simrd_runtime_supports(EvictionScore h) {
  switch (h) {
    case EvictionScore::Dtr:
    case EvictionScore::DtrEq:
    case EvictionScore::DtrLocal:
    case EvictionScore::Msps:
    case EvictionScore::Lru:
    case EvictionScore::Largest: return true;
    default: return false;
  }
}

std::string_view to_string(Residency r) {
  switch (r) {
    case Residency::NotAllocated: return "not_allocated";
    case Residency::Resident: return "resident";
    case Residency::SwappingOut: return "swapping_out";
    case Residency::SwappedOut: return "swapped_out";
    case Residency::SwappingIn: return "swapping_in";
    case Residency::Evicted: return "evicted";
  }
  return "?";
}

std::string_view to_string(DeallocMode m) {
  switch (m) {
    case DeallocMode::Eager: return "eager";
    case DeallocMode::Banish: return "banish";
    case DeallocMode::NoDealloc: return "no-dealloc";
  }
  return "?";
}

std::string_view to_string(InPlaceMode m) { return m == InPlaceMode::Recomputable ? "recomputable" : "copy-on-write"; }

std::vector<ParamDoc> remat_option_docs(InPlaceMode default_inplace) {
  return {
      ParamDoc{"dealloc",
               ParamType::String,
               "eager",
               "what the trace's free does to a recomputable tensor: eager = evict (memory freed, "
               "still recomputable; DTR's default), banish = free for good and lock its resident "
               "children, no-dealloc = keep it until the heuristic evicts it",
               {"eager", "banish", "no-dealloc"}},
      ParamDoc{"inplace",
               ParamType::String,
               std::string(to_string(default_inplace)),
               "in-place updates: recomputable = keep the address, the old value stays "
               "recomputable (Coop's fbip); copy-on-write = a new block per update (DTR/DTE "
               "baselines)",
               {"recomputable", "copy-on-write"}},
      ParamDoc{"thrash_limit",
               ParamType::Float,
               "2.0",
               "stop (status thrash) when recomputation reaches this compute overhead over the "
               "trace's op time (simrd's 2x cut); 0 = never",
               {}},
  };
}

RematOptions parse_remat_options(const Params& p) {
  RematOptions o;
  const std::string d = p.get_string("dealloc");
  o.dealloc = d == "banish" ? DeallocMode::Banish : d == "no-dealloc" ? DeallocMode::NoDealloc : DeallocMode::Eager;
  o.inplace = p.get_string("inplace") == "recomputable" ? InPlaceMode::Recomputable : InPlaceMode::CopyOnWrite;
  o.thrash_limit = p.get_float("thrash_limit");
  if (!(o.thrash_limit == 0.0 || o.thrash_limit > 1.0)) {
    throw ConfigError(p.component() + ".thrash_limit", "must be 0 (no limit) or greater than 1");
  }
  return o;
}

}  // namespace coopsim
