// Copy streams: swap-outs and swap-ins, their completions and the stalls they cause.
#include "engine_impl.hpp"

namespace coopsim::engine_detail {

void Engine::complete(const Completion& c) {
  const std::uint32_t t = c.tensor;
  if (c.direction == Direction::DeviceToHost) {
    --swap_outs_in_flight_;
    alloc_.deallocate(blocks_[t]);
    ++rep_.counters.frees;
    residency_[t] = freed_in_flight_[t] ? Residency::NotAllocated : Residency::SwappedOut;
  } else if (freed_in_flight_[t]) {
    alloc_.deallocate(blocks_[t]);
    residency_[t] = Residency::NotAllocated;
  } else {
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
    rep_.time.stall += c.time - now_;
    now_ = c.time;
  }
  complete(c);
  return true;
}

void Engine::start_swap_out(std::uint32_t t) {
  if (residency_[t] != Residency::Resident || pin_epoch_[t] == epoch_) {
    throw std::logic_error("policy asked to swap out tensor " +
                           std::to_string(trace_.tensors[t].file_id) +
                           ", which is not resident or is in use");
  }
  const Bytes size = trace_.tensors[t].size;
  const SimTime start = opt_.link.serial ? std::max(now_, d2h_free_) : now_;
  const SimTime end = start + opt_.link.transfer_time(Direction::DeviceToHost, size);
  d2h_free_ = end;
  residency_[t] = Residency::SwappingOut;
  queue_.push({end, 0, seq_++, t, Direction::DeviceToHost});
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
  const Bytes size = trace_.tensors[t].size;
  const SimTime start = opt_.link.serial ? std::max(now_, h2d_free_) : now_;
  const SimTime end = start + opt_.link.transfer_time(Direction::HostToDevice, size);
  h2d_free_ = end;
  residency_[t] = Residency::SwappingIn;
  queue_.push({end, 1, seq_++, t, Direction::HostToDevice});
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
    if (remat_) throw std::logic_error("a recompute policy asked for a swap: swap actions need a swap policy");
    const std::uint32_t t = index_of(a.tensor);
    if (t >= residency_.size()) throw std::logic_error("policy named an unknown tensor");
    if (a.kind == Action::Kind::SwapOut) {
      start_swap_out(t);
    } else {
      start_swap_in(t);
    }
  }
}

}  // namespace coopsim::engine_detail
