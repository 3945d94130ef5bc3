#include "coopsim/error.hpp"

namespace coopsim {

TraceError::TraceError(const std::string& file, std::uint64_t line, const std::string& problem)
    : Error(file + ":" + std::to_string(line) + ": " + problem),
      file_(file),
      line_(line),
      problem_(problem) {}

ConfigError::ConfigError(const std::string& key, const std::string& problem)
    : Error(key.empty() ? problem : key + ": " + problem), key_(key) {}

}  // namespace coopsim
