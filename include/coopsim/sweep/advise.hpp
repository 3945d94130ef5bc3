// `coopsim advise TRACE --capacity 80GiB` (docs/user-guide.md, "Which allocator settings?"):
// simulates a trace under the settings PyTorch users can give its caching allocator through
// PYTORCH_CUDA_ALLOC_CONF and, when none fits the usable capacity (the capacity less a reserve for
// the CUDA context), under the recompute and swap policies; ranks what it tried, says whether
// PyTorch's defaults fit (with how much to spare, or how much more they need) and names the line
// to use.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "coopsim/base/units.hpp"
#include "coopsim/model/report.hpp"
#include "coopsim/model/trace.hpp"
#include "coopsim/sim/simulation.hpp"

namespace coopsim::advise {

// One PYTORCH_CUDA_ALLOC_CONF: the options of the `pytorch` model a user can set, each at
// PyTorch's default when 0 / false. roundup_power2_divisions is the single-integer form (one
// value for every size interval).
struct AllocConf {
  bool expandable_segments = false;
  std::uint64_t max_split_size_mb = 0;         // 0: unset (no limit); else > 20, as PyTorch requires
  std::uint32_t roundup_power2_divisions = 0;  // 0: unset; else a power of two
  double garbage_collection_threshold = 0.0;   // 0: unset; else in (0, 1)

  // How many options differ from the defaults.
  [[nodiscard]] std::size_t changed() const;
  bool operator==(const AllocConf&) const = default;
};

// The value of PYTORCH_CUDA_ALLOC_CONF as PyTorch's parser reads it, options in a fixed order:
// "expandable_segments:True,max_split_size_mb:256,roundup_power2_divisions:4,
// garbage_collection_threshold:0.6"; empty for the defaults.
std::string conf_string(const AllocConf& c);
// The same settings as config overrides of the `pytorch` model, only those that differ from the
// defaults: "pytorch.expandable_segments=true", "pytorch.max_split_size=256MiB", ...
std::vector<std::string> conf_overrides(const AllocConf& c);

// One configuration tried: allocator settings under a policy (keep: no eviction).
struct Candidate {
  AllocConf conf;
  std::string policy = "keep";
  std::string origin;  // why it was tried: "default", "fixed", "trace sizes", "combination", "policy"
};

// What a candidate's simulation at the capacity gave.
struct Outcome {
  std::size_t index = 0;  // the order it was tried in: the last tie-break of the ranking
  Candidate candidate;
  RunStatus status = RunStatus::Completed;
  Bytes peak_reserved, peak_allocated;
  double compute_overhead = 1.0;           // simulated / trace compute time (1: no policy cost)
  std::uint64_t alloc_retries = 0;         // cudaMalloc retries after freeing the whole cache
  std::uint64_t device_mallocs = 0;        // cudaMalloc calls (expandable segments: page maps)
  std::uint64_t events = 0;                // trace events
  std::optional<std::uint64_t> oom_event;  // where an OOM stopped the simulation
  SimTime simulated{0};                    // the run's simulated time (Report::time.simulated)
  std::uint32_t iterations = 1;            // the trace's training iterations (Report::iterations)
  [[nodiscard]] bool fits() const { return status == RunStatus::Completed; }
  // PyTorch's defaults under policy keep: no PYTORCH_CUDA_ALLOC_CONF, no recompute or swap.
  [[nodiscard]] bool is_defaults() const { return candidate.policy == "keep" && candidate.conf.changed() == 0; }
  // Simulated time per training iteration in milliseconds: simulated / iterations.
  [[nodiscard]] double step_ms() const;
};

// What a PyTorch user would switch on for a recompute or swap policy of the registry: its kind
// ("recompute", "swap", "swap and recompute") and PyTorch's counterpart. `offered` when PyTorch
// has the mechanism itself (vdnn's offload of saved activations: torch.autograd.graph.save_on_cpu);
// the others are research policies whose PyTorch counterpart is coarser (activation checkpointing
// is switched on per block, not per tensor).
struct PolicyInPyTorch {
  std::string kind;
  std::string counterpart;
  bool offered = false;
};
PolicyInPyTorch in_pytorch(const std::string& policy);

// The ranking: fitting outcomes first; of those, PyTorch's defaults first (no change is advised to
// save memory the step does not need), then policies PyTorch offers (PolicyInPyTorch::offered),
// then by compute overhead, alloc retries (each one a device synchronisation and a cudaFree of
// every cached segment, which the simulated clock does not charge), peak reserved, fewer changed
// settings, and the order tried. Outcomes that do not fit follow, those that got further through
// the trace first, then the order tried.
bool ranks_before(const Outcome& a, const Outcome& b);
void rank(std::vector<Outcome>& outcomes);

// The allocator settings of the first round, in the order tried: the defaults, expandable
// segments, max_split_size_mb 128/256/512 and the sizes the trace's large requests suggest
// (docs/user-guide.md), roundup_power2_divisions 2/4/8/16, garbage_collection_threshold 0.6/0.8.
// A max_split_size_mb above every block the trace can produce changes nothing; it goes to
// `not_tried` with the reason.
std::vector<Candidate> first_round(const Trace& trace, std::vector<std::string>& not_tried);
// The second round: the best of each option of the ranked first round combined (max split
// size with GC and with rounding; expandable segments with rounding and with max split size).
std::vector<Candidate> second_round(const std::vector<Outcome>& ranked_first);

// The CLI's default --reserve: the CUDA context's device memory outside the caching allocator
// (docs/user-guide.md gives the sources). cuBLAS workspaces are not in it: recordings hold them.
inline constexpr Bytes kDefaultReserve{512ULL << 20};

struct Options {
  Bytes capacity;         // the device's memory
  Bytes reserve;          // taken off the capacity before simulating; must be below it
  unsigned jobs = 0;      // parallel simulations; 0: every core. Results do not depend on it.
  bool audit = false;     // RunOptions::audit for every run
};

struct Advice {
  std::string trace;
  Bytes capacity, peak_live;
  Bytes reserve, usable;  // usable = capacity - reserve: the budget of every run
  std::uint64_t events = 0;
  std::uint32_t iterations = 1;
  std::string initial_state;           // "empty" when a recorded state is simulated from empty; else ""
  Bytes recorded_reserved;             // bytes of that recorded state
  std::vector<Outcome> settings;       // ranked, policy keep
  std::vector<std::string> not_tried;  // settings that cannot change this trace, with why
  std::vector<Outcome> policies;       // ranked; tried only when no setting fits
  std::string policies_skipped;        // why no policy was tried although no setting fits
  std::string link;                    // the link the swap policies ran with
  std::string base_sets;               // `coopsim run` arguments every reproduction needs ("--initial-state empty")
  // The smallest budget with which PyTorch's defaults complete, by the minimum-budget search of
  // `coopsim minbudget` (policy keep, pytorch allocator; a multiple of its precision, max(1 MiB,
  // 0.1 % of the peak)), searched above `usable` when the defaults do not fit there and capped at
  // `usable` when they do; nullopt when no budget up to the search's limit completes.
  std::optional<Bytes> defaults_min_usable;

