// libFuzzer harness: the recompute engine under the hybrid swap/recompute policies (and any
// other policy named) on generated training steps. The input is lines of key=value:
//   generate.KEY=VALUE     a generator option (`coopsim list`, coopsim/generate/generator.hpp);
//   policies=P,P...        policies to run (default pooch,capuchin);
//   allocators=A,A...      allocators (default: every registered one);
//   budgets=N,N...         budgets in percent of the trace's no-eviction peak (default 30,50,100);
//   anything else          a config override, as `coopsim run --set` takes it (pooch.inplace=...).
// Every run has the allocator invariants checked after each event, the engine's residency checks
// and the independent auditor on (engine.paranoid, engine.residency_checks). Oracle: bad options
// end in one-line errors; a run never throws but for a limit it names (limits.*), never breaks
// an invariant, stays within its budget, and ends completed (every compute executed) or at an
// OOM or thrash point. Inputs that would make slow runs (more than kMaxEvents events, more than
// kMaxRuns runs, no thrash limit) are skipped, so that fuzzing explores shapes, not sizes.
#include <charconv>
#include <sstream>
#include <string>
#include <vector>

#include "coopsim/generate/generator.hpp"
#include "coopsim/sim/simulation.hpp"
#include "fuzz_common.hpp"

namespace {

using namespace coopsim;

constexpr std::uint64_t kMaxEvents = 4000;
constexpr std::size_t kMaxRuns = 40;

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

// Numbers and booleans as JSON, anything else as a string (as apply_override reads values).
nlohmann::json value_of(const std::string& text) {
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() || j.is_structured() ? nlohmann::json(text) : j;
}

// A recompute policy's thrash_limit of 0 (never stop) lets a run recompute for minutes.
bool unbounded(const nlohmann::json& doc) {
  if (!doc.contains("params") || !doc["params"].is_object()) return false;
  for (const auto& [name, params] : doc["params"].items()) {
    if (!params.is_object() || !params.contains("thrash_limit")) continue;
    const auto& t = params["thrash_limit"];
    if (!t.is_number() || t.get<double>() < 1.0 || t.get<double>() > 10.0) return true;
  }
  return false;
}

void run_one(const SimConfig& base, const Trace& trace, const TraceSummary& summary, const std::string& allocator,
             const std::string& policy, double percent) {
  SimConfig cfg = base;
  cfg.doc["allocator"] = allocator;
  cfg.doc["policy"] = policy;
  const Bytes budget = percent_of_peak(percent, summary.peak_live, "budgets");
  cfg.doc["budget"] = std::to_string(budget.value);
  cfg.doc["engine"]["paranoid"] = true;
  cfg.doc["engine"]["residency_checks"] = true;
  Report r;
  const std::string what = policy + " on " + allocator + " at " + std::to_string(percent) + "%";
  try {
    r = run_simulation(cfg, trace);
  } catch (const InvariantError& e) {
    fuzz::die("broken invariant, " + what, e.what());
  } catch (const ConfigError& e) {
    fuzz::check_message(e);  // a bad override, found when the config is checked
    return;
  } catch (const Error& e) {
    fuzz::check_message(e);  // a limit the run reached (limits.max_recompute_depth)
    fuzz::require(std::string_view(e.what()).find("limits.") != std::string_view::npos, "run failed, " + what,
                  e.what());
    return;
  } catch (const std::exception& e) {
    fuzz::die("internal error, " + what, e.what());
  }
  fuzz::require(r.memory.peak_reserved <= budget, "reserved more than the budget", what);
  if (r.status == RunStatus::Completed) {
    fuzz::require(r.counters.computes == summary.computes, "completed without every compute", what);
  } else {
    fuzz::require(r.oom.has_value() || r.thrash.has_value(), "stopped without an OOM or thrash point", what);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  nlohmann::json gen = nlohmann::json::object();
  std::vector<std::string> policies{"pooch", "capuchin"}, allocators;
  std::vector<std::string> budgets{"30", "50", "100"};
  SimConfig base;
  std::istringstream lines(text);
  try {
    for (std::string line; std::getline(lines, line);) {
      if (line.empty() || line[0] == '#') continue;
      const auto eq = line.find('=');
      if (eq == std::string::npos) return 0;
      const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
      if (key.rfind("generate.", 0) == 0) {
        gen[key.substr(9)] = value_of(value);
      } else if (key == "policies") {
        policies = split(value);
      } else if (key == "allocators") {
        allocators = split(value);
      } else if (key == "budgets") {
        budgets = split(value);
      } else {
        apply_override(base, line);
      }
    }
    const GeneratorOptions o = generator_options_from_json(gen);
    if (o.layers > 32 || o.iterations > 4 || o.micro_batches > 4 || unbounded(base.doc)) return 0;
    if (allocators.empty()) {
      for (const auto& a : builtin_components().allocators.entries()) allocators.push_back(a.name);
    }
    if (policies.size() * allocators.size() * budgets.size() > kMaxRuns) return 0;
    std::vector<double> percents;
    for (const std::string& b : budgets) {
      double p = 0;
      const auto [end, ec] = std::from_chars(b.data(), b.data() + b.size(), p);
      if (ec != std::errc() || end != b.data() + b.size() || !(p >= 1.0 && p <= 200.0)) return 0;
      percents.push_back(p);
    }
    const Trace trace = generate_training_trace(o);
    const TraceSummary summary = summarize(trace);
    if (summary.events > kMaxEvents) return 0;
    for (const std::string& policy : policies) {
      for (const std::string& allocator : allocators) {
        for (const double p : percents) run_one(base, trace, summary, allocator, policy, p);
      }
    }
  } catch (const Error& e) {  // bad generator options or config overrides
    fuzz::check_message(e);
  }
  return 0;
}
