// `coopsim import KIND INPUT -o OUT`: convert a foreign trace to coopsim trace v1 with the
// importer the registry names KIND (include/coopsim/import/registry.hpp).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <utility>

#include <ostream>

#include "coopsim/cli/commands.hpp"
#include "coopsim/base/error.hpp"
#include "coopsim/import/registry.hpp"
#include "coopsim/base/limits.hpp"
#include "coopsim/base/capped_input.hpp"
#include "coopsim/base/output_file.hpp"
#include "coopsim/formats/trace_file.hpp"

namespace coopsim {
namespace {

// What an input file looks like from its first bytes (gzip inflated): the importer (or command) to
// use, and in what words; empty when it looks like none of them. For errors only: a file whose
// import failed is named by what it is, so the user learns which command reads it.
std::pair<std::string, std::string> sniff(const std::string& path) {
  CappedInput in(path, 1 << 20, "");
  if (!in.is_open()) return {};
  std::string head(4096, '\0');
  head.resize(in.read(head.data(), head.size()));
  if (head.empty()) return {};
  if (static_cast<unsigned char>(head[0]) == 0x80) return {"torch-snapshot", "a pickle (a PyTorch memory snapshot?)"};
  const auto has = [&](std::string_view w) { return head.find(w) != std::string::npos; };
  if (has("\"coopsim-trace\"")) return {"", "a coopsim trace already: `coopsim run` reads it as it is"};
  if (has("\"traceEvents\"")) return {"kineto", "a Kineto / Chrome trace"};
  if (has("\"nodes\"") && has("\"schema\"")) {
    return {"", "a PyTorch Execution Trace: give it as --et beside its Kineto trace (`coopsim import kineto "
                "KINETO.json --et ET.json`)"};
  }
  if (has("\"INSTRUCTION\"")) return {"dtr", "a DTR log"};
  if (head.rfind("id,lower,upper,size", 0) == 0) return {"", "a MiniMalloc problem: `coopsim plan` reads it"};
  return {};
}

}  // namespace

int command_import(const ImportArgs& args, std::ostream& out) {
  nlohmann::json section = nlohmann::json::object();
  for (const std::string& s : args.limits) {
    const auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0) throw ConfigError("--limit " + s, "expected key=value");
    section[s.substr(0, eq)] = parse_override_value(s.substr(eq + 1));
  }
  ImportOptions options;
  options.limits = limits_from_json(section);
  options.device = args.device;
  options.copy_on_write = args.copy_on_write;
  options.compat = args.compat;
  options.et = args.et;
  const ImporterRegistry importers = builtin_importers();
  const ImporterEntry& importer = importers.get(args.kind, "import", "trace kind");
  // An option the importer does not read is refused rather than ignored.
  const std::pair<const char*, bool> given[] = {{"--device", args.device != 0},
                                                {"--copy-on-write", args.copy_on_write},
                                                {"--compat", args.compat != "coopsim"},
                                                {"--et", !args.et.empty()}};
  for (const auto& [option, set] : given) {
    if (set && std::find(importer.options.begin(), importer.options.end(), option) == importer.options.end()) {
      throw ConfigError(std::string("import ") + option,
                        fmt::format("{} does not take {} (its options: {})", importer.name, option,
                                    importer.options.empty() ? "none" : fmt::format("{}", fmt::join(importer.options, ", "))));
    }
  }
  if (!importer.profiles.empty() &&
      std::find(importer.profiles.begin(), importer.profiles.end(), args.compat) == importer.profiles.end()) {
    throw ConfigError("import --compat", fmt::format("unknown profile '{}' (valid: {})", args.compat,
                                                     fmt::join(importer.profiles, ", ")));
  }
  const NamedPath outputs[] = {{"--output", args.output}};
  const NamedPath inputs[] = {{"the input", args.input}, {"--et", args.et}};
  check_output_paths(outputs, inputs);
  OutputFile file(args.output);  // opened before the import, so a bad output fails at once
  const Trace trace = [&] {
    try {
      return importer.import(args.input, options);
    } catch (const Error& e) {
      const auto [kind, what] = sniff(args.input);
      if (what.empty() || kind == importer.name) throw;
      throw Error(fmt::format("{}; {} looks like {}{}", e.what(), args.input, what,
                              kind.empty() ? "" : fmt::format(": try `coopsim import {}`", kind)));
    }
  }();
  write_trace(trace, file);
  const TraceSummary s = summarize(trace);
  out << fmt::format("{} -> {}: {} tensors, {} ops, {} events, peak live {} ({} bytes)\n", args.input, args.output,
                     s.tensors, s.ops, s.events, format_bytes(s.peak_live), s.peak_live.value);
  if (importer.hints) {
    for (const std::string& line : importer.hints(trace, args.output)) out << "  " << line << "\n";
  }
  return 0;
}

}  // namespace coopsim
