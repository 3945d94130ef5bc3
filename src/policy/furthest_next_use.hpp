// The Belady fallback of autoswap and vdnn (swap_detail::furthest_next_use_swap_out's rule: the
// resident, unpinned storage whose next use is furthest away, never used again counting as
// furthest, lowest index on ties) without a pass over every tensor of the trace per failed
// allocation: a max-heap of (next use, storage) kept up to date from the trace's own events.
//
// Entries are pushed when a storage may have become a candidate or its next use changed: at its
// Alloc events and uses (Access events, Compute inputs and outputs), which are read from the trace
// up to (not including) the event being processed, once a swap-in the policy issued has started
// (until then the storage waits in a short list: the swap-in's own allocation can be the one that
// fails), and for the blocks of the recorded initial state. An entry pushed at event i holds next_use(storage, i);
// it is current as long as its key lies after the event being processed (a later use pushed a
// newer one otherwise), so stale entries are dropped when they surface. A current entry whose
// storage is not resident is dropped too (it comes back with the event that makes it resident),
// except while it is being swapped in or is pinned: those are set aside and put back.
#pragma once

#include <cstdint>
#include <vector>

#include "coopsim/policy/policy.hpp"
#include "swap_schedule.hpp"

namespace coopsim::swap_detail {

class FurthestNextUse {
 public:
  FurthestNextUse(const UseIndex& uses, const Trace& trace);
  // A swap-in the policy issued: the storage is a candidate again once its copy has started.
  void note_swap_in(std::uint32_t storage);
  // The swap-out furthest_next_use_swap_out would return (checked against it when
  // view.cross_check()); counts the same scanned figure (every tensor of the trace).
  [[nodiscard]] std::vector<Action> choose(const MemoryView& view);

 private:
  struct Entry {
    std::uint64_t next = 0;  // next use, or UINT64_MAX for none
    std::uint32_t storage = 0;
  };
  void push(std::uint32_t storage, std::size_t after);
  void push_event(std::size_t i);  // the storages trace event i allocates or uses
  void catch_up(std::size_t now);  // the trace's events [done_, now)
  void admit_swap_ins(const MemoryView& view);  // pending_in_ whose copy has started: pushed
  std::uint32_t pop_best(const MemoryView& view);

  const UseIndex& uses_;
  const Trace& trace_;
  std::vector<Entry> heap_;  // std::push_heap order: furthest next use, then lowest storage, on top
  std::vector<Entry> aside_;
  std::vector<std::uint32_t> pending_in_;  // swap-ins issued, storage still swapped out when last seen
  std::size_t done_ = 0;
};

}  // namespace coopsim::swap_detail
