// The "limits" config section (include/coopsim/limits.hpp): documented defaults, checked reads.
#include "coopsim/limits.hpp"

#include <fmt/format.h>

#include "coopsim/error.hpp"
#include "coopsim/simulation.hpp"

namespace coopsim {

std::vector<ParamDoc> limit_param_docs() {
  return {
      {"max_input_bytes", ParamType::Bytes, std::to_string(Limits::kDefaultMaxInputBytes),
       "most bytes read from one input file (trace, DTR log, Kineto trace, pickle), counted after "
       "decompression",
       {}},
      {"max_tensors", ParamType::Int, std::to_string(Limits::kDefaultMaxTensors),
       "most tensors one trace may define (importers: may create)", {}},
      {"max_events", ParamType::Int, std::to_string(Limits::kDefaultMaxEvents),
       "most events (alloc, free, access, compute, iteration, mark) one trace may hold", {}},
      {"max_op_fan_in", ParamType::Int, std::to_string(Limits::kDefaultMaxOpFanIn),
       "most tensors one op may list as inputs (and likewise as outputs, mutates or views)", {}},
      {"max_recompute_depth", ParamType::Int, std::to_string(Limits::kDefaultMaxRecomputeDepth),
       "most recomputations one rematerialization may nest (an evicted value whose producer's inputs "
       "are evicted, and so on)",
       {}},
  };
}

Limits limits_from_json(const nlohmann::json& section) {
  const Params p("limits", section, limit_param_docs());
  auto count = [&](const char* key) {
    const std::int64_t v = p.get_int(key);
    if (v < 1) throw ConfigError(std::string("limits.") + key, fmt::format("must be at least 1, got {}", v));
    return static_cast<std::uint64_t>(v);
  };
  Limits l;
  l.max_input_bytes = p.get_bytes("max_input_bytes").value;
  if (l.max_input_bytes == 0) throw ConfigError("limits.max_input_bytes", "must be greater than 0");
  l.max_tensors = count("max_tensors");
  l.max_events = count("max_events");
  l.max_op_fan_in = count("max_op_fan_in");
  l.max_recompute_depth = count("max_recompute_depth");
  return l;
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

std::string limit_problem(std::uint64_t cap, const std::string& what, const std::string& key) {
  return fmt::format("more than {} {} (limits.{})", cap, what, key);
}

}  // namespace coopsim
