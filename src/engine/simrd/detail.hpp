// Private to src/engine/simrd/: the state of the simrd-profile simulation (see
// include/coopsim/engine/simrd.hpp). Upstream names in comments refer to
// uwsampl/dtr-prototype@eff53cc4 simrd/simrd/.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <vector>

#include "coopsim/engine/simrd.hpp"
#include "id_set.hpp"

namespace coopsim::simrd::detail {

inline constexpr std::uint32_t kNone = 0xffffffffU;

// State::material_ values; any non-zero one is Storage.material.
inline constexpr std::uint8_t kEvicted = 0, kMaterial = 1, kPinned = 2;

// Sums of op costs (ns) in the heuristics: Python's integers do not wrap, and sums of int64
// costs (ops of 6e18 ns) would; 128 bits hold any sum a trace can make.
__extension__ using Cost = __int128;

// tensor.py Operator: compute, output sizes (views 0), total_size = their sum.
// Its tensor lists are ranges of State::op_tensors_ (State::inputs_of / outputs_of).
struct SOp {
  std::int64_t compute = 0;
  std::uint32_t inputs_begin = 0, inputs_size = 0;    // tensor ids, as listed (duplicates kept)
  std::uint32_t outputs_begin = 0, outputs_size = 0;  // tensor ids
  std::int64_t total_size = 0;
};

// tensor.py Tensor: its parents are its op's inputs.
struct STensor {
  std::uint32_t op = kNone;
  std::uint32_t storage = kNone;
  std::int64_t size = 0;  // its own bytes (0 for a view)
  bool defined = false;
};

// optimization/region.py Region: evicted storages reachable from a base storage (children
// direction, or parents when reverse), and the material storages bounding them. Upstream keeps
// Python sets; only membership and sums are ever read (never an order), so both are vectors of
// distinct ids. The interior's membership, a paged bitmap over the State's page pool, is built
// when the region first absorbs another after a rebuild, and kept by later absorbs (a hub absorbs
// once per eviction next to it; most rebuilt regions absorb nothing before their next rebuild).
struct SRegion {
  std::vector<std::uint32_t> interior, frontier;
  Cost compute = 0;
  PagedIdSet members;  // the ids of `interior` when `indexed`
  bool indexed = false;
};

// Per storage, a list of storages that only grows by appends: all the lists in one array, each
// with room for the most it can get (counted from the trace before the run), so that a walk over
// the graph reads neighbouring memory rather than one heap block per storage.
class Adjacency {
 public:
  Adjacency() = default;
  // Room for capacity[s] entries in the list of s.
  explicit Adjacency(const std::vector<std::uint32_t>& capacity) : list_(capacity.size()), room_(capacity) {
    std::uint64_t at = 0;
    for (std::size_t s = 0; s < capacity.size(); ++s) {
      list_[s].begin = static_cast<std::uint32_t>(at);
      at += capacity[s];
      if (at > std::numeric_limits<std::uint32_t>::max()) {
        throw std::invalid_argument("simrd profile: the storage graph has more than 2^32 - 1 edges");
      }
    }
    data_.resize(at);
  }
  void append(std::uint32_t s, const std::vector<std::uint32_t>& more) {
    List& l = list_[s];
    if (more.size() > room_[s] - l.size) throw std::logic_error("simrd profile: storage graph over its count");
    std::copy(more.begin(), more.end(), data_.begin() + l.begin + l.size);
    l.size += static_cast<std::uint32_t>(more.size());
  }
  [[nodiscard]] std::span<const std::uint32_t> operator[](std::uint32_t s) const {
    return {data_.data() + list_[s].begin, list_[s].size};
  }

 private:
  struct List {
    std::uint32_t begin = 0, size = 0;  // together: one load per storage walked
  };
  std::vector<std::uint32_t> data_;
  std::vector<List> list_;
  std::vector<std::uint32_t> room_;
};

// Membership marks over ids 0..n-1 that are cleared in O(1): an id is marked when its stamp
// equals the current epoch. Used for the set operations of regions and neighbourhoods without
// hashing or allocating.
class Marks {
 public:
  // Starts a new, empty set over at least n ids.
  void reset(std::size_t n) {
    if (stamp_.size() < n) stamp_.resize(n, 0);
    if (++epoch_ == 0) {  // the stamps would repeat: clear them once every 2^32 sets
      std::fill(stamp_.begin(), stamp_.end(), 0);
      epoch_ = 1;
    }
  }
  // true when `id` was not marked yet (it is now).
  bool mark(std::uint32_t id) {
    if (stamp_[id] == epoch_) return false;
    stamp_[id] = epoch_;
    return true;
  }
  [[nodiscard]] bool marked(std::uint32_t id) const { return stamp_[id] == epoch_; }

