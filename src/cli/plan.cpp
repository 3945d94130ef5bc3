// `coopsim plan`: offline placement of a MiniMalloc CSV problem, and `--check` of a solution.
#include <iomanip>
#include <ostream>
#include <sstream>

#include "coopsim/cli/commands.hpp"
#include "coopsim/base/error.hpp"
#include "coopsim/base/params.hpp"
#include "coopsim/base/output_file.hpp"
#include "coopsim/planner/check.hpp"
#include "coopsim/planner/planner.hpp"
#include "coopsim/planner/problem.hpp"

namespace coopsim {

namespace {

plan::PlanLimits plan_limits(const std::vector<std::string>& settings) {
  nlohmann::json section = nlohmann::json::object();
  for (const std::string& s : settings) {
    const auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0) throw ConfigError("--limit " + s, "expected key=value");
    section[s.substr(0, eq)] = parse_override_value(s.substr(eq + 1));
  }
  return plan::plan_limits_from_json(section);
}

}  // namespace

int command_plan(const PlanArgs& args, std::ostream& out) {
  const plan::PlanLimits limits = plan_limits(args.limits);
  const auto problem = plan::load_problem(args.problem, limits);
  if (args.capacity && *args.capacity <= 0) throw ConfigError("--capacity", "must be positive");
  if (args.check) {
    if (args.solution.empty()) throw ConfigError("--check", "needs FILE.csv and SOLUTION.csv");
    const auto result = plan::check_solution(problem, args.solution, args.capacity, limits);
    for (const auto& v : result.violations) out << v << "\n";
    if (!result.ok()) return 1;
    out << args.solution << ": valid, " << problem.buffers.size() << " buffers, height " << result.height
        << " (max live bytes " << plan::max_live_bytes(problem) << ")\n";
    return 0;
  }
  if (!args.solution.empty()) throw ConfigError("plan", "a second file is only taken with --check");
  if (args.output.empty()) throw ConfigError("--output", "required (solution CSV to write)");
  if (!(args.time_limit_s > 0)) throw ConfigError("--time-limit", "must be positive");
  plan::PlanOptions options;
  options.method = plan::parse_method(args.method);
  options.bf_quirk = !args.no_bf_quirk;
  options.capacity = args.capacity;
  options.time_limit_s = args.time_limit_s;
  options.max_conflicts = limits.max_conflicts;
  const NamedPath outputs[] = {{"--output", args.output}};
  const NamedPath inputs[] = {{"the problem", args.problem}};
  check_output_paths(outputs, inputs);
  OutputFile solution(args.output);  // opened before the search, which may take --time-limit
  const auto result = plan::plan(problem, options);
  solution.write(plan::format_solution(problem, result.offsets));
  solution.commit();
  std::ostringstream ratio;
  if (result.lower_bound > 0)
    ratio << std::fixed << std::setprecision(4)
          << static_cast<double>(result.height) / static_cast<double>(result.lower_bound);
  out << args.output << ": " << plan::method_name(options.method) << ", " << problem.buffers.size()
      << " buffers, height " << result.height << ", max live bytes " << result.lower_bound
      << (result.lower_bound > 0 ? ", ratio " + ratio.str() : std::string())
      << (result.proven_optimal ? " (optimal)" : "");
  if (options.method == plan::Method::Planner) {
    out << ", " << result.iterations << " iterations";
    if (result.without_lists)
      out << ", construction only (" << result.conflicts << " overlapping pairs > limits.max_conflicts "
          << limits.max_conflicts << ")";
    if (result.time_cut) out << ", stopped by the time limit (result may vary between machines)";
  }
  out << "\n";
  return 0;
}

}  // namespace coopsim
