// Config loading, overrides and validation. All checking happens before any simulation runs.
#include <algorithm>
#include <fstream>
#include <sstream>

#include "coopsim/base/error.hpp"
#include "coopsim/base/json_document.hpp"
#include "coopsim/base/text.hpp"
#include "coopsim/base/limits.hpp"
#include "coopsim/model/link.hpp"
#include "coopsim/sim/simulation.hpp"

namespace coopsim {
namespace {

const char* const kTopKeys[] = {"allocator", "policy", "budget", "initial_state", "link",
                                "engine",    "params", "limits", "description"};

std::string top_keys_list() {
  std::string s;
  for (const char* k : kTopKeys) s += (s.empty() ? "" : ", ") + std::string(k);
  return s;
}

bool is_top_key(const std::string& k) {
  return std::any_of(std::begin(kTopKeys), std::end(kTopKeys), [&](const char* t) { return k == t; });
}

// Top-level keys that hold one value, not a section.
bool is_scalar_key(const std::string& k) {
  return k == "allocator" || k == "policy" || k == "budget" || k == "initial_state" || k == "description";
}

bool is_component(const std::string& name, const Components& c) {
  return c.allocators.find(name) != nullptr || c.policies.find(name) != nullptr;
}

}  // namespace

std::vector<ParamDoc> engine_param_docs() {
  return {
      {"paranoid",
       ParamType::Bool,
       "false",
       "check allocator invariants and the residency checks after every event (slow)",
       {}},
      {"residency_checks",
       ParamType::Bool,
       "false",
       "recompute policies: after every event check that resident tensors hold disjoint blocks, the "
       "allocator holds their bytes and stays within the budget (ops never read an absent tensor: "
       "always checked)",
       {}},
      {"measure_search_latency",
       ParamType::Bool,
       "false",
       "measure wall time inside policy decisions (reports then differ run to run)",
       {}},
      {"allow_no_dataflow",
       ParamType::Bool,
       "false",
       "run policies other than keep on a trace whose ops read no tensor (an allocator-only snapshot, a "
       "profiler trace imported without --et): they are refused by default, since evicting a tensor "
       "nothing reads costs nothing",
       {}},
  };
}

std::vector<ParamDoc> top_level_docs() {
  return {
      {"allocator", ParamType::String, "pytorch", "allocator model (see allocators below)", {}},
      {"policy", ParamType::String, "keep", "memory policy (see policies below)", {}},
      {"budget", ParamType::Bytes, "80GiB", "device memory budget = capacity given to the allocator", {}},
      {"initial_state",
       ParamType::String,
       "recorded",
       "for a trace that starts from a recorded allocator state (an imported snapshot): recorded = "
       "install it (a budget below it is an infeasible run), empty = replay its tensors as requests "
       "from an empty allocator",
       {"recorded", "empty"}},
  };
}

SimConfig load_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path, "cannot open config file");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  SimConfig cfg;
  cfg.source = path;
  cfg.doc = parse_json_document(text, path);  // file:line for invalid JSON and for a key given twice
  if (!cfg.doc.is_object()) throw ConfigError(path, "a config file must hold a JSON object");
  return cfg;
}

