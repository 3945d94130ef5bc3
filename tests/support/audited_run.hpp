// run_simulation with the independent auditor on (RunOptions::audit), as the CLI runs every
// simulation under COOPSIM_AUDIT=1: the C++ tests run through here so that every simulation
// a test makes is validated too (docs/architecture.md, "Validation").
#pragma once

#include "coopsim/sim/simulation.hpp"

namespace coopsim::test {

inline Report audited_run(const SimConfig& cfg, const Trace& trace, RunLog* log = nullptr) {
  RunOptions options;
  options.log = log;
  options.audit = true;
  return run_simulation(cfg, trace, builtin_components(), options);
}

}  // namespace coopsim::test
