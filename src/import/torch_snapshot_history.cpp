// Snapshot history, forwards: streams, tensor identity (the address between alloc and
// free_completed), blocks live before the recording, segment events, and the check of the
// result against the end state. See torch_snapshot_state.cpp for the rules.
#include <fmt/format.h>

#include <algorithm>

#include "coopsim/base/error.hpp"
#include "torch_snapshot_state.hpp"

namespace coopsim::torch_snapshot::detail {

History Reconstruction::run() {
  collect_streams();
  walk_history();
  find_initial_segments();
  add_untouched_end_blocks();
  size_preexisting_blocks();
  build_initial_state();
  check_end_state();
  number_tensors();
  return std::move(h_);
}

void Reconstruction::note(std::string text) {
  h_.exact = false;
  h_.notes.push_back(std::move(text));
}

void Reconstruction::collect_streams() {
  std::set<std::uint64_t> streams{0};
  std::uint64_t last = 0;  // entries mostly have the stream of the one before: a set lookup each would cost
  for (const Entry& e : snap_.entries) {
    if (e.stream == last) continue;
    streams.insert(e.stream);
    last = e.stream;
  }
  for (const SnapSegment& g : snap_.segments) streams.insert(g.stream);
  if (streams.size() > 65536) throw Error(snap_.path + ": more than 65536 streams");
  h_.streams.assign(streams.begin(), streams.end());
}

const SnapSegment* Reconstruction::end_segment_at(std::uint64_t addr) const {
  auto it = std::upper_bound(snap_.segments.begin(), snap_.segments.end(), addr,
                             [](std::uint64_t a, const SnapSegment& g) { return a < g.addr; });
  if (it == snap_.segments.begin()) return nullptr;
  --it;
  return addr < it->addr + it->size ? &*it : nullptr;
}

// One forward pass: tensors of in-history allocations, pre-existing blocks, segment events.
void Reconstruction::walk_history() {
  // Address -> in-history tensor. Flat tables: one node per allocation of a history of
  // millions would cost more than the walk (and every entry but a free's last is in at most one).
  coopsim::detail::AddrMap<std::uint32_t> live;
  h_.tensor_of_entry.assign(snap_.entries.size(), kNoTensor);
  std::size_t tensors = 0;
  for (const Entry& e : snap_.entries) tensors += e.action == Action::Alloc || e.action == Action::Oom ? 1 : 0;
  trace_tensors_.reserve(tensors);  // reserved whole: growing would hold two arrays at once
  trace_alloc_entry_.reserve(tensors);
  allocs_by_addr_.reserve(tensors);
  for (const Entry& e : snap_.entries) {
    // Built only for an error: formatting it for every entry would cost more than the walk.
    const auto where = [&] { return fmt::format("{}: device_traces[{}][{}]", snap_.path, snap_.device, e.index); };
    switch (e.action) {
      case Action::Alloc: {
        if (const std::uint32_t* t = live.find(e.addr); t != nullptr) {
          throw Error(fmt::format("{}: alloc at {:#x}, which is still allocated (since entry {})", where(), e.addr,
                                  trace_alloc_entry_[*t]));
        }
        if (auto p = pre_live_.find(e.addr); p != pre_live_.end()) {
          throw Error(fmt::format("{}: alloc at {:#x}, where a block allocated before the recording is still live",
                                  where(), e.addr));
        }
        const auto t = static_cast<std::uint32_t>(trace_tensors_.size());
        trace_tensors_.push_back({e.size, snap_.names[e.name]});
        trace_alloc_entry_.push_back(e.index);
        live.insert(e.addr, t);
        touched_.insert(e.addr, true);
        allocs_by_addr_.emplace_back(e.addr, e.index);
        h_.tensor_of_entry[e.index] = t;
        break;
      }
      case Action::FreeRequested:
      case Action::FreeCompleted: {
        const bool seen = !touched_.insert(e.addr, true);
        const bool completed = e.action == Action::FreeCompleted;
        if (const std::uint32_t* it = live.find(e.addr); it != nullptr) {
          const Tensor& t = trace_tensors_[*it];
          if (t.requested != e.size) {
            throw Error(fmt::format("{}: {} of {} bytes at {:#x}, allocated with {} bytes", where(),
                                    completed ? "free_completed" : "free_requested", e.size, e.addr, t.requested));
          }
          h_.tensor_of_entry[e.index] = *it;
          if (completed) live.erase(e.addr);
          break;
        }
        // No alloc before it: a block live when the recording began.
        auto p = pre_live_.find(e.addr);
        if (p == pre_live_.end()) {
          // Only an address the history has not touched yet can hold such a block.
          if (seen) {
            throw Error(
                fmt::format("{}: {} at {:#x}, which is not allocated (the history freed it and did not "
                            "allocate it again)",
                            where(), completed ? "free_completed" : "free_requested", e.addr));
          }
          Preexisting b;
          b.addr = e.addr;
          b.requested = e.size;
          b.stream = e.stream;
          b.first_entry = e.index;
          p = pre_live_.emplace(e.addr, pre_.size()).first;
          pre_.push_back(b);
        }
        Preexisting& b = pre_[p->second];
        if (b.requested != e.size) {
          throw Error(fmt::format("{}: free_completed of {} bytes at {:#x}, its free_requested said {} bytes", where(),
                                  e.size, e.addr, b.requested));
        }
        h_.tensor_of_entry[e.index] = kPreFlag | static_cast<std::uint32_t>(p->second);
        if (!completed) {
          b.requested_free = true;
          break;
        }
        b.free_entry = e.index;
        if (!b.requested_free && !h_.truncated) {
          h_.truncated = true;
          h_.truncation_evidence = fmt::format(
              "entry {}: free_completed at {:#x} has no free_requested before it: the history lost its "
              "beginning (ring buffer of max_entries)",
              e.index, e.addr);
        }
        pre_live_.erase(p);
        break;
      }
      case Action::SegmentAlloc:
      case Action::SegmentFree: {
        const bool alloc = e.action == Action::SegmentAlloc;
        if (!first_segment_event_.count(e.addr))
          first_segment_event_.emplace(e.addr, SegmentEvent{alloc, e.size, e.stream});
        if (alloc) {
          const SnapSegment* g = end_segment_at(e.addr);
          const SegmentPool pool =
              g != nullptr && g->addr == e.addr && g->size == e.size ? g->pool : pool_by_size(e.size);
          h_.segment_addresses.push_back({e.addr, Bytes{e.size}, dense_stream(h_, e.stream), pool});
        }
        break;
      }
      case Action::SegmentMap:
      case Action::SegmentUnmap: expandable_history_ = true; break;
      case Action::Oom: {
        // The failed request (its rounded size: malloc records params.size()) becomes a tensor
        // the trace allocates and frees at once; at the recorded capacity the simulation fails there.
        if (e.size == 0) break;
        const auto t = static_cast<std::uint32_t>(trace_tensors_.size());
        const std::string& name = snap_.names[e.name];
        trace_tensors_.push_back({e.size, name.empty() ? std::string("OOM request") : "OOM request: " + name});
        trace_alloc_entry_.push_back(e.index);
        h_.tensor_of_entry[e.index] = t;
        break;
      }
      case Action::Snapshot:
      case Action::Annotate: break;
    }
  }
  // Tensors of the history still live at the end.
  live.for_each([&](std::uint64_t addr, std::uint32_t t) { live_at_end_.emplace(addr, t); });
}

SegmentPool Reconstruction::pool_by_size(std::uint64_t size) {
  return size == kSmallBuffer ? SegmentPool::Small : SegmentPool::Large;
}

// The history's live tensors at the end must be the end state's active blocks, and the other
// way round.
void Reconstruction::check_end_state() {
  std::set<std::uint64_t> active;
  for (const SnapSegment& g : snap_.segments) {
    for (const SnapBlock& b : g.blocks) {
      if (!b.active()) continue;
      active.insert(b.addr);
      if (!live_at_end_.count(b.addr) && !pre_live_.count(b.addr)) {
        note(fmt::format("the end state shows an active block at {:#x} that the history freed", b.addr));
        return;
      }
    }
  }
  for (const auto& [addr, t] : live_at_end_) {
    if (!active.count(addr)) {
      note(fmt::format("the history leaves {:#x} allocated (entry {}) but the end state shows no active block there",
                       addr, trace_alloc_entry_[t]));
      return;
    }
  }
}

// Initial tensors come first; history tensors follow in alloc order.
void Reconstruction::number_tensors() {
  const auto base = static_cast<std::uint32_t>(h_.tensors.size());
  if (base == 0) {
    h_.tensors = std::move(trace_tensors_);  // no initial-state tensors: no second array
  } else {
    // Reserved whole: growing would hold the old and the new array at once.
    h_.tensors.reserve(h_.tensors.size() + trace_tensors_.size());
    for (auto& t : trace_tensors_) h_.tensors.push_back(std::move(t));
  }
  for (auto& t : h_.tensor_of_entry) {
    if (t == kNoTensor) continue;
    t = (t & kPreFlag) != 0 ? pre_[t & ~kPreFlag].tensor : base + t;
  }
}

std::uint16_t dense_stream(const History& h, std::uint64_t stream) {
  const auto it = std::lower_bound(h.streams.begin(), h.streams.end(), stream);
  return static_cast<std::uint16_t>(it - h.streams.begin());
}

History reconstruct(const Snapshot& snap, const PyTorchOptions& opts,
                    const std::map<std::uint64_t, std::uint64_t>& sizes) {
  return Reconstruction(snap, opts, sizes).run();
}

}  // namespace coopsim::torch_snapshot::detail