void apply_override(SimConfig& cfg, const std::string& assignment, const Components& c) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw ConfigError("--set " + excerpt(assignment), "expected key=value");
  }
  const std::string key = assignment.substr(0, eq);
  const std::string shown_key = excerpt(key);  // for messages: a key may be megabytes of text
  const std::string text = assignment.substr(eq + 1);
  const nlohmann::json value = parse_override_value(text);
  std::vector<std::string> path;
  std::stringstream ks(key);
  for (std::string part; std::getline(ks, part, '.');) {
    if (part.empty()) throw ConfigError("--set " + shown_key, "empty key component");
    path.push_back(part);
  }
  if (is_component(path.front(), c)) {
    path.insert(path.begin(), "params");
  } else if (path.size() > 1 && is_scalar_key(path.front())) {
    // e.g. policy.heuristic: 'policy' holds a name, and a later -p would silently replace it.
    throw ConfigError("--set " + shown_key,
                      quote_excerpt(path.front()) + " is a value, not a section: set it with --set " + path.front() +
                          "=VALUE, and a component's parameter with --set "
                          "COMPONENT.PARAMETER (sections: link, engine, limits, params; components: " +
                          c.allocators.names() + ", " + c.policies.names() + ")");
  } else if (!is_top_key(path.front())) {
    std::vector<std::string> names(std::begin(kTopKeys), std::end(kTopKeys));
    for (const auto& e : c.allocators.entries()) names.push_back(e.name);
    for (const auto& e : c.policies.entries()) names.push_back(e.name);
    const std::string guess = closest_name(path.front(), names);
    throw ConfigError("--set " + shown_key,
                      "unknown key " + quote_excerpt(path.front()) + " (valid: " + top_keys_list() +
                          ", or COMPONENT.PARAMETER with a component among " + c.allocators.names() + ", " +
                          c.policies.names() + ")" + (guess.empty() ? "" : "; did you mean '" + guess + "'?"));
  }
  nlohmann::json* node = &cfg.doc;
  for (std::size_t i = 0; i + 1 < path.size(); ++i) {
    nlohmann::json& next = (*node)[path[i]];
    if (next.is_null()) next = nlohmann::json::object();
    if (!next.is_object()) throw ConfigError("--set " + shown_key, quote_excerpt(path[i]) + " is not a section");
    node = &next;
  }
  (*node)[path.back()] = value;
}

Params top_level_params(const nlohmann::json& doc) {
  nlohmann::json given = nlohmann::json::object();
  for (const char* key : {"allocator", "policy", "budget", "initial_state"}) {
    if (doc.is_object() && doc.contains(key)) given[key] = doc.at(key);
  }
  return Params("", given, top_level_docs());
}

CheckedConfig check_config(const SimConfig& cfg, const Components& c) {
  const std::string& src = cfg.source;
  const std::string prefix = src.empty() ? "" : src + ": ";
  auto err = [&](const std::string& key, const std::string& problem) { return ConfigError(prefix + key, problem); };
  for (const auto& [k, v] : cfg.doc.items()) {
    bool known = false;
    for (const char* t : kTopKeys) known = known || k == t;
    if (!known) throw err(excerpt(k), "unknown key (valid: " + top_keys_list() + ")");
  }
  try {
    const Params top = top_level_params(cfg.doc);
    (void)c.allocators.get(top.get_string("allocator"), "allocator", "allocator");
    (void)c.policies.get(top.get_string("policy"), "policy", "policy");
    if (top.get_bytes("budget").value == 0) throw ConfigError("budget", "must be greater than 0");
    (void)make_link(Params("link", cfg.doc.value("link", nlohmann::json::object()), link_param_docs()));
    (void)Params("engine", cfg.doc.value("engine", nlohmann::json::object()), engine_param_docs());
    (void)limits_from_json(cfg.doc.value("limits", nlohmann::json()));
    const nlohmann::json params = cfg.doc.value("params", nlohmann::json::object());
    if (!params.is_object()) throw ConfigError("params", "expected an object keyed by component name");
    for (const auto& [name, obj] : params.items()) {
      if (const auto* a = c.allocators.find(name)) {
        (void)Params(name, obj, a->params);
      } else if (const auto* p = c.policies.find(name)) {
        (void)Params(name, obj, p->params);
      } else {
        throw ConfigError("params." + excerpt(name), "unknown component (allocators: " + c.allocators.names() +
                                                         "; policies: " + c.policies.names() + ")");
      }
    }
  } catch (const ConfigError& e) {
    if (prefix.empty() || e.key().rfind(prefix, 0) == 0) throw;
    throw ConfigError(prefix + e.key(), e.problem());
  }
  return CheckedConfig(cfg, c);
}

void CheckedConfig::set_budget(Bytes budget) {
  if (budget.value == 0) throw ConfigError("budget", "must be greater than 0");
  cfg_.doc["budget"] = budget.value;
}

Limits config_limits(const SimConfig& cfg) {
  const nlohmann::json section = cfg.doc.is_object() ? cfg.doc.value("limits", nlohmann::json()) : nlohmann::json();
  try {
    return limits_from_json(section);
  } catch (const ConfigError& e) {
    if (cfg.source.empty()) throw;
    throw ConfigError(cfg.source + ": " + e.key(), e.problem());
  }
}

}  // namespace coopsim
