// The swap executor (swap_executor.hpp): trace events on trace storages, and the swaps the
// policy asks for, whose copies end through the loop's completion queue.
#include "swap_executor.hpp"

#include <algorithm>
#include <string>

namespace coopsim::engine_detail {

void SwapExecutor::seed(TensorId storage, const Block& b) {
  blocks_[index_of(storage)] = b;
  residency_[index_of(storage)] = Residency::Resident;
}

bool SwapExecutor::allocate_storage(TensorId t, std::uint16_t stream) {
  auto b = loop_.obtain_block(AllocRequest{trace_.tensor(t).size, stream, t});
  if (!b) return false;
  blocks_[index_of(t)] = *b;
  return true;
}

void SwapExecutor::free_storage(TensorId t) {
  const std::uint32_t i = index_of(t);
  switch (residency_[i]) {
    case Residency::Resident:
      residency_[i] = Residency::NotAllocated;
      loop_.release_block(t, blocks_[i]);
      break;
    case Residency::SwappingOut:
    case Residency::SwappingIn:
      freed_in_flight_[i] = 1;  // released when the copy completes
      break;
    case Residency::SwappedOut: residency_[i] = Residency::NotAllocated; break;
    case Residency::NotAllocated:
    case Residency::Evicted:  // recompute policies only (RematExecutor)
      throw std::logic_error("engine: free of a tensor that is not allocated");
  }
}

void SwapExecutor::ensure_resident(TensorId t) {
  const std::uint32_t i = index_of(t);
  while (!loop_.stopped() && residency_[i] != Residency::Resident) {
    switch (residency_[i]) {
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
      const TensorId t = e.tensor();
      const std::uint32_t i = index_of(t);
      // A copy of the tensor's previous lifetime (freed while in flight) still holds its block:
      // the new lifetime waits for it, since a storage's copies and blocks are kept per tensor.
      while (!loop_.stopped() && (residency_[i] == Residency::SwappingOut || residency_[i] == Residency::SwappingIn)) {
        if (!loop_.wait_for_next_completion()) throw std::logic_error("engine: transfer lost");
      }
      if (loop_.stopped() || !allocate_storage(t, e.stream)) break;
      residency_[i] = Residency::Resident;
      version_[i] = 0;
      loop_.log_alloc(t, blocks_[i], /*fresh=*/true);
      if (e.addr != 0) loop_.check_address(e.addr, blocks_[i].addr);
      break;
    }
    case EventKind::Free: free_storage(e.tensor()); break;
    case EventKind::Access: {
      const TensorId s = trace_.storage_of(e.tensor());
      pin_epoch_[index_of(s)] = epoch_;
      ensure_resident(s);
      loop_.report().accessed();
      if (loop_.logging() && !loop_.stopped()) loop_.log_point(LogKind::Access, storage_ref(s));
      break;
    }
    case EventKind::Compute: {
      const OpInfo& op = trace_.op(e.compute_op());
      for (const auto* list : {&op.inputs, &op.outputs}) {
        for (TensorId x : *list) pin_epoch_[trace_.storage_of(index_of(x))] = epoch_;
      }
      for (const auto* list : {&op.inputs, &op.outputs}) {
        for (TensorId x : *list) ensure_resident(trace_.storage_of(x));
      }
      const SimTime start = loop_.run_op(op);
      if (loop_.logging() && !loop_.stopped()) log_compute(e.compute_op(), start);
      break;
    }
    case EventKind::Iteration:  // the loop counts iterations
    case EventKind::Mark: break;
  }
}

void SwapExecutor::start_swap_out(TensorId t) {
  const std::uint32_t i = index_of(t);
  if (residency_[i] != Residency::Resident || pin_epoch_[i] == epoch_) {
    throw std::logic_error("policy asked to swap out tensor " + std::to_string(trace_.tensor(t).file_id) +
                           ", which is not resident or is in use");
  }
  residency_[i] = Residency::SwappingOut;
  loop_.start_copy(Direction::DeviceToHost, trace_.tensor(t).size, i);
}

void SwapExecutor::start_swap_in(TensorId t) {
  const std::uint32_t i = index_of(t);
  if (residency_[i] != Residency::SwappedOut) {
    throw std::logic_error("swap-in of tensor " + std::to_string(trace_.tensor(t).file_id) +
                           ", which is not swapped out");
  }
  if (!allocate_storage(t, blocks_[i].stream)) return;  // OOM recorded
  loop_.log_alloc(t, blocks_[i], /*fresh=*/false);
  residency_[i] = Residency::SwappingIn;
  loop_.start_copy(Direction::HostToDevice, trace_.tensor(t).size, i);
}

void SwapExecutor::complete(const Completion& c) {
  const TensorId t{c.subject};
  const std::uint32_t i = c.subject;
  if (c.direction == Direction::DeviceToHost) {
    loop_.log_transfer(LogKind::SwapOut, c, storage_ref(t));
    loop_.alloc().deallocate(blocks_[i]);
    loop_.report().freed();
    loop_.log_free(t, blocks_[i]);
    residency_[i] = freed_in_flight_[i] ? Residency::NotAllocated : Residency::SwappedOut;
  } else if (freed_in_flight_[i]) {
    loop_.log_transfer(LogKind::SwapIn, c, storage_ref(t));
    loop_.alloc().deallocate(blocks_[i]);
    loop_.log_free(t, blocks_[i]);
    residency_[i] = Residency::NotAllocated;
  } else {
    loop_.log_transfer(LogKind::SwapIn, c, storage_ref(t));
    residency_[i] = Residency::Resident;
  }
  freed_in_flight_[i] = 0;
  loop_.observe_memory();
}

void SwapExecutor::apply(const Action& a) {
  if (a.kind == Action::Kind::Evict) {
    throw std::logic_error("policy asked for an eviction but is not a recompute policy");
  }
  if (index_of(a.tensor) >= residency_.size()) throw std::logic_error("policy named an unknown tensor");
  if (a.kind == Action::Kind::SwapOut) {
    start_swap_out(a.tensor);
  } else {
    start_swap_in(a.tensor);
  }
}

// --- The run log: a storage's version counts the trace's writes since its allocation ---

LogRef SwapExecutor::storage_ref(TensorId s) const {
  const std::uint32_t i = index_of(s);
  return LogRef{s, version_[i], blocks_[i].addr, blocks_[i].size};
}

// The op reads its inputs' storages and writes its non-view outputs and its mutated inputs
// (each storage once, in list order).
void SwapExecutor::log_compute(OpId id, SimTime start) {
  const OpInfo& op = trace_.op(id);
  std::vector<LogRef> reads, writes;
  auto listed = [](const std::vector<LogRef>& v, TensorId s) {
    return std::any_of(v.begin(), v.end(), [&](const LogRef& r) { return r.storage == s; });
  };
  for (TensorId x : op.inputs) {
    const TensorId s = trace_.storage_of(x);
    if (!listed(reads, s)) reads.push_back(storage_ref(s));
  }
  auto write = [&](TensorId s) {
    if (listed(writes, s)) return;
    ++version_[index_of(s)];
    writes.push_back(storage_ref(s));
  };
  for (TensorId x : op.outputs) {
    if (!trace_.tensor(x).is_view()) write(x);
  }
  for (TensorId x : op.mutated) write(trace_.storage_of(x));
  loop_.log_op(LogKind::Compute, id, start, reads, writes);
}

}  // namespace coopsim::engine_detail
