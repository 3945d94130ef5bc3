// `coopsim advise TRACE --capacity 80GiB [--reserve 512MiB]`: the command around
// coopsim::advise::evaluate().
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <ostream>

#include "coopsim/base/process_heap.hpp"
#include "coopsim/base/error.hpp"
#include "coopsim/cli/commands.hpp"
#include "coopsim/formats/trace_file.hpp"
#include "coopsim/sim/simulation.hpp"
#include "coopsim/sweep/advise.hpp"

namespace coopsim {
namespace {

// --reserve: a size ("512MiB", "1GiB", "0"). A plain number from 1 to 1023 was meant in MiB, not
// bytes (as for --budget); a percentage has nothing to be a share of. Bad values are usage errors.
Bytes parse_reserve(const std::string& text) {
  const std::optional<Bytes> b = parse_bytes(text);
  if (!b) throw UsageError("--reserve", quote_excerpt(text) + " is not a size (e.g. 512MiB, 1GiB, 0)");
  const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) != 0 || c == '.';
  });
  if (plain && b->value > 0 && b->value < 1024) {
    throw UsageError("--reserve", fmt::format("{} has no unit; did you mean {}MiB? (plain numbers below 1024 are not "
                                              "taken as bytes; write {}B for {} bytes)",
                                              quote_excerpt(text), text, text, text));
  }
  return *b;
}

}  // namespace

int command_advise(const AdviseArgs& args, std::ostream& out) {
  const BudgetText capacity = parse_budget(args.capacity, BudgetHint::Percent);
  if (!capacity.problem.empty()) throw ConfigError("--capacity", capacity.problem);
  if (capacity.bytes && capacity.bytes->value == 0) throw ConfigError("--capacity", "must be greater than 0");
  const Bytes reserve = args.reserve.empty() ? advise::kDefaultReserve : parse_reserve(args.reserve);
  if (capacity.bytes) advise::check_reserve(*capacity.bytes, reserve);  // before the trace is read
  SimConfig base;
  if (!args.config.empty()) base = load_config(args.config);
  for (const auto& s : args.sets) apply_override(base, s);
  advise::check_base(base);  // before the trace is read
  const DisposedBeforeExit<Trace> loaded(load_trace(args.trace, config_limits(base)));
  const Trace& trace = loaded.get();
  advise::Options options;
  options.capacity =
      capacity.percent ? percent_of_peak(*capacity.percent, summarize(trace).peak_live, "--capacity") : *capacity.bytes;
  options.reserve = reserve;
  options.jobs = args.jobs;
  options.audit = args.audit_every_run;
  const advise::Advice advice = advise::evaluate(base, trace, options);
  if (args.json) {
    out << advise::to_json(advice).dump(2) << "\n";
  } else {
    advise::write_text(out, advice);
  }
  return advice.answer() != nullptr ? 0 : 3;
}

}  // namespace coopsim
