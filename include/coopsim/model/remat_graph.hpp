// The rematerialization graph the engine keeps under recompute policies (DTR's runtime model,
// docs/models/dtr-dte.md, with Coop's bookkeeping: docs/models/coop.md). Model-layer data derived
// from the trace as it executes: the engine's remat residency (src/engine/remat_executor.cpp)
// writes it, policies read it, and neither layer owns the other's half.
//
//  * A RematValue is one version of a storage's contents. A storage gets a new value when it is
//    allocated and, for values that already have a producer, when an op updates it in place:
//    under recomputable in-place (Coop's "fbip") the new value keeps the block and the old
//    one becomes an evicted, released value that its original producer can still recompute;
//    under copy-on-write the new value gets a new block and the old one is released.
//  * An RematExecution is one run of a trace op: the values it read and wrote. Rematerializing a
//    value re-runs its producer with exactly those input values, so histories stay exact.
//  * The logical clock advances by every executed op's cost, recomputations included;
//    staleness = clock - last access, floored at 1 ns so that h stays finite.
//  * Eq-class union-find: evicting a value merges it with the evicted inputs and outputs
//    of its producer; the class root accumulates the members' compute costs; (re)computing a
//    value subtracts its cost from its root and makes it a singleton again (upstream's rule,
//    approximate by design: members that pointed through it keep their stale links).
//  * Eviction searches read eq-class costs thousands of times per run: each value's cost is
//    cached and invalidated exactly when something it was computed from changes (the state or
//    compute of a value in its producer's inputs and outputs, pushed through the executions;
//    the cost or root of a class it read, through one-shot watch lists on the class root).
//    verify_eq_cache(true) (engine.residency_checks, --paranoid) recomputes every cached cost it hands out and throws
//    on a difference.
//  * Resident values are indexed by block address twice: all of them (resident_at) and the
//    eviction candidates in address order (candidates(): flat sorted blocks, so a search is a
//    walk over contiguous memory).
//
// Policies read this through MemoryView::remat(); only the engine changes it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <optional>
#include <vector>

#include "coopsim/base/addr_map.hpp"
#include "coopsim/model/block.hpp"
#include "coopsim/base/flat_ordered_map.hpp"
#include "coopsim/model/trace.hpp"
#include "coopsim/base/units.hpp"