  // mark() through a copy of the stamps' address and the epoch, for a tight loop that also
  // stores other 32-bit ids (through which the compiler would reload both): valid until the
  // next reset.
  class Raw {
   public:
    bool mark(std::uint32_t id) const {
      if (stamp_[id] == epoch_) return false;
      stamp_[id] = epoch_;
      return true;
    }

   private:
    friend class Marks;
    Raw(std::uint32_t* stamp, std::uint32_t epoch) : stamp_(stamp), epoch_(epoch) {}
    std::uint32_t* stamp_;
    std::uint32_t epoch_;
  };
  [[nodiscard]] Raw raw() { return Raw(stamp_.data(), epoch_); }

 private:
  std::vector<std::uint32_t> stamp_;
  std::uint32_t epoch_ = 0;
};

// tensor.py Storage, with the runtime's meta (last_access_int, region, region_rev, ecn).
struct SStorage {
  std::int64_t size = 0;
  bool pinned = false;
  bool created = false;
  std::uint32_t locks = 0;                                        // ref_int
  std::vector<std::uint32_t> tensors;                             // tensors[0] is the root
  double last_access = -std::numeric_limits<double>::infinity();  // last_access_int
  bool pooled = false;
  std::uint32_t pool_prev = kNone, pool_next = kNone;  // links of the pool, in pool order
  SRegion fwd, rev;
  std::uint32_t ecn = kNone;                  // eq-class node while evicted
  bool stale_fwd = false, stale_rev = false;  // a rebuild of the region is pending (flush_rebuilds)
  bool stale_made_material = false;           // became material: both regions and their frontiers' are pending
};

struct RunStop {
  Outcome outcome;
};

class State {
 public:
  State(const Trace& trace, const Config& config);
  Result run();

 private:
  // simrd.cpp: the runtime (RuntimeV2 / RuntimeV2EagerOptimized)
  void on_compute(std::uint32_t op_index);
  void on_constant(std::uint32_t storage);
  void on_release(std::uint32_t storage);
  void pin(std::uint32_t storage);
  void materialize(std::uint32_t t, bool remat);
  void compute(std::uint32_t t, bool remat);
  void free_until(std::int64_t size);
  void lock(std::uint32_t s);
  void unlock(std::uint32_t s);
  void make_evictable(std::uint32_t s);
  void make_unevictable(std::uint32_t s);
  void evict(std::uint32_t s);
  std::uint32_t new_op(std::int64_t compute, std::span<const std::uint32_t> inputs,
                       std::span<const std::uint32_t> outputs);
  // An op's lists: valid until the next new_op (op_tensors_ may move as it grows).
  [[nodiscard]] std::span<const std::uint32_t> inputs_of(const SOp& op) const {
    return {op_tensors_.data() + op.inputs_begin, op.inputs_size};
  }
  [[nodiscard]] std::span<const std::uint32_t> outputs_of(const SOp& op) const {
    return {op_tensors_.data() + op.outputs_begin, op.outputs_size};
  }
  void read_zero_byte_tensors();  // the importer's header key "simrd" (src/import/dtr_simrd.hpp)
  [[nodiscard]] std::uint32_t storage_of(std::uint32_t t) const {
    return root_[t] != kNone ? root_[t] : trace_.storage_of(t);
  }
  // graph.cpp: heuristic state and costs
  void rebuild(std::uint32_t base, bool reverse);
  void request_rebuild(std::uint32_t base, bool reverse);
  void flush_rebuilds();
  void absorb(std::uint32_t base, bool reverse, std::uint32_t evicted);
  void index(SRegion& r);  // r.members from r.interior, unless it holds them already
  void after_evict(std::uint32_t s);
  void after_compute(const std::vector<std::uint32_t>& remat_storages);
  void update_compute(std::uint32_t s);
  [[nodiscard]] double cost(std::uint32_t s);
  [[nodiscard]] std::uint32_t choose();
  // clock_ += cost, or an Error naming the event when the clock would pass 2^63 - 1 ns (as the
  // engine does; docs/limits.md, "Arithmetic").
  void advance(std::int64_t cost);
  // memory_ + size <= the budget, without overflow.
  [[nodiscard]] bool fits(std::int64_t size) const;
  static constexpr std::int64_t kMaxBytes = std::numeric_limits<std::int64_t>::max();
  std::uint32_t find(std::uint32_t n) const;
  [[nodiscard]] bool uses_regions() const;
  [[nodiscard]] bool uses_eq_classes() const;
  [[nodiscard]] bool keeps_interior(bool reverse) const;

