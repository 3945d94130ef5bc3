// Caps on what one input may make coopsim read and hold (docs/limits.md): the bytes read from
// one input file (counted after decompression), the number of tensors and of events a trace
// may hold, the tensors one op may list, how deep one rematerialization may nest, and the memory
// one input may make a reader hold (max_memory; coopsim/model/memory_cap.hpp). They turn hostile or
// broken inputs (a gzip bomb, 10^9 tiny tensors, an op reading 10^7 tensors, a pickle whose shared
// references expand exponentially) into one-line errors instead of exhausted memory; the count
// defaults sit far above every real recording. Config section "limits", e.g.
// `--set limits.max_tensors=100000000`; an exceeded cap names the file, the line and the key.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "coopsim/base/params.hpp"

namespace coopsim {

struct Limits {
  static constexpr std::uint64_t kDefaultMaxInputBytes = std::uint64_t{16} << 30;  // 16 GiB
  static constexpr std::uint64_t kDefaultMaxTensors = 50'000'000;
  static constexpr std::uint64_t kDefaultMaxEvents = 500'000'000;
  static constexpr std::uint64_t kDefaultMaxOpFanIn = 65'536;
  static constexpr std::uint64_t kDefaultMaxRecomputeDepth = 10'000'000;
  // Victim searches of one run, in the candidates they examine (the report's search_scanned):
  // 20 to 25 s of searching at the 4-5e7 candidates/s measured (wide 50,000-layer chains).
  static constexpr std::uint64_t kDefaultMaxSearchSteps = 1'000'000'000;
  // The count caps above can imply more memory than a machine has (500 M events are 16 GB):
  // max_memory is what bounds a reader in the end. Its default is this share of the memory
  // the process may use (machine_memory()), leaving the rest to the simulation itself.
  static constexpr unsigned kDefaultMaxMemoryPercent = 50;

  std::uint64_t max_input_bytes = kDefaultMaxInputBytes;          // decompressed bytes of one input file
  std::uint64_t max_tensors = kDefaultMaxTensors;                 // tensor definitions in one trace
  std::uint64_t max_events = kDefaultMaxEvents;                   // events in one trace
  std::uint64_t max_op_fan_in = kDefaultMaxOpFanIn;               // entries of one op's inputs (likewise
                                                                  // outputs, mutates, views)
  std::uint64_t max_recompute_depth = kDefaultMaxRecomputeDepth;  // recomputations one
                                                                  // rematerialization may nest
  std::uint64_t max_search_steps = kDefaultMaxSearchSteps;      // candidates one run's victim
                                                                  // searches may examine (status limit)
  std::uint64_t max_memory = default_max_memory();                // bytes one input may make a reader hold
                                                                  // (estimated, docs/limits.md)

  // kDefaultMaxMemoryPercent of machine_memory(), computed once per process.
  static std::uint64_t default_max_memory();
};

// The memory this process may use: the least of the physical memory, the cgroup's memory limit
// (v2 memory.max, v1 memory.limit_in_bytes) and the address-space and data ulimits. Computed
// once per process; 2^64 - 1 when none of them can be read.
std::uint64_t machine_memory();

// The "limits" section's keys with their defaults and help (for `coopsim list` and checks).
std::vector<ParamDoc> limit_param_docs();

// Reads a "limits" section (null or absent: the defaults). Throws ConfigError
// ("limits.max_tensors: problem") on unknown keys and on values that are not integers >= 1.
// max_memory takes a size (8GiB, plain bytes) or a share of machine_memory() ("25%").
Limits limits_from_json(const nlohmann::json& section);

// "more than 50000000 tensors (limits.max_tensors)": the problem text of an exceeded cap.
std::string limit_problem(std::uint64_t cap, const std::string& what, const std::string& key);

}  // namespace coopsim
