// Sweep config files (docs/sweep.md): parse the JSON document and check every key before
// anything runs. Errors are one line: "file:line: invalid JSON: ..." or "file: key: problem".
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "coopsim/base/error.hpp"
#include "coopsim/base/json_document.hpp"
#include "coopsim/base/limits.hpp"
#include "coopsim/sweep/sweep.hpp"
#include "coopsim/base/text.hpp"

namespace coopsim::sweep {
namespace {

using OJ = nlohmann::ordered_json;

const char* const kTopKeys[] = {"description", "traces",   "allocators", "policies",
                                "budgets",     "variants", "base",       "minbudget"};
const char* const kBaseKeys[] = {"description", "initial_state", "link", "engine", "params", "limits"};
const char* const kVariantKeys[] = {"description", "set", "allocators", "policies"};
constexpr std::size_t kMaxRangeBudgets = 100000;

template <std::size_t N>
std::string join(const char* const (&keys)[N]) {
  std::string s;
  for (const char* k : keys) s += (s.empty() ? "" : ", ") + std::string(k);
  return s;
}

template <std::size_t N>
bool known(const char* const (&keys)[N], const std::string& k) {
  return std::any_of(std::begin(keys), std::end(keys), [&](const char* t) { return k == t; });
}

class Checker {
 public:
  explicit Checker(std::string source) : source_(std::move(source)) {}

  [[nodiscard]] ConfigError err(const std::string& key, const std::string& problem) const {
    return ConfigError(source_ + ": " + key, problem);
  }

  // A ConfigError from check_config / apply_override on an unprefixed config, re-keyed under
  // `section` ("base", "variants.NAME.set"): "file: section.key: problem".
  [[nodiscard]] ConfigError rekey(const ConfigError& e, const std::string& section) const {
    const std::string& problem = e.problem();
    std::string key = e.key();
    if (key.rfind("--set ", 0) == 0) key = key.substr(6);
    return err(key.empty() ? section : section + "." + key, problem);
  }

  // A list of names from `valid` (or "all"), no repeats.
  std::vector<std::string> names(const OJ& v, const std::string& key, const std::string& what,
                                 const std::vector<std::string>& valid, const std::string& valid_text) const {
    if (v.is_string() && v.get<std::string>() == "all") return valid;
    if (!v.is_array() || v.empty()) throw err(key, "expected a non-empty list of " + what + " names or \"all\"");
    std::vector<std::string> out;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::string k = fmt::format("{}[{}]", key, i);
      if (!v[i].is_string()) throw err(k, "expected a name, got " + shown_json(v[i]));
      const auto name = v[i].get<std::string>();
      if (std::find(valid.begin(), valid.end(), name) == valid.end()) {
        const std::string guess = closest_name(name, valid);
        throw err(k, "unknown " + what + " " + quote_excerpt(name) + " (valid: " + valid_text + ")" +
                         (guess.empty() ? "" : "; did you mean '" + guess + "'?"));
      }
      if (std::find(out.begin(), out.end(), name) != out.end()) throw err(k, quote_excerpt(name) + " is listed twice");
      out.push_back(name);
    }
    return out;
  }

  // A budget in bytes: the command line's rules (parse_budget), so a plain 0.5 or 12 is refused
  // with a hint instead of meaning a budget of one or twelve bytes.
  [[nodiscard]] Bytes size(const OJ& v, const std::string& key) const {
    if (!v.is_string() && !v.is_number())
      throw err(key, "expected a size such as 512MiB, 8GiB or plain bytes, got " + shown_json(v));
    const BudgetText b = parse_budget(v.is_string() ? v.get<std::string>() : v.dump(), BudgetHint::Ratio);
    if (!b.problem.empty()) throw err(key, b.problem);
    if (b.bytes->value == 0) throw err(key, "must be greater than 0");
    return *b.bytes;
  }

