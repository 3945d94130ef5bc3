// Shared machinery of the hybrid swap/recompute policies (pooch, capuchin): the idle gaps a
// tensor could leave memory in, what each action costs on the model (transfer time not hidden
// by compute for a swap; the ops to re-run for a recompute), the load curve those choices
// leave, a re-simulation on serial copy lanes to confirm a plan, and the runtime executor that
// turns a plan into SwapOut/SwapIn/Evict actions.
//
// Model (the engine's; docs/models/pooch.md): event times from a stall-free
// simulation (swap_detail::model_event_times); a swap of a gap frees the tensor's bytes once its
// device-to-host copy ends and takes them again when the host-to-device copy starts; the
// transfer is free when out + in fit in the gap, else the excess is a stall. A recompute frees
// the bytes right after the use that opens the gap and takes them again at the use that closes
// it; it costs the producing op plus, recursively, the producers of its inputs that will not
// be in memory then (freed by the trace, or themselves chosen for recompute).
#pragma once

#include <cstdint>
#include <set>
#include <span>
#include <unordered_map>
#include <vector>

#include "coopsim/model/link.hpp"
#include "coopsim/policy/policy.hpp"
#include "coopsim/policy/remat/victim.hpp"
#include "peak_tree.hpp"
#include "swap_schedule.hpp"

namespace coopsim::hybrid_detail {

enum class Choice : std::uint8_t { Keep, Swap, Recompute };

struct Gap {
  std::uint32_t tensor = 0;           // storage
  std::uint32_t last_use = 0;         // event index of the use before the gap
  std::uint32_t next_use = 0;         // event index of the use after it
  std::uint32_t producer = kNoIndex;  // event index of the compute that wrote the value, if any
  Bytes size;
  SimTime idle{0};            // modelled time between the two uses
  SimTime out{0}, in{0};      // transfer times on the planning link
  bool recomputable = false;  // the value can be evicted and recomputed by the engine
  Choice choice = Choice::Keep;
  std::uint32_t in_at = 0;  // swaps: the copy in is issued after this event (set by simulate)
  SimTime cost{0};          // estimated added time of the choice (set when chosen)
};

// The recompute choices among the gaps chosen so far, by storage: chain_cost asks, for each
// input of a producer it would re-run, whether an earlier choice recomputes that input at the
// time (a pass over every chosen gap per input made PoocH's planning quadratic). Callers add each
// gap as it is chosen or turned into a recompute, so the index says what `chosen` says.
class ChosenRecomputes {
 public:
  explicit ChosenRecomputes(const std::vector<Gap>& chosen);
  void add(const Gap& g);  // nothing unless g.choice == Choice::Recompute
  // Some chosen recompute gap of `storage` has last_use < at <= next_use.
  [[nodiscard]] bool out_at(std::uint32_t storage, std::uint32_t at) const;
  // Changes whenever a recompute gap is added: a recompute cost computed at one version holds
  // for as long as the version stays (the planner's other inputs never change).
  [[nodiscard]] std::uint64_t version() const { return version_; }

 private:
  std::uint64_t version_ = 0;
  std::unordered_map<std::uint32_t, std::vector<std::pair<std::uint32_t, std::uint32_t>>> gaps_;
};

class HybridPlanner {
 public:
  HybridPlanner(const Trace& trace, const LinkModel& link, Bytes smallest);

  // Gaps of every storage of at least `smallest` bytes within [b, e), in (last_use, tensor) order.
  [[nodiscard]] std::vector<Gap> gaps(std::size_t b, std::size_t e) const;
  // Estimated stall of swapping gap g: max(0, out + in - idle).
  [[nodiscard]] static SimTime swap_stall(const Gap& g);
  // Estimated recompute time of gap g given the gaps already chosen (chained recomputes).
  [[nodiscard]] SimTime recompute_cost(const Gap& g, const ChosenRecomputes& chosen) const;
  // The requested-bytes load after each event of [b, e) with `chosen` applied, swaps timed on
  // serial lanes (`serial`; sets each swap's in_at) or each on its own.
  [[nodiscard]] std::vector<std::uint64_t> simulate(std::size_t b, std::size_t e, std::vector<Gap>& chosen,
                                                    bool serial) const;
  // Lowers `load` (the events from b on) for one choice (unserialised timing), for the greedy loops.
  void apply(const Gap& g, std::vector<std::uint64_t>& load, std::size_t b) const;
  // The same on a PeakTree built over that load (local indices from 0 = event b).
  void apply(const Gap& g, swap_detail::PeakTree& load, std::size_t b) const;
  // Whether taking gap g out of memory by `choice` lowers the load after event `at`.
  [[nodiscard]] bool covers(const Gap& g, Choice choice, std::size_t at) const;
  // First event index in [b, e) starting at or after time t (e when none).
  [[nodiscard]] std::size_t index_at(SimTime t, std::size_t b, std::size_t e) const;

