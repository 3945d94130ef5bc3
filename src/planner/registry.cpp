// The planner's methods by name (`coopsim plan --method`, include/coopsim/planner/planner.hpp),
// one line each; plan() runs them (planner.cpp). Order: `coopsim list`.
#include "coopsim/planner/planner.hpp"

namespace coopsim::plan {

const NamedList<MethodEntry>& methods() {
  static const NamedList<MethodEntry> list = [] {
    NamedList<MethodEntry> l;
    l.add({"planner", "coopsim's planner: greedy constructions, local search and an exact search within --time-limit", Method::Planner});
    l.add({"smartpool-bf", "SINGA SmartPool: size descending, best fit (with SINGA's gap-below quirk)",
           Method::SmartPoolBF});
    l.add({"smartpool-ff", "SINGA SmartPool: size descending, first fit", Method::SmartPoolFF});
    l.add({"greedy-by-size", "size descending (ties in input order), best fit", Method::GreedyBySize});
    return l;
  }();
  return list;
}

}  // namespace coopsim::plan