  [[nodiscard]] double ratio(const OJ& v, const std::string& key) const {
    if (!v.is_number() || !(v.get<double>() > 0.0) || v.get<double>() > 1000.0) {
      throw err(
          key, "expected a ratio of the trace's peak greater than 0 and at most 1000 (e.g. 0.5), got " + shown_json(v));
    }
    return v.get<double>();
  }

  void only_keys(const OJ& obj, const std::string& key, const std::vector<std::string>& valid) const {
    for (const auto& [k, v] : obj.items()) {
      if (std::find(valid.begin(), valid.end(), k) == valid.end()) {
        std::string list;
        for (const auto& s : valid) list += (list.empty() ? "" : ", ") + s;
        throw err(key + "." + excerpt(k), "unknown key (valid: " + list + ")");
      }
    }
  }

  // {"from", "to", "step"} (all required), `get` converting each; inclusive, in steps.
  template <typename T, typename Get>
  std::vector<T> range(const OJ& obj, const std::string& key, Get get) const {
    only_keys(obj, key, {"from", "to", "step"});
    for (const char* k : {"from", "to", "step"}) {
      if (!obj.contains(k))
        throw err(key, std::string("a range needs \"from\", \"to\" and \"step\" (missing \"") + k + "\")");
    }
    const T from = get(obj.at("from"), key + ".from");
    const T to = get(obj.at("to"), key + ".to");
    const T step = get(obj.at("step"), key + ".step");
    if (to < from) throw err(key, "\"to\" is below \"from\"");
    return range_values(from, to, step, key);
  }

 private:
  std::vector<Bytes> range_values(Bytes from, Bytes to, Bytes step, const std::string& key) const {
    const std::uint64_t n = (to.value - from.value) / step.value + 1;
    if (n > kMaxRangeBudgets)
      throw err(key, fmt::format("the range gives {} budgets (at most {})", n, kMaxRangeBudgets));
    std::vector<Bytes> out;
    for (std::uint64_t i = 0; i < n; ++i) out.push_back(Bytes{from.value + i * step.value});
    return out;
  }
  std::vector<double> range_values(double from, double to, double step, const std::string& key) const {
    const double span = (to - from) / step;
    if (span + 1 > static_cast<double>(kMaxRangeBudgets)) {
      throw err(key, fmt::format("the range gives more than {} budgets", kMaxRangeBudgets));
    }
    // Ratios are rounded to 9 decimals, so 0.25 + 5 x 0.05 is the same budget as 0.5 written out.
    const auto n = static_cast<std::size_t>(std::floor(span + 1e-9)) + 1;
    std::vector<double> out;
    for (std::size_t i = 0; i < n; ++i) out.push_back(std::round((from + static_cast<double>(i) * step) * 1e9) / 1e9);
    return out;
  }

