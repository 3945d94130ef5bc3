// The swap executor (swap_executor.hpp): trace events on trace storages, and the swaps the
// policy asks for, whose copies end through the loop's completion queue.
#include "swap_executor.hpp"

#include <algorithm>
#include <string>

namespace coopsim::engine_detail {

void SwapExecutor::seed(std::uint32_t storage, const Block& b) {
  blocks_[storage] = b;
  residency_[storage] = Residency::Resident;
}

bool SwapExecutor::allocate_storage(std::uint32_t t, std::uint16_t stream) {
  auto b = loop_.obtain_block(AllocRequest{trace_.tensors[t].size, stream, TensorId{t}});
  if (!b) return false;
  blocks_[t] = *b;
  return true;
}

void SwapExecutor::free_storage(std::uint32_t t) {
  switch (residency_[t]) {
    case Residency::Resident:
      residency_[t] = Residency::NotAllocated;
      loop_.release_block(t, blocks_[t]);
      break;
    case Residency::SwappingOut:
    case Residency::SwappingIn:
      freed_in_flight_[t] = 1;  // released when the copy completes
      break;
    case Residency::SwappedOut: residency_[t] = Residency::NotAllocated; break;
    case Residency::NotAllocated:
    case Residency::Evicted:  // recompute policies only (RematExecutor)
      throw std::logic_error("engine: free of a tensor that is not allocated");
  }
}

void SwapExecutor::ensure_resident(std::uint32_t t) {
  while (!loop_.stopped() && residency_[t] != Residency::Resident) {
    switch (residency_[t]) {
      case Residency::SwappedOut:
        start_swap_in(t);  // on demand: the compute stream waits for it below
        break;
      case Residency::SwappingOut:
      case Residency::SwappingIn:
        if (!loop_.wait_for_next_completion()) throw std::logic_error("engine: transfer lost");
        break;
      case Residency::NotAllocated:
      case Residency::Evicted: throw std::logic_error("engine: use of a tensor that is not allocated");
      case Residency::Resident: break;
    }
  }
}

void SwapExecutor::process(const TraceEvent& e) {
  ++epoch_;  // the storages pinned by the previous event are free to move
  switch (e.kind) {
    case EventKind::Alloc: {
      const std::uint32_t t = index_of(e.tensor());
      if (!allocate_storage(t, e.stream)) break;
      residency_[t] = Residency::Resident;
      version_[t] = 0;
      loop_.log_alloc(t, blocks_[t], /*fresh=*/true);
      if (e.addr != 0) loop_.check_address(e.addr, blocks_[t].addr);
      break;
    }
    case EventKind::Free: free_storage(index_of(e.tensor())); break;
    case EventKind::Access: {
      const std::uint32_t s = trace_.storage_of(index_of(e.tensor()));
      pin_epoch_[s] = epoch_;
      ensure_resident(s);
      ++loop_.report().counters.accesses;
      if (loop_.logging() && !loop_.stopped()) loop_.log_point(LogKind::Access, storage_ref(s));
      break;
    }
    case EventKind::Compute: {
      const OpId id = e.compute_op();
      const OpInfo& op = trace_.op(id);
      for (const auto* list : {&op.inputs, &op.outputs}) {
        for (TensorId x : *list) pin_epoch_[trace_.storage_of(index_of(x))] = epoch_;
      }
      for (const auto* list : {&op.inputs, &op.outputs}) {
        for (TensorId x : *list) ensure_resident(trace_.storage_of(index_of(x)));
      }
      const SimTime start = loop_.run_op(op);
      if (loop_.logging() && !loop_.stopped()) log_compute(index_of(id), start);
      break;
    }
    case EventKind::Iteration:  // the loop counts iterations
    case EventKind::Mark: break;
  }
}

void SwapExecutor::start_swap_out(std::uint32_t t) {
  if (residency_[t] != Residency::Resident || pin_epoch_[t] == epoch_) {
    throw std::logic_error("policy asked to swap out tensor " + std::to_string(trace_.tensors[t].file_id) +
                           ", which is not resident or is in use");
  }
  residency_[t] = Residency::SwappingOut;
  loop_.start_copy(Direction::DeviceToHost, trace_.tensors[t].size, t);
}

void SwapExecutor::start_swap_in(std::uint32_t t) {
  if (residency_[t] != Residency::SwappedOut) {
    throw std::logic_error("swap-in of tensor " + std::to_string(trace_.tensors[t].file_id) +
                           ", which is not swapped out");
  }
  if (!allocate_storage(t, blocks_[t].stream)) return;  // OOM recorded
  loop_.log_alloc(t, blocks_[t], /*fresh=*/false);
  residency_[t] = Residency::SwappingIn;
  loop_.start_copy(Direction::HostToDevice, trace_.tensors[t].size, t);
}

void SwapExecutor::complete(const Completion& c) {
  const std::uint32_t t = c.subject;
  if (c.direction == Direction::DeviceToHost) {
    loop_.log_transfer(LogKind::SwapOut, c, storage_ref(t));
    loop_.alloc().deallocate(blocks_[t]);
    ++loop_.report().counters.frees;
    loop_.log_free(t, blocks_[t]);
    residency_[t] = freed_in_flight_[t] ? Residency::NotAllocated : Residency::SwappedOut;
  } else if (freed_in_flight_[t]) {
    loop_.log_transfer(LogKind::SwapIn, c, storage_ref(t));
    loop_.alloc().deallocate(blocks_[t]);
    loop_.log_free(t, blocks_[t]);
    residency_[t] = Residency::NotAllocated;
  } else {
    loop_.log_transfer(LogKind::SwapIn, c, storage_ref(t));
    residency_[t] = Residency::Resident;
  }
  freed_in_flight_[t] = 0;
  loop_.observe_memory();
}

void SwapExecutor::apply(const Action& a) {
  if (a.kind == Action::Kind::Evict) {
    throw std::logic_error("policy asked for an eviction but is not a recompute policy");
  }
  const std::uint32_t t = index_of(a.tensor);
  if (t >= residency_.size()) throw std::logic_error("policy named an unknown tensor");
  if (a.kind == Action::Kind::SwapOut) {
    start_swap_out(t);
  } else {
    start_swap_in(t);
  }
}

// --- The run log: a storage's version counts the trace's writes since its allocation ---

LogRef SwapExecutor::storage_ref(std::uint32_t s) const {
  return LogRef{s, version_[s], blocks_[s].addr, blocks_[s].size};
}

// The op reads its inputs' storages and writes its non-view outputs and its mutated inputs
// (each storage once, in list order).
void SwapExecutor::log_compute(std::uint32_t op_index, SimTime start) {
  const OpInfo& op = trace_.ops[op_index];
  std::vector<LogRef> reads, writes;
  auto listed = [](const std::vector<LogRef>& v, std::uint32_t s) {
    return std::any_of(v.begin(), v.end(), [&](const LogRef& r) { return r.storage == s; });
  };
  for (TensorId x : op.inputs) {
    const std::uint32_t s = trace_.storage_of(index_of(x));
    if (!listed(reads, s)) reads.push_back(storage_ref(s));
  }
  auto write = [&](std::uint32_t s) {
    if (listed(writes, s)) return;
    ++version_[s];
    writes.push_back(storage_ref(s));
  };
  for (TensorId x : op.outputs) {
    if (!trace_.tensors[index_of(x)].is_view()) write(index_of(x));
  }
  for (TensorId x : op.mutated) write(trace_.storage_of(index_of(x)));
  loop_.log_op(LogKind::Compute, op_index, start, reads, writes);
}

}  // namespace coopsim::engine_detail
