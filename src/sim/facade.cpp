// The public API (include/coopsim/coopsim.hpp) over the library's own entry points: load_trace /
// write_trace, load_config / apply_override / check_config, run_simulation, to_json. Every
// coopsim::Error becomes an api::Error with the same one-line message.
#include "coopsim/coopsim.hpp"

#include <utility>

#include "coopsim/base/error.hpp"
#include "coopsim/base/json_document.hpp"
#include "coopsim/formats/trace_file.hpp"
#include "coopsim/output/report_writers.hpp"
#include "coopsim/sim/simulation.hpp"
#include "coopsim_config.h"

namespace coopsim::api {
namespace {

// Calls f, turning the library's errors into api::Error.
template <class F>
auto guarded(F&& f) {
  try {
    return f();
  } catch (const coopsim::Error& e) {
    throw Error(e.what());
  }
}

}  // namespace

std::string version() { return COOPSIM_VERSION; }

Trace Trace::load(const std::string& path) {
  Trace t;
  t.trace_ = guarded([&] { return std::make_shared<const coopsim::Trace>(load_trace(path)); });
  return t;
}

Trace Trace::parse(const std::string& text, const std::string& name) {
  Trace t;
  t.trace_ = guarded([&] { return std::make_shared<const coopsim::Trace>(parse_trace(text, name)); });
  return t;
}

void Trace::write(const std::string& path) const {
  guarded([&] {
    write_trace(*trace_, path);
    return 0;
  });
}

std::uint64_t Trace::peak_live_bytes() const { return summarize(*trace_).peak_live.value; }
std::uint64_t Trace::events() const { return trace_->events.size(); }

Config Config::parse(const std::string& json_text, const std::vector<std::string>& overrides) {
  return guarded([&] {
    SimConfig cfg;
    cfg.doc = parse_json_document(json_text, "config");
    if (!cfg.doc.is_object()) throw ConfigError("config", "a config must be a JSON object");
    return checked(std::move(cfg), overrides);
  });
}

Config Config::load(const std::string& path, const std::vector<std::string>& overrides) {
  return guarded([&] { return checked(load_config(path), overrides); });
}

std::string Config::json() const { return checked_->config().doc.dump(2); }

Config Config::checked(SimConfig cfg, const std::vector<std::string>& overrides) {
  for (const std::string& o : overrides) apply_override(cfg, o);
  Config c;
  c.checked_ = std::make_shared<const CheckedConfig>(check_config(cfg));
  return c;
}

std::string run(const Trace& trace, const Config& config, const std::string& budget) {
  return guarded([&] {
    CheckedConfig cfg = *config.checked_;
    if (!budget.empty()) {
      const BudgetText b = parse_budget(budget, BudgetHint::Percent);
      if (!b.problem.empty()) throw ConfigError("budget", b.problem);
      cfg.set_budget(b.percent ? percent_of_peak(*b.percent, summarize(*trace.trace_).peak_live, "budget") : *b.bytes);
    }
    return to_json(run_simulation(cfg, *trace.trace_)).dump(2);
  });
}

}  // namespace coopsim::api