  std::string source_;
};

std::vector<BudgetSpec> parse_budgets(const Checker& c, const OJ& v) {
  std::vector<BudgetSpec> out;
  auto get_size = [&](const OJ& x, const std::string& k) { return c.size(x, k); };
  auto get_ratio = [&](const OJ& x, const std::string& k) { return c.ratio(x, k); };
  if (v.is_array() && !v.empty()) {
    for (std::size_t i = 0; i < v.size(); ++i) out.push_back({c.size(v[i], fmt::format("budgets[{}]", i)), {}});
  } else if (v.is_object() && v.contains("ratios")) {
    c.only_keys(v, "budgets", {"ratios"});
    const OJ& r = v.at("ratios");
    if (r.is_array() && !r.empty()) {
      for (std::size_t i = 0; i < r.size(); ++i)
        out.push_back({Bytes{}, c.ratio(r[i], fmt::format("budgets.ratios[{}]", i))});
    } else if (r.is_object()) {
      for (double x : c.range<double>(r, "budgets.ratios", get_ratio)) out.push_back({Bytes{}, x});
    } else {
      throw c.err("budgets.ratios", "expected a non-empty list of ratios or {\"from\", \"to\", \"step\"}");
    }
  } else if (v.is_object()) {
    for (Bytes b : c.range<Bytes>(v, "budgets", get_size)) out.push_back({b, {}});
  } else {
    throw c.err("budgets", "expected a non-empty list of sizes, {\"from\", \"to\", \"step\"} or {\"ratios\": ...}");
  }
  return out;
}

// "key=value" for apply_override, from a JSON scalar.
std::string assignment(const Checker& c, const std::string& key, const OJ& v, const std::string& where) {
  if (v.is_string()) return key + "=" + v.get<std::string>();
  if (v.is_number() || v.is_boolean()) return key + "=" + v.dump();
  throw c.err(where, "expected a string, number or boolean, got " + shown_json(v));
}

Variant parse_variant(const Checker& c, const std::string& name, const OJ& v, const SimConfig& base,
                      const SweepConfig& cfg, const Components& comps) {
  const std::string key = "variants." + excerpt(name);
  const bool good_name = !name.empty() && std::all_of(name.begin(), name.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.' || ch == '+';
  });
  if (!good_name) throw c.err(key, "a variant name may hold only letters, digits and - _ . +");
  if (!v.is_object()) throw c.err(key, "expected an object with \"set\" (and optionally \"allocators\", \"policies\")");
  c.only_keys(v, key, {std::begin(kVariantKeys), std::end(kVariantKeys)});
  Variant out;
  out.name = name;
  out.config = base;
  if (v.contains("set")) {
    const OJ& set = v.at("set");
    if (!set.is_object()) throw c.err(key + ".set", "expected an object of key: value overrides");
    for (const auto& [k, x] : set.items()) {
      const std::string where = key + ".set." + excerpt(k);
      if (k == "budget" || k == "allocator" || k == "policy") {
        throw c.err(where, "the sweep's " + (k == "policy" ? std::string("policies") : k + "s") + " list sets it");
      }
      out.sets.push_back(assignment(c, k, x, where));
      try {
        apply_override(out.config, out.sets.back(), comps);
      } catch (const ConfigError& e) {
        throw c.rekey(e, key + ".set");
      }
    }
  }
  try {
    check_config(out.config, comps);
  } catch (const ConfigError& e) {
    throw c.rekey(e, key + ".set");
  }
  auto subset = [&](const char* field, const std::vector<std::string>& of, const std::string& what) {
    if (!v.contains(field)) return std::vector<std::string>{};
    std::string list;
    for (const auto& s : of) list += (list.empty() ? "" : ", ") + s;
    return c.names(v.at(field), key + "." + field, what + " of this sweep", of, list);
  };
  out.allocators = subset("allocators", cfg.allocators, "allocator");
  out.policies = subset("policies", cfg.policies, "policy");
  return out;
}

}  // namespace

