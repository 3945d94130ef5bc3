// Policies decide; the engine acts. A policy sees the simulation only through MemoryView
// (read-only) and answers with Actions, which the engine validates and carries out on its
// streams. Contract: never name a tensor that is pinned or not resident; an empty answer to
// on_alloc_failure means "nothing more can be done" and the engine reports OOM (unless
// transfers already in flight will free memory, which the engine waits for first).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "coopsim/alloc/allocator.hpp"
#include "coopsim/model/link.hpp"
#include "coopsim/base/params.hpp"
#include "coopsim/model/remat_graph.hpp"
#include "coopsim/policy/remat/eviction_score.hpp"
#include "coopsim/model/trace.hpp"

namespace coopsim {

enum class Residency : std::uint8_t {
  NotAllocated,  // before its first alloc, or after its free
  Resident,
  SwappingOut,  // D2H copy in flight; device memory still held
  SwappedOut,   // only the host copy exists
  SwappingIn,   // H2D copy in flight; device memory held
  Evicted,      // recompute policies: no memory; the producer can recompute it
};
std::string_view to_string(Residency r);

class MemoryView {
 public:
  virtual ~MemoryView() = default;
  [[nodiscard]] virtual SimTime now() const = 0;
  [[nodiscard]] virtual const Trace& trace() const = 0;
  [[nodiscard]] virtual EventId event_index() const = 0;  // event being processed
  [[nodiscard]] virtual Residency residency(TensorId storage) const = 0;
  [[nodiscard]] virtual bool pinned(TensorId storage) const = 0;  // used by the current event
  [[nodiscard]] virtual std::optional<Block> block(TensorId storage) const = 0;
  [[nodiscard]] virtual AllocatorStats allocator_stats() const = 0;
  [[nodiscard]] virtual const Allocator& allocator() const = 0;
  [[nodiscard]] virtual Bytes budget() const = 0;
  [[nodiscard]] virtual const LinkModel& link() const = 0;  // the engine's host<->device link
  // The rematerialization graph, under a recompute policy (Policy::remat_options()); else null.
  [[nodiscard]] virtual const RematGraph* remat() const { return nullptr; }
  // Under a recompute policy: the value a storage holds now (kNoValue when not allocated).
  [[nodiscard]] virtual ValueId current_value(TensorId storage) const {
    (void)storage;
    return kNoValue;
  }
  // Counts work done by a policy's eviction search (pieces or tensors examined): the
  // deterministic search-latency figure of the report.
  virtual void count_scanned(std::uint64_t n) const = 0;
  // engine.residency_checks (on under --paranoid): policies cross-check their fast searches against
  // the plain ones and throw InvariantError when they differ.
  [[nodiscard]] virtual bool cross_check() const { return false; }
};

struct Action {
  enum class Kind : std::uint8_t {
    SwapOut,  // `tensor`: copy to the host, then free its block
    SwapIn,   // `tensor`: copy back
    Evict,    // `value`: free its block; it stays recomputable
  } kind = Kind::SwapOut;
  // Swaps name a storage; under a recompute policy (hybrids) the storage's current value moves.
  TensorId tensor{};
  ValueId value = kNoValue;
  static Action evict(ValueId v) { return Action{Kind::Evict, TensorId{}, v}; }
};

// One planned swap of an offline swap policy (autoswap, vdnn): tensor, the event index after
// which it is swapped out, the one at which the swap-in is issued, and its next use.
struct SwapPlanEntry {
  TensorId tensor;
  std::uint32_t out_at, in_at, use_at;  // trace event indices
};

// How a recompute policy wants the engine to run the trace (DTR's runtime rules and
// Coop's in-place and pinning rules: docs/models/dtr-dte.md, docs/models/coop.md).
enum class DeallocMode : std::uint8_t {
  Eager,      // on the trace's free: evict (memory freed, still recomputable) - the default
  Banish,     // free for good; resident children become unevictable (evicted ones keep it)
  NoDealloc,  // never free on release; the heuristic may evict it later
};
enum class InPlaceMode : std::uint8_t {
  Recomputable,  // Coop's fbip: the update keeps the address; the old value stays recomputable
  CopyOnWrite,   // every in-place update gets a new block; the old value is released
};
struct RematOptions {
  DeallocMode dealloc = DeallocMode::Eager;
  InPlaceMode inplace = InPlaceMode::CopyOnWrite;
  double thrash_limit = 2.0;  // stop when recompute time reaches (limit - 1) x the trace's op
                              // time, i.e. compute overhead `limit`; 0 = no limit
};
std::string_view to_string(DeallocMode m);
std::string_view to_string(InPlaceMode m);
// Shared parameter docs and parsing for the three options (keys dealloc, inplace, thrash_limit).
std::vector<ParamDoc> remat_option_docs(InPlaceMode default_inplace);
RematOptions parse_remat_options(const Params& p);

// The engine's execution models (src/engine/): how it runs the trace for a policy.
enum class ExecutionModel : std::uint8_t {
  Swap,          // storages resident, on the host or in flight (policies without remat options)
  Remat,         // values resident, evicted or recomputed under DTR's runtime rules (remat_options())
  SimrdRuntime,  // DTR's reference simulator's runtime: one memory counter, per-storage costs
};
// What the SimrdRuntime model runs by: simrd's heuristic and its overhead cut (remat_limit =
// baseline x (limit - 1); 0 = none).
struct RuntimeRules {
  EvictionScore heuristic = EvictionScore::Dtr;
  double overhead_limit = 2.0;
};
// The heuristics DTR's reference simulator defines deterministically (uwsampl/dtr-prototype
// @eff53cc4 simrd/simrd/heuristic/*.py; its random one draws from Python's generator).
[[nodiscard]] bool simrd_runtime_supports(EvictionScore h);

class Policy {
 public:
  virtual ~Policy() = default;
  // Once, before the simulation: offline policies plan here.
  virtual void prepare(const MemoryView&) {}
  // An allocation of `request` failed. Return what to do to make room (may be empty).
  [[nodiscard]] virtual std::vector<Action> on_alloc_failure(const AllocRequest& request, const MemoryView& view) = 0;
  // After every trace event: proactive transfers (prefetch, early swap-out).
  [[nodiscard]] virtual std::vector<Action> after_event(const MemoryView&) { return {}; }
  // Recompute policies return their runtime options: the engine then keeps a RematGraph and
  // follows DTR's rules (pinning, recursive rematerialization, eager eviction, thrash limit).
  [[nodiscard]] virtual std::optional<RematOptions> remat_options() const { return std::nullopt; }
  // The execution model the engine runs this policy under: by default Remat for policies with
  // remat options, Swap for the others.
  [[nodiscard]] virtual ExecutionModel execution_model() const {
    return remat_options() ? ExecutionModel::Remat : ExecutionModel::Swap;
  }
  // ExecutionModel::SimrdRuntime: the rules it runs by.
  [[nodiscard]] virtual RuntimeRules runtime_rules() const { return RuntimeRules{}; }
  // Placement hint for an allocation of `storage`: true asks the allocator for the high end of
  // the chosen hole (Coop's cheap tensors). Allocators without address placement ignore it.
  [[nodiscard]] virtual bool place_high(TensorId storage, const MemoryView&) const {
    (void)storage;
    return false;
  }
  // Whether the policy's decisions depend on which tensors ops read (every policy that evicts,
  // swaps or recomputes). On a trace with no dataflow such a policy would evict for free, so
  // run_simulation refuses it unless engine.allow_no_dataflow is set.
  [[nodiscard]] virtual bool needs_dataflow() const { return true; }
};

}  // namespace coopsim