namespace coopsim {

enum class ValueState : std::uint8_t {
  Resident,     // holds a block
  Evicted,      // no memory; its producer can recompute it
  Gone,         // freed for good (banished, or released without a producer)
  SwappingOut,  // hybrid policies: copy to the host in flight; still holds its block
  SwappedOut,   // only the host copy exists (swapped in, not recomputed, when needed)
  SwappingIn,   // copy back in flight into a new block
};

// A value of the graph: indexes RematGraph's values as TensorId indexes Trace::tensors.
enum class ValueId : std::uint32_t {};
constexpr std::uint32_t index_of(ValueId id) { return static_cast<std::uint32_t>(id); }
inline constexpr ValueId kNoValue{kNoIndex};  // e.g. the current value of a storage not allocated
// An execution of the graph (one run of a trace op, recomputations included).
enum class ExecutionId : std::uint32_t {};
constexpr std::uint32_t index_of(ExecutionId id) { return static_cast<std::uint32_t>(id); }
inline constexpr ExecutionId kNoExecution{kNoIndex};

struct RematValue {
  TensorId storage{kNoIndex};  // the storage root
  Bytes size;
  ExecutionId producer = kNoExecution;  // execution that computed it; kNoExecution: none yet / constant
  ValueState state = ValueState::Resident;
  bool released = false;        // no external reference left (the trace freed or replaced it)
  bool unevictable = false;     // constants, random outputs, mutated state, accumulated gradients
  std::uint32_t pins = 0;       // inputs of the op being executed or recomputed
  SimTime last_access{0};       // logical clock at its last use or (re)computation
  SimTime compute{0};           // its producer's cost (0 without one)
  double compute_per_byte = 0;  // compute ns / size bytes (0 for 0 bytes): eviction searches' bounds
  Block block;                  // valid while Resident
  std::uint32_t recomputes = 0;
};

struct RematExecution {
  OpId op{kNoIndex};
  SimTime cost{0};
  std::vector<ValueId> inputs, outputs;
};

// What a block of eviction candidates (RematGraph::candidates()) tells a search without reading
// it: lower bounds over every value the block holds (and some it held: the summary only absorbs,
// see FlatOrderedMap). min_compute_per_byte bounds eq-class cost / size: a value enters with its
// compute (an eq-class cost is never less), a search that reads the whole block may raise it to
// the cached eq-class costs (candidate_cost_per_byte), and when such a cost is invalidated or a
// compute changes the block absorbs the compute again. last_access only grows, so an older
// oldest_access stays a bound.
struct CandidateBound {
  double min_compute_per_byte = std::numeric_limits<double>::infinity();
  SimTime oldest_access = SimTime::max();
  static CandidateBound of(const RematValue& x) { return CandidateBound{x.compute_per_byte, x.last_access}; }
  void absorb(const CandidateBound& o) {
    min_compute_per_byte = std::min(min_compute_per_byte, o.min_compute_per_byte);
    oldest_access = std::min(oldest_access, o.oldest_access);
  }
};

class RematGraph {
 public:
  // ---- read side (policies) ----
  [[nodiscard]] const RematValue& value(ValueId v) const { return values_[index_of(v)]; }
  [[nodiscard]] const RematExecution& execution(ExecutionId e) const { return executions_[index_of(e)]; }
  [[nodiscard]] std::size_t value_count() const { return values_.size(); }
  [[nodiscard]] SimTime clock() const { return clock_; }
  // Consumers: executions that read the value.
  [[nodiscard]] const std::vector<ExecutionId>& consumers(ValueId v) const { return consumers_[index_of(v)]; }

  // Resident, unpinned, not unevictable, and with a producer to recompute it.
  [[nodiscard]] bool evictable(ValueId v) const {
    const RematValue& x = value(v);
    return x.state == ValueState::Resident && x.pins == 0 && !x.unevictable && x.producer != kNoExecution;
  }
  [[nodiscard]] SimTime staleness(ValueId v) const {
    const SimTime s = clock_ - value(v).last_access;
    return s < SimTime{1} ? SimTime{1} : s;
  }
  // Values holding a block (resident, or with a copy in flight), by block address.
  [[nodiscard]] std::size_t holder_count() const { return holders_.size(); }
  [[nodiscard]] std::optional<ValueId> resident_at(std::uint64_t addr) const {
    const ValueId* v = holders_.find(addr);
    if (v == nullptr) return std::nullopt;
    return *v;
  }
  // Every value holding a block, in address order (the scan order of per-tensor loops). O(n)
  // while the holders are kept in order (keep_holders_ordered), else O(n log n).
  [[nodiscard]] std::vector<std::pair<std::uint64_t, ValueId>> holders_by_address() const;
  // Keep an ordered copy of the holders beside the hash map: the residency checks list them in
  // address order after every event, and copying and sorting the hash map there took four
  // fifths of a checked run's time. Off by default: a plain run never lists them in order.
  void keep_holders_ordered(bool on);
  // The values evictable() but for pins (resident, not unevictable, with a producer), by block
  // address: what eviction searches walk.
  [[nodiscard]] const FlatOrderedMap<ValueId, CandidateBound>& candidates() const { return candidates_; }
  // A candidate's term in its block's CandidateBound::min_compute_per_byte: its cached eq-class
  // cost per byte when the cache holds one (the block then absorbs its compute again when that
  // cost is invalidated), else its compute per byte. Computes no cost.
  [[nodiscard]] double candidate_cost_per_byte(ValueId v) const;

