// The "limits" config section (include/coopsim/base/limits.hpp): documented defaults, checked reads.
#include "coopsim/base/limits.hpp"

#include <fmt/format.h>

#include "coopsim/base/error.hpp"

namespace coopsim {

std::vector<ParamDoc> limit_param_docs() {
  return {
      {"max_input_bytes",
       ParamType::Bytes,
       std::to_string(Limits::kDefaultMaxInputBytes),
       "most bytes read from one input file (trace, DTR log, Kineto trace, pickle), counted after "
       "decompression",
       {}},
      {"max_tensors",
       ParamType::Int,
       std::to_string(Limits::kDefaultMaxTensors),
       "most tensors one trace may define (importers: may create)",
       {}},
      {"max_events",
       ParamType::Int,
       std::to_string(Limits::kDefaultMaxEvents),
       "most events (alloc, free, access, compute, iteration, mark) one trace may hold",
       {}},
      {"max_op_fan_in",
       ParamType::Int,
       std::to_string(Limits::kDefaultMaxOpFanIn),
       "most tensors one op may list as inputs (and likewise as outputs, mutates or views)",
       {}},
      {"max_recompute_depth",
       ParamType::Int,
       std::to_string(Limits::kDefaultMaxRecomputeDepth),
       "most recomputations one rematerialization may nest (an evicted value whose producer's inputs "
       "are evicted, and so on)",
       {}},
      {"max_search_steps",
       ParamType::Int,
       std::to_string(Limits::kDefaultMaxSearchSteps),
       "most candidates one run's victim searches may examine in all (the report's search_scanned); a run "
       "that needs more stops with status limit",
       {}},
      {"max_memory",
       ParamType::String,
       std::to_string(Limits::kDefaultMaxMemoryPercent) + "%",
       "most memory one input may make a reader hold (estimated; docs/limits.md): a size such as 8GiB, "
       "or a share of the machine's memory (physical, cgroup limit or ulimit, whichever is least) "
       "such as 25%",
       {}},
  };
}

namespace {

// max_memory: a size, or "P%" of machine_memory() with P in (0, 100].
std::uint64_t parse_max_memory(const std::string& text) {
  auto bad = [&]() {
    return ConfigError("limits.max_memory",
                       fmt::format("expected a size such as 8GiB or a share of the machine's memory such as 25%, got "
                                   "'{}'",
                                   text));
  };
  if (!text.empty() && text.back() == '%') {
    const std::string number = text.substr(0, text.size() - 1);
    std::size_t pos = 0;
    double percent = 0;
    try {
      percent = std::stod(number, &pos);
    } catch (const std::exception&) {
      throw bad();
    }
    if (pos != number.size() || !(percent > 0 && percent <= 100)) throw bad();
    const long double bytes = static_cast<long double>(machine_memory()) * percent / 100;
    return bytes >= 1 ? static_cast<std::uint64_t>(bytes) : 1;
  }
  const auto b = parse_bytes(text);
  if (!b) throw bad();
  if (b->value == 0) throw ConfigError("limits.max_memory", "must be greater than 0");
  return b->value;
}

}  // namespace

std::uint64_t Limits::default_max_memory() {
  static const std::uint64_t bytes = [] {
    const std::uint64_t m = machine_memory();
    return m / 100 * kDefaultMaxMemoryPercent + m % 100 * kDefaultMaxMemoryPercent / 100;
  }();
  return bytes;
}

Limits limits_from_json(const nlohmann::json& section) {
  // max_memory takes plain byte counts too: Params reads it as text.
  nlohmann::json given = section;
  if (given.is_object() && given.contains("max_memory") && given["max_memory"].is_number_integer()) {
    if (given["max_memory"].is_number_unsigned() || given["max_memory"].get<std::int64_t>() >= 0) {
      given["max_memory"] = std::to_string(given["max_memory"].get<std::uint64_t>());
    } else {
      throw ConfigError("limits.max_memory", fmt::format("must be greater than 0, got {}", given["max_memory"].dump()));
    }
  }
  const Params p("limits", given, limit_param_docs());
  auto count = [&](const char* key) {
    const std::int64_t v = p.get_int(key);
    if (v < 1) throw ConfigError(std::string("limits.") + key, fmt::format("must be at least 1, got {}", v));
    return static_cast<std::uint64_t>(v);
  };
  Limits l;
  l.max_input_bytes = p.get_bytes("max_input_bytes").value;
  if (l.max_input_bytes == 0) throw ConfigError("limits.max_input_bytes", "must be greater than 0");
  // Tensors and events are named by 32-bit ids (TensorId, EventId; 2^32 - 1 is their "none"), so
  // a trace may not hold more than 2^32 - 2 of either, whatever the limit says.
  auto id_count = [&](const char* key) {
    const std::uint64_t v = count(key);
    constexpr std::uint64_t kMaxIds = 0xfffffffeULL;
    if (v > kMaxIds) {
      throw ConfigError(std::string("limits.") + key,
                        fmt::format("must be at most {} (tensors and events have 32-bit ids), got {}", kMaxIds, v));
    }
    return v;
  };
  l.max_tensors = id_count("max_tensors");
  l.max_events = id_count("max_events");
  l.max_op_fan_in = count("max_op_fan_in");
  l.max_recompute_depth = count("max_recompute_depth");
  l.max_search_steps = count("max_search_steps");
  l.max_memory = p.is_set("max_memory") ? parse_max_memory(p.get_string("max_memory")) : Limits::default_max_memory();
  return l;
}

std::string limit_problem(std::uint64_t cap, const std::string& what, const std::string& key) {
  return fmt::format("more than {} {} (limits.{})", cap, what, key);
}

}  // namespace coopsim