  [[nodiscard]] const Outcome* answer() const;    // the first fitting outcome, settings before policies
  [[nodiscard]] const Outcome* defaults() const;  // PyTorch's defaults under keep (always tried)
  [[nodiscard]] bool fits_with_settings() const;  // some allocator setting fits under policy keep
  [[nodiscard]] bool fits_with_policy() const;    // no setting fits, a recompute or swap policy does
  // usable - the defaults' peak reserved, when the defaults fit.
  [[nodiscard]] std::optional<Bytes> spare() const;
  // The defaults' minimum usable bytes - usable, when the defaults do not fit (and one was found).
  [[nodiscard]] std::optional<Bytes> short_by() const;
  // The smallest capacity that fits with the defaults: their minimum usable bytes + the reserve.
  [[nodiscard]] std::optional<Bytes> min_capacity() const;
};

// Checks a base config before any trace is read: ConfigError when it names another allocator, a
// policy, a budget or a pytorch parameter (advise chooses those), or fails check_config.
void check_base(const SimConfig& base);
// UsageError "--reserve" unless reserve < capacity (something must be left to simulate in).
void check_reserve(Bytes capacity, Bytes reserve);
// Simulates every candidate of `base` (check_base) on `trace` at the usable capacity (capacity -
// reserve; check_reserve first) on `jobs` threads, and searches the smallest budget for PyTorch's
// defaults.
Advice evaluate(const SimConfig& base, const Trace& trace, const Options& options);

// `coopsim run` arguments that reproduce an outcome: "-p coop -b 85899345920 --set ...".
std::string run_arguments(const Advice& a, const Outcome& o);
// "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", "the defaults (no PYTORCH_CUDA_ALLOC_CONF)",
// or the policy with its PyTorch counterpart; "" when nothing fits.
std::string use_line(const Advice& a);
// The first line of the text output, in PyTorch's terms: "fits with 3.10 GiB to spare ..." when
// the defaults fit, else "needs 2.40 GiB more with PyTorch's defaults ..." and what fits instead.
std::string verdict(const Advice& a);
nlohmann::ordered_json to_json(const Advice& a);
void write_text(std::ostream& out, const Advice& a);

}  // namespace coopsim::advise
