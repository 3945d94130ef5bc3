// describe_commands (cli_model.hpp): the CLI11 app read back as data. The values an option takes
// come from the registries where a registry names them (allocators, policies, importers, plan
// methods, --set keys), else from the option's one_of validator (its "{a,b}" type name).
#include "cli_model.hpp"

#include <algorithm>
#include <set>

#include "coopsim/generate/generator.hpp"
#include "coopsim/import/registry.hpp"
#include "coopsim/model/link.hpp"
#include "coopsim/planner/planner.hpp"
#include "coopsim/sim/builtin.hpp"
#include "coopsim/sim/simulation.hpp"

namespace coopsim::cli {
namespace {

template <class Registry>
std::vector<std::string> names_of(const Registry& r) {
  std::vector<std::string> out;
  for (const auto& e : r.entries()) out.push_back(e.name);
  return out;
}

void add_keys(std::vector<std::string>& out, const std::string& prefix, const std::vector<ParamDoc>& docs) {
  for (const ParamDoc& d : docs) out.push_back(prefix + d.key + "=");
}

// The keys `run --set` (and minbudget, advise) takes: the top-level ones, each section's, and
// each component's parameters as COMPONENT.KEY.
std::vector<std::string> config_keys() {
  std::vector<std::string> keys;
  add_keys(keys, "", top_level_docs());
  add_keys(keys, "link.", link_param_docs());
  add_keys(keys, "engine.", engine_param_docs());
  const Components& c = builtin_components();
  for (const auto& e : c.allocators.entries()) add_keys(keys, e.name + ".", e.params);
  for (const auto& e : c.policies.entries()) add_keys(keys, e.name + ".", e.params);
  return keys;
}

// "{role,cost}" at the end of a type name such as "TEXT:{role,cost}" (cli::one_of's description).
std::vector<std::string> validator_choices(const std::string& type_name) {
  const auto open = type_name.find('{');
  const auto close = type_name.rfind('}');
  if (open == std::string::npos || close == std::string::npos || close < open) return {};
  std::vector<std::string> out;
  std::string word;
  for (char ch : type_name.substr(open + 1, close - open - 1)) {
    if (ch == ',') {
      out.push_back(word);
      word.clear();
    } else {
      word += ch;
    }
  }
  out.push_back(word);
  return out;
}

// Options whose value is free text or a number although CLI11 calls it TEXT.
bool is_free_text(const std::string& name) {
  static const std::set<std::string> free = {"--budget",     "--capacity",   "--reserve", "--shard",
                                             "--limit",      "--max-overhead", "--time-limit", "--iterations",
                                             "--warmup",     "--device",     "--sample-stride", "--jobs",
                                             "--repeat",     "--stop-after", "--from",   "--to"};
  return free.contains(name);
}

void classify(const std::string& command, OptionModel& o) {
  const std::string& n = o.name;
  const bool run_like = command == "run" || command == "bench" || command == "minbudget";
  if (run_like && (n == "--allocator" || n == "--policy")) {
    const Components& c = builtin_components();
    o.choices = n == "--allocator" ? names_of(c.allocators) : names_of(c.policies);
    o.choices.push_back("all");
    o.kind = command == "minbudget" ? ValueKind::Choice : ValueKind::List;
  } else if (command == "import" && n == "kind") {
    o.choices = names_of(builtin_importers());
    o.kind = ValueKind::Choice;
  } else if (command == "plan" && n == "--method") {
    o.choices = names_of(plan::methods());
    o.kind = ValueKind::Choice;
  } else if (n == "--set") {
    o.kind = ValueKind::Setting;
    if (command == "generate") {
      add_keys(o.choices, "", generator_param_docs());
    } else {
      o.choices = config_keys();
    }
  } else if (auto choices = validator_choices(o.value_name); !choices.empty()) {
    o.choices = std::move(choices);
    o.kind = ValueKind::Choice;
  } else if (is_free_text(n) || o.value_name.starts_with("INT") || o.value_name.starts_with("UINT") ||
             o.value_name.starts_with("FLOAT")) {
    o.kind = ValueKind::Free;
  } else {
    o.kind = ValueKind::Path;
  }
}

}  // namespace

std::vector<CommandModel> describe_commands(const CLI::App& app) {
  std::vector<CommandModel> out;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); })) {
    CommandModel c;
    c.name = sub->get_name();
    c.help = sub->get_description();
    for (const CLI::Option* opt : sub->get_options()) {
      if (opt->get_group().empty() || opt == sub->get_help_ptr()) continue;  // hidden, or -h
      OptionModel o;
      o.help = opt->get_description();
      o.required = opt->get_required();
      o.value_name = opt->get_type_size_max() > 0 ? opt->get_type_name() : "";
      o.repeatable = opt->get_items_expected_max() > 1;
      if (opt->nonpositional()) {
        for (const std::string& s : opt->get_snames()) o.flags.push_back("-" + s);
        for (const std::string& l : opt->get_lnames()) o.flags.push_back("--" + l);
        o.name = opt->get_lnames().empty() ? o.flags.front() : "--" + opt->get_lnames().front();
        if (o.value_name.empty()) {
          c.options.push_back(std::move(o));
          continue;
        }
      } else {
        o.name = opt->get_name();
      }
      classify(c.name, o);
      (opt->nonpositional() ? c.options : c.positionals).push_back(std::move(o));
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace coopsim::cli
