// Heap form of the Belady fallback (see furthest_next_use.hpp).
#include "furthest_next_use.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "coopsim/base/error.hpp"

namespace coopsim::swap_detail {

namespace {

constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();

// std::push_heap keeps the largest on top: furthest next use first, then the lowest storage.
bool below(const auto& a, const auto& b) { return a.next != b.next ? a.next < b.next : a.storage > b.storage; }

}  // namespace

FurthestNextUse::FurthestNextUse(const UseIndex& uses, const Trace& trace) : uses_(uses), trace_(trace) {
  for (const InitialSegment& s : trace.initial_segments) {
    for (const InitialBlock& b : s.blocks) {
      if (b.is_free()) continue;
      const std::uint32_t storage = index_of(trace.storage_of(b.tensor));
      const auto& u = uses.uses(storage);
      heap_.push_back({u.empty() ? kNever : u.front(), storage});
      std::push_heap(heap_.begin(), heap_.end(), [](const Entry& a, const Entry& b) { return below(a, b); });
    }
  }
}

void FurthestNextUse::push(std::uint32_t storage, std::size_t after) {
  const std::uint32_t nu = uses_.next_use(storage, after);
  heap_.push_back({nu == kNoIndex ? kNever : nu, storage});
  std::push_heap(heap_.begin(), heap_.end(), [](const Entry& a, const Entry& b) { return below(a, b); });
}

void FurthestNextUse::note_swap_in(std::uint32_t storage) { pending_in_.push_back(storage); }

void FurthestNextUse::admit_swap_ins(const MemoryView& view) {
  std::erase_if(pending_in_, [&](std::uint32_t s) {
    const Residency r = view.residency(TensorId{s});
    if (r == Residency::SwappedOut) return false;  // its copy has not started (the swap-in's own
                                                   // allocation may be the one that failed)
    if (r == Residency::Resident || r == Residency::SwappingIn) push(s, index_of(view.event_index()));
    return true;
  });
}

void FurthestNextUse::push_event(std::size_t i) {
  const TraceEvent& e = trace_.events[i];
  if (e.kind == EventKind::Alloc || e.kind == EventKind::Access) {
    push(trace_.storage_of(index_of(e.tensor())), i);
  } else if (e.kind == EventKind::Compute) {
    const OpInfo& op = trace_.op(e.compute_op());
    for (TensorId x : op.inputs) push(trace_.storage_of(index_of(x)), i);
    for (TensorId x : op.outputs) push(trace_.storage_of(index_of(x)), i);
  }
}

void FurthestNextUse::catch_up(std::size_t now) {
  for (; done_ < now && done_ < trace_.events.size(); ++done_) push_event(done_);
}

std::uint32_t FurthestNextUse::pop_best(const MemoryView& view) {
  const std::size_t now = index_of(view.event_index());
  const auto order = [](const Entry& a, const Entry& b) { return below(a, b); };
  std::uint32_t best = kNoIndex;
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), order);
    const Entry e = heap_.back();
    heap_.pop_back();
    if (e.next != kNever && e.next <= now) continue;  // stale: a later use pushed a newer entry
    const TensorId t{e.storage};
    const Residency r = view.residency(t);
    if (r == Residency::Resident && !view.pinned(t)) {
      best = e.storage;
      aside_.push_back(e);  // stays a candidate until it leaves
      break;
    }
    if (r == Residency::SwappingIn || (r == Residency::Resident && view.pinned(t))) aside_.push_back(e);
  }
  for (const Entry& e : aside_) {
    heap_.push_back(e);
    std::push_heap(heap_.begin(), heap_.end(), order);
  }
  aside_.clear();
  return best;
}

std::vector<Action> FurthestNextUse::choose(const MemoryView& view) {
  const std::size_t now = index_of(view.event_index());
  catch_up(now);
  // The event being processed may be done already (a swap-in the policy issued after it needs
  // room): its storages are offered too. catch_up pushes them again once it is past the event,
  // so an entry dropped now (the storage not resident yet) is not lost.
  if (now < trace_.events.size()) push_event(now);
  admit_swap_ins(view);
  const std::uint32_t best = pop_best(view);
  if (view.cross_check()) {
    const std::vector<Action> plain = furthest_next_use_swap_out(uses_, view);  // counts its own scan
    const std::uint32_t expected = plain.empty() ? kNoIndex : index_of(plain.front().tensor);
    if (expected != best) {
      auto describe = [&](std::uint32_t s) {
        if (s == kNoIndex) return std::string("none");
        return std::to_string(s) + " (next use " + std::to_string(uses_.next_use(s, now)) + ", " +
               std::string(to_string(view.residency(TensorId{s}))) +
               ", storage of itself: " + std::to_string(trace_.storage_of(s) == s) + ")";
      };
      throw InvariantError("autoswap/vdnn fallback: the heap chose storage " + describe(best) + ", the plain search " +
                           describe(expected) + " at event " + std::to_string(now));
    }
    return plain;
  }
  view.count_scanned(trace_.tensors.size());
  if (best == kNoIndex) return {};
  return {{Action::Kind::SwapOut, TensorId{best}}};
}

}  // namespace coopsim::swap_detail