SweepConfig parse_sweep_config(const std::string& text, const std::string& source) {
  const Checker c(source);
  const Components& comps = builtin_components();
  // file:line for invalid JSON and for a key given twice (a variant named twice among them)
  const OJ doc = parse_ordered_json_document(text, source);
  if (!doc.is_object()) throw ConfigError(source, "a sweep config must hold a JSON object");
  for (const auto& [k, v] : doc.items()) {
    if (!known(kTopKeys, k)) throw c.err(excerpt(k), "unknown key (valid: " + join(kTopKeys) + ")");
  }
  if (doc.contains("description") && !doc.at("description").is_string())
    throw c.err("description", "expected a string");

  SweepConfig cfg;
  cfg.source = source;
  cfg.dir = std::filesystem::path(source).parent_path();
  cfg.canonical = doc.dump();

  if (!doc.contains("traces")) throw c.err("traces", "missing (a list of trace files, relative to this file)");
  const OJ& traces = doc.at("traces");
  if (!traces.is_array() || traces.empty()) throw c.err("traces", "expected a non-empty list of trace files");
  for (std::size_t i = 0; i < traces.size(); ++i) {
    const std::string k = fmt::format("traces[{}]", i);
    if (!traces[i].is_string() || traces[i].get<std::string>().empty())
      throw c.err(k, "expected a file path, got " + shown_json(traces[i]));
    const auto p = traces[i].get<std::string>();
    if (std::any_of(p.begin(), p.end(),
                    [](char ch) { return static_cast<unsigned char>(ch) < 0x20 || ch == ',' || ch == '"'; })) {
      throw c.err(k, "a sweep's trace paths may not hold commas, quotes or control characters");
    }
    if (std::find(cfg.traces.begin(), cfg.traces.end(), p) != cfg.traces.end())
      throw c.err(k, quote_excerpt(p) + " is listed twice");
    cfg.traces.push_back(p);
  }

  std::vector<std::string> every_allocator, every_policy;
  for (const auto& e : comps.allocators.entries()) every_allocator.push_back(e.name);
  for (const auto& e : comps.policies.entries()) every_policy.push_back(e.name);
  if (!doc.contains("allocators")) throw c.err("allocators", "missing (a list of allocator names or \"all\")");
  cfg.allocators = c.names(doc.at("allocators"), "allocators", "allocator", every_allocator, comps.allocators.names());
  if (!doc.contains("policies")) throw c.err("policies", "missing (a list of policy names or \"all\")");
  cfg.policies = c.names(doc.at("policies"), "policies", "policy", every_policy, comps.policies.names());
  if (!doc.contains("budgets")) {
    throw c.err("budgets", "missing (a list of sizes, {\"from\", \"to\", \"step\"} or {\"ratios\": ...})");
  }
  cfg.budgets = parse_budgets(c, doc.at("budgets"));

  SimConfig base;
  if (doc.contains("base")) {
    const OJ& b = doc.at("base");
    if (!b.is_object()) throw c.err("base", "expected an object with link, engine, params or limits");
    for (const auto& [k, v] : b.items()) {
      if (k == "budget" || k == "allocator" || k == "policy") {
        throw c.err("base." + k,
                    "the sweep's " + (k == "policy" ? std::string("policies") : k + "s") + " list sets it");
      }
      if (!known(kBaseKeys, k)) throw c.err("base." + excerpt(k), "unknown key (valid: " + join(kBaseKeys) + ")");
    }
    base.doc = nlohmann::json::parse(b.dump());
    try {
      check_config(base, comps);
    } catch (const ConfigError& e) {
      throw c.rekey(e, "base");
    }
    cfg.limits = limits_from_json(base.doc.value("limits", nlohmann::json()));
  }

  if (doc.contains("variants")) {
    const OJ& vs = doc.at("variants");
    if (!vs.is_object() || vs.empty()) throw c.err("variants", "expected an object of named variants");
    for (const auto& [name, v] : vs.items()) cfg.variants.push_back(parse_variant(c, name, v, base, cfg, comps));
  } else {
    Variant v;
    v.name = "base";
    v.config = base;
    cfg.variants.push_back(std::move(v));
  }

  if (doc.contains("minbudget")) {
    const OJ& m = doc.at("minbudget");
    if (m.is_boolean()) {
      cfg.minbudget.enabled = m.get<bool>();
    } else if (m.is_object()) {
      c.only_keys(m, "minbudget", {"max_overhead"});
      cfg.minbudget.enabled = true;
      if (m.contains("max_overhead")) {
        const OJ& x = m.at("max_overhead");
        if (!x.is_number() || !(x.get<double>() >= 1.0)) {
          throw c.err("minbudget.max_overhead", "expected a compute overhead of at least 1, got " + shown_json(x));
        }
        cfg.minbudget.max_overhead = x.get<double>();
      }
    } else {
      throw c.err("minbudget", "expected true, false or {\"max_overhead\": X}");
    }
  }
  return cfg;
}

SweepConfig load_sweep_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path, "cannot open sweep config");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_sweep_config(ss.str(), path);
}

std::string resolve_trace_path(const SweepConfig& cfg, std::size_t trace) {
  const std::filesystem::path p(cfg.traces.at(trace));
  return p.is_absolute() ? p.string() : (cfg.dir / p).string();
}

}  // namespace coopsim::sweep
