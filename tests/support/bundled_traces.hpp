// The bundled traces (traces/*.jsonl.gz, relative to the project root the tests run in), sorted.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace coopsim::test {

inline std::vector<std::filesystem::path> bundled_traces() {
  std::vector<std::filesystem::path> traces;
  for (const auto& e : std::filesystem::directory_iterator("traces")) {
    if (e.path().string().ends_with(".jsonl.gz")) traces.push_back(e.path());
  }
  std::sort(traces.begin(), traces.end());
  return traces;
}

// True under COOPSIM_SANITIZE=1 (scripts/test.sh --sanitize), where every run is several times
// slower.
inline bool sanitize_pass() {
  const char* s = std::getenv("COOPSIM_SANITIZE");
  return s != nullptr && std::string_view(s) == "1";
}

// The share of a bundled suite that this process runs. tests/meson.build splits the suite into n
// tests that run side by side (COOPSIM_BUNDLED_SHARD="k/n", k in 1..n). A combination (trace,
// policy, allocator, budget, ... as indices) belongs to shard 1 + (sum of its indices) mod n:
// every shard gets every trace, policy, allocator and budget, interleaved, so a suite's ratios
// (runs that complete, that swap) hold in each shard as in the whole, and the shards take about
// equal time. Unset: one shard, every combination. A malformed value throws (the case fails
// rather than silently running nothing or everything).
// With `sanitizer_sample` s > 1 and COOPSIM_SANITIZE=1 (the ASan + UBSan pass, several times
// slower, which looks for memory errors and undefined behaviour; the normal pass runs every
// combination) a shard runs a fixed pseudo-random 1/s of its combinations: those whose index tuple
// hashes to 0 modulo s. A hash, not a stride: a stride over index sums or ordinals aliases with
// the loop sizes and would leave whole traces or allocators out.
class BundledShard {
 public:
  explicit BundledShard(unsigned sanitizer_sample = 1) : sample_(sanitize_pass() ? sanitizer_sample : 1) {
    if (sample_ == 0) throw std::invalid_argument("BundledShard: the sanitizer sample must be at least 1");
    const char* env = std::getenv("COOPSIM_BUNDLED_SHARD");
    if (env == nullptr || *env == '\0') return;
    const std::string_view spec(env);
    const auto bad = [&](const char* why) {
      return std::runtime_error("COOPSIM_BUNDLED_SHARD: " + std::string(why) + ", got '" + std::string(spec) + "'");
    };
    const auto number = [&](std::string_view text) {
      std::size_t v = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || end != text.data() + text.size()) throw bad("expected k/n");
      return v;
    };
    const auto slash = spec.find('/');
    if (slash == std::string_view::npos) throw bad("expected k/n");
    k_ = number(spec.substr(0, slash));
    n_ = number(spec.substr(slash + 1));
    if (n_ == 0 || k_ == 0 || k_ > n_) throw bad("need 1 <= k <= n");
  }
  // Every combination runs in this process.
  bool whole() const { return n_ == 1 && sample_ == 1; }
  // The sanitizer pass's sample: a few dozen runs a shard, too few for a suite's ratios (most
  // runs complete, most evict), which the normal pass checks on every combination; there a
  // ratio check asks for at least one.
  bool sampled() const { return sample_ > 1; }
  // `part` > `whole` / 2 where every combination of the shard runs, `part` > 0 in a sample.
  bool most(std::uint64_t part, std::uint64_t whole) const { return sampled() ? part > 0 : part > whole / 2; }
  bool runs(std::initializer_list<std::size_t> indices) const {
    std::size_t sum = 0;
    std::uint64_t hash = 0;
    for (const std::size_t i : indices) {
      sum += i;
      hash = mix(hash ^ (i + 0x9e3779b97f4a7c15ULL));
    }
    return sum % n_ == k_ - 1 && hash % sample_ == 0;
  }

 private:
  // splitmix64's finalizer (Steele, Lea and Flood, "Fast splittable pseudorandom number
  // generators", OOPSLA 2014).
  static std::uint64_t mix(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  unsigned sample_ = 1;
  std::size_t k_ = 1, n_ = 1;
};

// The budgets (percent of the no-eviction peak) a bundled suite runs: `full`, or with
// COOPSIM_SANITIZE=1 (scripts/test.sh --sanitize, where every run is several times slower)
// every other one, counted from the largest.
inline std::vector<int> bundled_percents(const std::vector<int>& full) {
  if (!sanitize_pass()) return full;
  std::vector<int> out;
  for (std::size_t i = full.size(); i > 0; i -= std::min<std::size_t>(i, 2)) out.insert(out.begin(), full[i - 1]);
  return out;
}

}  // namespace coopsim::test