  const Trace& trace_;
  Config config_;
  std::vector<SOp> ops_;
  // Every op's inputs then outputs, op after op; and on_compute's lists before new_op copies them.
  std::vector<std::uint32_t> op_tensors_, op_inputs_, op_outputs_;
  std::vector<STensor> tensors_;    // indexed by trace tensor index
  std::vector<SStorage> storages_;  // indexed by the storage root's trace tensor index
  // Per storage, apart from SStorage: what every step of a region walk reads.
  // Storage.material: kEvicted, kMaterial, or kPinned (material for good; see State::pin).
  std::vector<std::uint8_t> material_;
  std::vector<Cost> compute_;  // Storage.get_compute: sum over the distinct ops of its tensors
  // The storages of the tensors computed from this storage's tensors (children direction) and of
  // the inputs of the ops that computed its tensors (parents direction): Storage.
  // evicted_neighbors and the steps of Region.rebuild, per storage rather than per tensor.
  // Repeats within one op are dropped; repeats across ops are kept (every use is a set insert).
  Adjacency children_, parents_;
  // The capacities of children_ and parents_ (count_edges), kept only until they are built.
  struct EdgeCounts {
    std::vector<std::uint32_t> children, parents;
  };
  [[nodiscard]] EdgeCounts count_edges();
  // storage_pool, in the order storages became evictable: a list linked through the storages
  // (SStorage::pool_prev / pool_next), so joining and leaving it allocate nothing.
  std::uint32_t pool_head_ = kNone, pool_tail_ = kNone;
  std::vector<std::uint32_t> producer_;  // trace tensor -> trace op producing it (kNone: constant)
  // Zero-byte tensors the trace's ops leave out: the ops' full lists, the storage roots of views
  // of zero-byte storages, and when those storages die (event index, root).
  std::vector<std::vector<std::uint32_t>> full_inputs_, full_outputs_;
  std::vector<std::uint8_t> has_full_;
  std::vector<std::uint32_t> root_;
  std::vector<std::pair<std::size_t, std::uint32_t>> zero_frees_;
  std::vector<std::uint32_t> order_;    // storages in creation order (R9 without the header)
  std::vector<std::uint32_t> outputs_;  // R9: referenced tensors in simrd's order (header)
  bool has_outputs_ = false;
  std::vector<std::uint8_t> released_;
  mutable std::vector<std::uint32_t> uf_parent_;  // eq-class nodes (optimization/eqclass.py)
  std::vector<Cost> uf_value_;
  // Scratch space of graph.cpp, kept so that the hot path does not allocate.
  Marks marks_, marks2_;
  BitPages pages_;  // the pages of every SRegion::members
  std::vector<std::uint32_t> stack_, scratch_, scratch2_;
  std::vector<std::uint32_t> undefined_;                     // materialize: a stack over its nested calls
  std::vector<std::uint32_t> dup_, fresh_, remat_storages_;  // compute
  std::vector<std::uint32_t> ops_seen_;                      // update_compute
  std::vector<std::pair<std::uint32_t, bool>> stale_;        // requested rebuilds (storage, reverse)
  std::vector<std::uint32_t> made_material_;                 // storages made material since the last flush
  std::int64_t clock_ = 1;                                   // RuntimeBase: clock starts at 1
  std::int64_t memory_ = 0;
  double remat_limit_ = std::numeric_limits<double>::infinity();
  std::size_t event_ = 0;
  std::int64_t requested_ = 0;
  Result result_;
};

}  // namespace coopsim::simrd::detail