  // Costs, in ns of compute (see the header comment and docs/models/dtr-dte.md).
  // Coop / DTR prototype eq-class approximation: c(t) + sum over evicted inputs and outputs u
  // of t's producer of max(cost of u's class, c(u)).
  // The cached cost is read inline (searches read it once per candidate); a miss, or the
  // cache's self-check (verify_eq_cache), goes to the out-of-line path.
  [[nodiscard]] double eq_class_cost(ValueId v) const {
    const std::uint32_t i = index_of(v);
    if (eq_valid_[i] != 0 && !verify_eq_) return eq_cost_[i];
    return eq_class_cost_uncached(v);
  }
  // Hints the cache lines a search will read for v (its record and cached cost): searches walk
  // the candidates in address order, whose values lie anywhere in memory.
  void prefetch(ValueId v) const {
    __builtin_prefetch(&values_[index_of(v)]);
    __builtin_prefetch(&eq_cost_[index_of(v)]);
    __builtin_prefetch(&eq_valid_[index_of(v)]);
  }
  // Recompute every cached eq-class cost handed out, and repeat every needed_by_evicted and
  // lock_dependents walk without the reach memos, and throw std::logic_error on a difference.
  void verify_eq_cache(bool on) { verify_eq_ = on; }
  // h_DTR's full evicted neighbourhood: c(t) + c(evicted ancestors reachable through evicted
  // values) + c(evicted descendants reachable through evicted values); each value once.
  // `scanned` (optional) counts the values visited.
  [[nodiscard]] double neighbourhood_cost(ValueId v, std::uint64_t* scanned = nullptr) const;
  // c(t) + c(evicted ancestors): what rematerializing t would recompute (MSPS).
  [[nodiscard]] double ancestor_cost(ValueId v, std::uint64_t* scanned = nullptr) const;

  // Some evicted descendant, reachable through evicted values, still has an external
  // reference: freeing v for good would make it impossible to recompute.
  [[nodiscard]] bool needed_by_evicted(ValueId v) const;
  // v's producer can run again: it exists, is not random, and none of its inputs is gone.
  [[nodiscard]] bool recomputable(ValueId v, const Trace& trace) const;

  // ---- write side (engine) ----
  ValueId add_value(TensorId storage, Bytes size, bool unevictable);
  // Executions are only named by RematValue::producer.
  ExecutionId add_execution(OpId op, SimTime cost, std::vector<ValueId> inputs, std::vector<ValueId> outputs);
  void advance(SimTime cost) { clock_ += cost; }
  void touch(ValueId v) { at(v).last_access = clock_; }
  void pin(ValueId v) { ++at(v).pins; }
  void unpin(ValueId v) { --at(v).pins; }
  void set_unevictable(ValueId v);
  void set_released(ValueId v);
  void set_producer(ValueId v, ExecutionId execution);
  void place(ValueId v, const Block& b);          // -> Resident with block b
  void evict(ValueId v);                          // Resident -> Evicted (+ eq-class merge)
  void mark_evicted_without_memory(ValueId v);    // Resident -> Evicted; block handed on
  void drop(ValueId v);                           // -> Gone (block, if any, already freed)
  void begin_swap_out(ValueId v);                 // Resident -> SwappingOut (keeps its block)
  void finish_swap_out(ValueId v);                // SwappingOut -> SwappedOut (block freed)
  void begin_swap_in(ValueId v, const Block& b);  // SwappedOut -> SwappingIn with block b
  void finish_swap_in(ValueId v);                 // SwappingIn -> Resident
  void computed(ValueId v);                       // eq-class update after (re)compute
  // v is gone for good: every resident value whose recomputation would need it (directly, or
  // through evicted values) becomes unevictable.
  void lock_dependents(ValueId v);