  [[nodiscard]] const swap_detail::UseIndex& uses() const { return uses_; }
  [[nodiscard]] const swap_detail::EventTimes& times() const { return times_; }
  [[nodiscard]] const std::vector<std::uint64_t>& base_load() const { return load_; }

 private:
  // [from, to) event range over which gap g's bytes are out of memory, unserialised.
  [[nodiscard]] std::pair<std::size_t, std::size_t> absence(const Gap& g) const;
  SimTime chain_cost(std::uint32_t producer_event, std::uint32_t at, const ChosenRecomputes& chosen, int depth) const;

  const Trace& trace_;
  LinkModel link_;
  Bytes smallest_;
  swap_detail::UseIndex uses_;
  swap_detail::EventTimes times_;
  std::vector<std::uint64_t> load_;
  std::vector<std::uint32_t> free_at_;               // per storage: event index of its trace free (or none)
  std::vector<std::uint8_t> evictable_;              // per storage: its values can be recomputed
  std::vector<std::vector<std::uint32_t>> writers_;  // per storage: compute events writing it
};

// What PoocH's and Capuchin's greedy loops share over one iteration [b, e): its gaps, the ones
// already taken, the chosen recomputes, the load as a PeakTree (apply + peak in O(log n)), and
// each gap's recompute cost, reused while no recompute was chosen since.
class GreedyState {
 public:
  // `load` is the iteration's load (non-empty); `chosen` the gaps chosen in earlier rounds.
  GreedyState(const HybridPlanner& planner, std::size_t b, std::size_t e, const std::vector<std::uint64_t>& load,
              const std::vector<Gap>& chosen);
  [[nodiscard]] const std::vector<Gap>& gaps() const { return all_; }
  // The gaps opened before event `at` (a prefix of gaps(), which is in last_use order): the only
  // ones that can cover it.
  [[nodiscard]] std::span<const Gap> opened_before(std::size_t at) const;
  [[nodiscard]] bool taken(const Gap& g) const { return taken_.count({g.tensor, g.last_use}) != 0; }
  // The current peak of the load: value and the event index holding it (first on ties).
  [[nodiscard]] std::pair<std::uint64_t, std::size_t> peak() const;
  // planner.recompute_cost(g, chosen recomputes) for a gap of gaps().
  [[nodiscard]] SimTime recompute_cost(const Gap& g);
  // Applies g (its choice set) to the load and appends it to `chosen`.
  void take(const Gap& g, std::vector<Gap>& chosen);
  // Writes the load back.
  void store(std::vector<std::uint64_t>& load) { load_.store(load); }

 private:
  const HybridPlanner& planner_;
  std::size_t b_;
  std::vector<Gap> all_;
  std::set<std::pair<std::uint32_t, std::uint32_t>> taken_;
  ChosenRecomputes recomputes_;
  swap_detail::PeakTree load_;
  std::vector<SimTime> cost_;
  std::vector<std::uint64_t> cost_version_;
};

// Peak of `load` over [0, n): value and index (first on ties).
std::pair<std::uint64_t, std::size_t> peak_of(const std::vector<std::uint64_t>& load);

// Runtime: the planned swaps (SwapSchedule) plus evictions right after the use that opens a
// recompute gap; on a failed allocation the MSPS victim, else the Belady swap-out.
class HybridExecutor {
 public:
  void set(const std::vector<Gap>& chosen);
  [[nodiscard]] std::vector<Action> due(const MemoryView& view);
  [[nodiscard]] std::vector<Action> make_room(const swap_detail::UseIndex& uses, const MemoryView& view);
  [[nodiscard]] const std::vector<Gap>& plan() const { return plan_; }

 private:
  std::vector<Gap> plan_;
  swap_detail::SwapSchedule swaps_;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> evictions_;  // (after event, storage), sorted
  std::size_t next_eviction_ = 0;
  SeededDraws draws_{0};  // find_victim's interface; MSPS draws nothing
};

}  // namespace coopsim::hybrid_detail
