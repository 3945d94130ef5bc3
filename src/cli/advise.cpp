// `coopsim advise TRACE --capacity 80GiB`: the command around coopsim::advise::evaluate().
#include <ostream>

#include "coopsim/base/error.hpp"
#include "coopsim/cli/commands.hpp"
#include "coopsim/formats/trace_file.hpp"
#include "coopsim/sim/simulation.hpp"
#include "coopsim/sweep/advise.hpp"

namespace coopsim {

int command_advise(const AdviseArgs& args, std::ostream& out) {
  const BudgetText capacity = parse_budget(args.capacity, BudgetHint::Percent);
  if (!capacity.problem.empty()) throw ConfigError("--capacity", capacity.problem);
  if (capacity.bytes && capacity.bytes->value == 0) throw ConfigError("--capacity", "must be greater than 0");
  SimConfig base;
  if (!args.config.empty()) base = load_config(args.config);
  for (const auto& s : args.sets) apply_override(base, s);
  advise::check_base(base);  // before the trace is read
  const Trace trace = load_trace(args.trace, config_limits(base));
  advise::Options options;
  options.capacity =
      capacity.percent ? percent_of_peak(*capacity.percent, summarize(trace).peak_live, "--capacity") : *capacity.bytes;
  options.jobs = args.jobs;
  options.validate = args.validate_every_run;
  const advise::Advice advice = advise::evaluate(base, trace, options);
  if (args.json) {
    out << advise::to_json(advice).dump(2) << "\n";
  } else {
    advise::write_text(out, advice);
  }
  return advice.answer() != nullptr ? 0 : 3;
}

}  // namespace coopsim