 private:
  RematValue& at(ValueId v) { return values_[index_of(v)]; }
  // Every state change goes through here: it keeps the address indexes and the eq-cost cache.
  void set_state(ValueId v, ValueState s);
  void sync_candidate(ValueId v);
  [[nodiscard]] double compute_eq_class_cost(ValueId v, bool watch) const;
  // eq_class_cost past the inline hit: fills the cache, or checks a cached cost (verify_eq_).
  [[nodiscard]] double eq_class_cost_uncached(ValueId v) const;
  // The eq-cost cache (remat_graph_eq_cache.cpp).
  void invalidate_eq(ValueId v) const;
  void changed_value(ValueId u);  // u's evicted-ness or compute changed: its readers' costs are stale
  void changed_class(ValueId r);  // class root r's cost or members changed
  void watch_class(ValueId root, ValueId reader) const;
  ValueId find_root(ValueId v) const;
  void merge(ValueId a, ValueId b);
  // The reach memos (remat_graph_reach.cpp): z's evicted-ness, state or consumers changed, so the
  // memos of the values whose walks reach z are dropped.
  void forget_reach_above(ValueId z) const;
  // holders_ (and ordered_holders_) changes: false when `addr` already has a holder.
  bool add_holder(std::uint64_t addr, ValueId v);
  void remove_holder(std::uint64_t addr);
  [[nodiscard]] bool needed_by_evicted_memo(ValueId v) const;
  // The plain walk (no memos) from v: some evicted value still referenced is reachable
  // (`unlocked` false), or some reachable resident or swapped value is not unevictable (true).
  [[nodiscard]] bool plain_walk_finds(ValueId v, bool unlocked) const;

  std::vector<RematValue> values_;
  std::vector<RematExecution> executions_;
  std::vector<std::vector<ExecutionId>> consumers_;  // per value: executions reading it
  std::vector<std::vector<ExecutionId>> writers_;    // per value: executions listing it as an output
  std::vector<std::vector<ValueId>> produced_;       // per execution: values it was made producer of
  detail::AddrMap<ValueId> holders_;                 // block address -> value holding it
  bool holders_ordered_ = false;
  FlatOrderedMap<ValueId> ordered_holders_;  // the same, in address order, when holders_ordered_
  FlatOrderedMap<ValueId, CandidateBound> candidates_;
  std::vector<std::uint8_t> in_candidates_;
  // Eq-cost cache: value, validity, generation (bumped on invalidation; watch entries of an
  // older generation are stale), and per class root a singly linked list of watch entries.
  struct Watch {
    ValueId reader;
    std::uint32_t generation;
    std::uint32_t next;
  };
  mutable std::vector<double> eq_cost_;
  mutable std::vector<std::uint8_t> eq_valid_;
  mutable std::vector<std::uint8_t> eq_in_bound_;  // a block bound holds the cached cost (candidate_cost_per_byte)
  mutable std::vector<std::uint32_t> eq_generation_;
  mutable std::vector<std::uint32_t> watch_head_;
  mutable std::vector<Watch> watches_;
  mutable std::uint32_t watch_free_ = kNoIndex;
  bool verify_eq_ = false;
  SimTime clock_{0};
  mutable std::vector<ValueId> uf_parent_;  // path halving in find_root
  std::vector<double> uf_cost_;             // class roots: summed compute (ns); a double so
                                            // that sums of huge costs cannot wrap (exact
                                            // below 2^53 ns, 104 days)
  // Reach memos of needed_by_evicted and lock_dependents (remat_graph_reach.cpp), per value:
  // kReachNotNeeded (its walk found no evicted value still referenced), kReachLocked (every
  // value its walk reaches is locked). The walks from values with a memo are skipped, so the
  // repeated walks over the same released, evicted region (state settled once per parameter
  // update) cost once.
  static constexpr std::uint8_t kReachNotNeeded = 1;
  static constexpr std::uint8_t kReachLocked = 2;
  mutable std::vector<std::uint8_t> reach_memo_;
  mutable std::vector<ValueId> reach_touched_;
  mutable std::vector<std::uint32_t> visit_mark_;  // neighbourhood searches
  mutable std::uint32_t visit_epoch_ = 0;
  mutable std::vector<ValueId> stack_;
};

}  // namespace coopsim
