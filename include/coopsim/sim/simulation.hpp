// Configuration and the single entry point used by the CLI, tests and scripts.
//
// Config file (JSON):
//   { "allocator": "pytorch", "policy": "keep", "budget": "16GiB",
//     "link":   { "preset": "pcie4-x16" },
//     "engine": { "paranoid": false },
//     "params": { "pytorch": { "max_split_size": "64MiB" } } }
// Every key is checked: unknown top-level keys, unknown components under "params" and unknown
// parameters are errors that list the valid choices.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "coopsim/base/units.hpp"
#include "coopsim/sim/builtin.hpp"
#include "coopsim/model/report.hpp"
#include "coopsim/model/runlog.hpp"
#include "coopsim/model/trace.hpp"

namespace coopsim {

struct SimConfig {
  std::string source;                             // file the config came from (prefixes error keys); empty = none
  nlohmann::json doc = nlohmann::json::object();  // the raw document, overrides applied
};

// Reads and checks the top-level shape. Errors: "file:line: problem" for JSON syntax,
// "file: key: problem" otherwise.
SimConfig load_config(const std::string& path);
// Applies "key=value" (dotted key). A first component naming an allocator or policy is a
// parameter: "pytorch.max_split_size=64MiB" sets params.pytorch.max_split_size. The value is
// parsed as JSON when it can be (numbers, booleans), else taken as a string.
void apply_override(SimConfig& cfg, const std::string& assignment, const Components& c = builtin_components());

// A config that check_config accepted, with the components it was checked against. Only
// check_config makes one and run_simulation runs one, so a config is checked once per run.
class CheckedConfig {
 public:
  [[nodiscard]] const SimConfig& config() const { return cfg_; }
  [[nodiscard]] const Components& components() const { return *components_; }
  // A checked config stays valid with any nonzero byte budget (minbudget probes, percentages
  // of a trace's peak resolved once the trace is loaded).
  void set_budget(Bytes budget);

 private:
  friend CheckedConfig check_config(const SimConfig& cfg, const Components& c);
  CheckedConfig(SimConfig cfg, const Components& c) : cfg_(std::move(cfg)), components_(&c) {}
  SimConfig cfg_;
  const Components* components_;
};

// Checks everything (names, parameter keys and types) without running: ConfigError on problems.
CheckedConfig check_config(const SimConfig& cfg, const Components& c = builtin_components());

// The limits of a config: its "limits" section, keys prefixed with the config's file name.
Limits config_limits(const SimConfig& cfg);

std::vector<ParamDoc> engine_param_docs();
std::vector<ParamDoc> top_level_docs();  // allocator, policy, budget (for `coopsim list`)
// The top-level choices of a config (allocator, policy, budget), checked, with the defaults of
// top_level_docs() for the keys it leaves out: the one place those defaults are written.
Params top_level_params(const nlohmann::json& doc);

// How a run is carried out, apart from what it simulates: nothing here changes the report.
struct RunOptions {
  // When set, the engine records the run's physical steps there (coopsim/model/runlog.hpp).
  RunLog* log = nullptr;
  // Run the independent auditor (coopsim/audit/audit.hpp) over the run's event log and
  // throw InvariantError on a violation. The CLI sets it from COOPSIM_AUDIT=1, which every
  // test sets; engine.residency_checks (or --paranoid) implies it.
  bool audit = false;
};

// Runs one simulation of a checked config.
Report run_simulation(const CheckedConfig& cfg, const Trace& trace, const RunOptions& options = {});
// Checks `cfg` (ConfigError on problems), then runs it.
Report run_simulation(const SimConfig& cfg, const Trace& trace, const Components& c = builtin_components(),
                      const RunOptions& options = {});

}  // namespace coopsim
