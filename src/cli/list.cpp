// `coopsim list`: every component with its parameters, defaults and help.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <ostream>

#include "coopsim/base/schema_version.hpp"
#include "coopsim/cli/exporters.hpp"
#include "coopsim/import/registry.hpp"
#include "coopsim/planner/planner.hpp"
#include "coopsim/cli/commands.hpp"
#include "coopsim/generate/generator.hpp"
#include "coopsim/model/link.hpp"
#include "coopsim/sim/simulation.hpp"

namespace coopsim {
namespace {

nlohmann::ordered_json docs_json(std::span<const ParamDoc> docs) {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const auto& d : docs) {
    nlohmann::ordered_json j;
    j["key"] = d.key;
    j["type"] = std::string(to_string(d.type));
    j["default"] = d.default_value;
    j["help"] = d.help;
    if (!d.choices.empty()) j["choices"] = d.choices;
    arr.push_back(j);
  }
  return arr;
}

void docs_text(std::ostream& os, std::span<const ParamDoc> docs, std::string_view indent) {
  for (const auto& d : docs) {
    std::string extra;
    if (!d.choices.empty()) {
      extra = " [";
      for (std::size_t i = 0; i < d.choices.size(); ++i) extra += (i ? "|" : "") + d.choices[i];
      extra += "]";
    }
    os << fmt::format("{}{:<30} {:<7} default {:<10} {}{}\n", indent, d.key, to_string(d.type),
                      d.default_value.empty() ? "\"\"" : d.default_value, d.help, extra);
  }
}

template <class Reg>
void section(std::ostream& os, std::string_view title, const Reg& reg) {
  os << title << ":\n";
  for (const auto& e : reg.entries()) {
    os << fmt::format("  {:<10} {}\n", e.name, e.help);
    if (e.params.empty()) os << "      (no parameters)\n";
    docs_text(os, e.params, "      ");
  }
}

template <class Reg>
nlohmann::ordered_json section_json(const Reg& reg) {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const auto& e : reg.entries()) {
    nlohmann::ordered_json j;
    j["name"] = e.name;
    j["help"] = e.help;
    j["params"] = docs_json(e.params);
    arr.push_back(j);
  }
  return arr;
}

}  // namespace

int command_list(bool json, std::ostream& out) {
  const Components& c = builtin_components();
  const ImporterRegistry importer_list = builtin_importers();
  if (json) {
    nlohmann::ordered_json j;
    j["schema_version"] = schema_version::kListing;
    j["config"] = docs_json(top_level_docs());
    j["allocators"] = section_json(c.allocators);
    j["policies"] = section_json(c.policies);
    j["link"] = docs_json(link_param_docs());
    nlohmann::ordered_json presets = nlohmann::ordered_json::array();
    for (const auto& p : link_presets()) presets.push_back({{"name", p.name}, {"help", p.help}});
    j["link_presets"] = presets;
    j["engine"] = docs_json(engine_param_docs());
    j["generate"] = docs_json(generator_param_docs());
    nlohmann::ordered_json importers = nlohmann::ordered_json::array();
    for (const ImporterEntry& e : importer_list.entries())
      importers.push_back({{"name", e.name}, {"help", e.help}, {"options", e.options}, {"profiles", e.profiles}});
    j["importers"] = importers;
    nlohmann::ordered_json methods = nlohmann::ordered_json::array();
    for (const plan::MethodEntry& e : plan::methods().entries()) methods.push_back({{"name", e.name}, {"help", e.help}});
    j["plan_methods"] = methods;
    nlohmann::ordered_json exporters = nlohmann::ordered_json::array();
    for (const ExporterEntry& e : run_exporters().entries())
      exporters.push_back({{"name", e.name}, {"option", "--" + e.name}, {"help", e.help}});
    j["run_exports"] = exporters;
    out << j.dump(2) << "\n";
    return 0;
  }
  out << "config (top level; sizes accept 8GiB, 512MB or plain bytes):\n";
  docs_text(out, top_level_docs(), "  ");
  section(out, "allocators (config \"allocator\", parameters under \"params\".<name>)", c.allocators);
  section(out, "policies (config \"policy\", parameters under \"params\".<name>)", c.policies);
  out << "link (config \"link\"):\n";
  docs_text(out, link_param_docs(), "  ");
  out << "  presets:\n";
  for (const auto& p : link_presets()) out << fmt::format("    {:<12} {}\n", p.name, p.help);
  out << "engine (config \"engine\"):\n";
  docs_text(out, engine_param_docs(), "  ");
  out << "generate (coopsim generate --set key=value):\n";
  docs_text(out, generator_param_docs(), "  ");
  out << "importers (coopsim import KIND INPUT -o OUTPUT):\n";
  for (const ImporterEntry& e : importer_list.entries()) {
    out << fmt::format("  {:<14} {}\n", e.name, e.help);
    if (!e.options.empty()) out << fmt::format("      options: {}\n", fmt::join(e.options, ", "));
  }
  out << "run exports (coopsim run --NAME FILE, one run):\n";
  for (const ExporterEntry& e : run_exporters().entries()) out << fmt::format("  {:<14} {}\n", e.name, e.help);
  out << "plan methods (coopsim plan --method):\n";
  for (const plan::MethodEntry& e : plan::methods().entries()) out << fmt::format("  {:<14} {}\n", e.name, e.help);
  return 0;
}

}  // namespace coopsim
