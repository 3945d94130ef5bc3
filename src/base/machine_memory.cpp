// The memory this process may use (include/coopsim/base/limits.hpp): the least of the machine's
// physical memory, its cgroup's limit and its address-space and data ulimits, read once. It sets
// the default of limits.max_memory (a share of it).
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <string>

#include "coopsim/base/limits.hpp"

namespace coopsim {
namespace {

constexpr std::uint64_t kUnknown = std::numeric_limits<std::uint64_t>::max();

// A cgroup limit file: a byte count, or "max" (none).
std::uint64_t cgroup_limit(const std::string& file) {
  std::ifstream in(file);
  std::string text;
  if (!(in >> text) || text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return kUnknown;
  try {
    return std::stoull(text);
  } catch (const std::exception&) {
    return kUnknown;
  }
}

// This process's cgroup (v2 "0::/path" line of /proc/self/cgroup; v1 the memory controller's
// line): inside a container both usually name the container's own root.
std::uint64_t cgroup_memory() {
  std::uint64_t least = kUnknown;
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const auto first = line.find(':');
    const auto second = first == std::string::npos ? std::string::npos : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (controllers.empty()) {
      least = std::min(least, cgroup_limit("/sys/fs/cgroup" + path + "/memory.max"));
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      least = std::min(least, cgroup_limit("/sys/fs/cgroup/memory" + path + "/memory.limit_in_bytes"));
    }
  }
  least = std::min(least, cgroup_limit("/sys/fs/cgroup/memory.max"));
  return std::min(least, cgroup_limit("/sys/fs/cgroup/memory/memory.limit_in_bytes"));
}

std::uint64_t ulimit_of(int resource) {
  struct rlimit r {};
  if (getrlimit(resource, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return kUnknown;
  return static_cast<std::uint64_t>(r.rlim_cur);
}

}  // namespace

std::uint64_t machine_memory() {
  static const std::uint64_t bytes = [] {
    std::uint64_t least = kUnknown;
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) least = static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page);
    least = std::min(least, cgroup_memory());
    least = std::min(least, ulimit_of(RLIMIT_AS));
    return std::min(least, ulimit_of(RLIMIT_DATA));
  }();
  return bytes;
}

}  // namespace coopsim
