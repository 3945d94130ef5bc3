// Copy streams: swap-outs and swap-ins, their completions and the stalls they cause.
#include "engine_impl.hpp"

namespace coopsim::engine_detail {

void Engine::complete(const Completion& c) {
  if (remat_) {
    remat_complete(c);
    return;
  }
  const std::uint32_t t = c.tensor;
  if (c.direction == Direction::DeviceToHost) {
    --swap_outs_in_flight_;
    log_transfer(LogKind::SwapOut, c, storage_ref(t));
    alloc_.deallocate(blocks_[t]);
    ++rep_.counters.frees;
    log_free(t, blocks_[t]);
    residency_[t] = freed_in_flight_[t] ? Residency::NotAllocated : Residency::SwappedOut;
  } else if (freed_in_flight_[t]) {
    log_transfer(LogKind::SwapIn, c, storage_ref(t));
    alloc_.deallocate(blocks_[t]);
    log_free(t, blocks_[t]);
    residency_[t] = Residency::NotAllocated;
  } else {
    log_transfer(LogKind::SwapIn, c, storage_ref(t));
    residency_[t] = Residency::Resident;
  }
  freed_in_flight_[t] = 0;
  observe_memory();
}

void Engine::drain_until(SimTime t) {
  while (!queue_.empty() && queue_.top().time <= t) {
    const Completion c = queue_.top();
    queue_.pop();
    complete(c);
  }
}

// Stall the compute stream until the earliest in-flight transfer completes.
bool Engine::wait_for_next_completion() {
  if (queue_.empty()) return false;
  const Completion c = queue_.top();
  queue_.pop();
  if (c.time > now_) {
    log_stall(now_, c.time);
    rep_.time.stall += c.time - now_;
    now_ = c.time;
  }
  complete(c);
  return true;
}

std::pair<SimTime, SimTime> Engine::book_transfer(Direction d, Bytes size) {
  SimTime& stream_free = d == Direction::DeviceToHost ? d2h_free_ : h2d_free_;
  const SimTime start = opt_.link.serial ? std::max(now_, stream_free) : now_;
  const SimTime copy = opt_.link.transfer_time(d, size);
  const SimTime end = later(start, copy, [&] {
    return fmt::format("a {} copy of {} bytes taking {} ns from {} ns", d == Direction::DeviceToHost ? "D2H" : "H2D",
                       size.value, copy.count(), start.count());
  });
  stream_free = end;
  return {start, end};
}

void Engine::start_swap_out(std::uint32_t t) {
  if (residency_[t] != Residency::Resident || pin_epoch_[t] == epoch_) {
    throw std::logic_error("policy asked to swap out tensor " + std::to_string(trace_.tensors[t].file_id) +
                           ", which is not resident or is in use");
  }
  const Bytes size = trace_.tensors[t].size;
  const auto [start, end] = book_transfer(Direction::DeviceToHost, size);
  residency_[t] = Residency::SwappingOut;
  queue_.push({end, start, 0, seq_++, t, Direction::DeviceToHost});
  ++swap_outs_in_flight_;
  ++rep_.time.swap_outs;
  rep_.time.swap_out_bytes += size;
}

void Engine::start_swap_in(std::uint32_t t) {
  if (residency_[t] != Residency::SwappedOut) {
    throw std::logic_error("swap-in of tensor " + std::to_string(trace_.tensors[t].file_id) +
                           ", which is not swapped out");
  }
  if (!allocate_storage(t, blocks_[t].stream)) return;  // OOM recorded
  log_alloc(t, blocks_[t], /*fresh=*/false);
  const Bytes size = trace_.tensors[t].size;
  const auto [start, end] = book_transfer(Direction::HostToDevice, size);
  residency_[t] = Residency::SwappingIn;
  queue_.push({end, start, 1, seq_++, t, Direction::HostToDevice});
  ++rep_.time.swap_ins;
  rep_.time.swap_in_bytes += size;
}

void Engine::apply(const std::vector<Action>& actions) {
  for (const Action& a : actions) {
    if (oom_) return;
    if (a.kind == Action::Kind::Evict) {
      if (!remat_) throw std::logic_error("policy asked for an eviction but is not a recompute policy");
      evict_value(a.value, /*forced=*/true);
      continue;
    }
    const std::uint32_t t = index_of(a.tensor);
    if (t >= residency_.size()) throw std::logic_error("policy named an unknown tensor");
    if (remat_) {  // hybrid policies: the storage's current value moves
      const std::uint32_t v = current_[trace_.storage_of(t)];
      if (v == kNoIndex) throw std::logic_error("policy asked to swap a tensor that is not allocated");
      if (a.kind == Action::Kind::SwapOut) {
        remat_swap_out(v);
      } else {
        remat_swap_in(v);
      }
      continue;
    }
    if (a.kind == Action::Kind::SwapOut) {
      start_swap_out(t);
    } else {
      start_swap_in(t);
    }
  }
}

}  // namespace coopsim::engine_detail
