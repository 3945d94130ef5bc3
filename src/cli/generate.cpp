// `coopsim generate`: write a synthetic training-step trace (options: `coopsim list`).
#include <fmt/format.h>

#include <ostream>

#include "coopsim/cli/commands.hpp"
#include "coopsim/base/error.hpp"
#include "coopsim/generate/generator.hpp"
#include "coopsim/formats/trace_file.hpp"

namespace coopsim {

int command_generate(const GenerateArgs& args, std::ostream& out) {
  nlohmann::json options = nlohmann::json::object();
  for (const auto& s : args.sets) {
    const auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0) throw ConfigError("--set " + s, "expected key=value");
    options[s.substr(0, eq)] = parse_override_value(s.substr(eq + 1));
  }
  const GeneratorOptions o = generator_options_from_json(options);
  const Trace trace = generate_training_trace(o);
  write_trace(trace, args.output);
  const TraceSummary s = summarize(trace);
  out << fmt::format("{}: {} — {} tensors, {} ops, {} events, peak live {}\n", args.output, trace.header.model,
                     s.tensors, s.ops, s.events, format_bytes(s.peak_live));
  return 0;
}

}  // namespace coopsim
