// Swaps under recompute policies: the hybrid (PoocH-like, Capuchin-like) policies both evict
// values (recomputed on demand, engine_remat.cpp) and swap them to the host. A swapped value
// keeps its identity and version: its block is freed when the device-to-host copy completes
// and a new block is filled by a host-to-device copy when it is needed again, on demand (the
// compute stream stalls) or ahead of time by the policy. While a copy is in flight the value
// holds its block and is neither evictable nor swappable. A swapped value is not evicted: an
// op that needs it waits for its swap-in, never recomputes it. A value the trace releases
// while it is on the host is dropped unless an evicted value still needs it for recomputation.
#include "engine_impl.hpp"

namespace coopsim::engine_detail {

void Engine::remat_swap_out(std::uint32_t v) {
  const RematValue& x = graph_.value(v);
  if (x.state != ValueState::Resident || x.pins > 0) {
    throw std::logic_error("policy asked to swap out tensor " + std::to_string(trace_.tensors[x.storage].file_id) +
                           ", which is not resident or is in use");
  }
  const auto [start, end] = book_transfer(Direction::DeviceToHost, x.size);
  graph_.begin_swap_out(v);
  queue_.push({end, start, 0, seq_++, v, Direction::DeviceToHost});
  ++swap_outs_in_flight_;
  ++rep_.time.swap_outs;
  rep_.time.swap_out_bytes += x.size;
}

bool Engine::remat_swap_in(std::uint32_t v) {
  if (graph_.value(v).state != ValueState::SwappedOut) {
    throw std::logic_error("swap-in of tensor " + std::to_string(trace_.tensors[graph_.value(v).storage].file_id) +
                           ", which is not swapped out");
  }
  const std::uint32_t s = graph_.value(v).storage;
  auto b = obtain_block(AllocRequest{graph_.value(v).size, 0, TensorId{s}});
  if (!b) return false;  // OOM recorded
  // The policy may have been asked for room: the value is still on the host (nothing can
  // move it while it is swapped out).
  log_alloc(s, *b, /*fresh=*/false);
  graph_.begin_swap_in(v, *b);
  const auto [start, end] = book_transfer(Direction::HostToDevice, graph_.value(v).size);
  queue_.push({end, start, 1, seq_++, v, Direction::HostToDevice});
  ++rep_.time.swap_ins;
  rep_.time.swap_in_bytes += graph_.value(v).size;
  return true;
}

void Engine::remat_complete(const Completion& c) {
  const std::uint32_t v = c.tensor;
  if (c.direction == Direction::DeviceToHost) {
    --swap_outs_in_flight_;
    log_transfer(LogKind::SwapOut, c, value_ref(v));
    const Block b = graph_.value(v).block;
    graph_.finish_swap_out(v);
    free_block(graph_.value(v).storage, b);
    // Released while it was copied out: keep the host copy only for evicted values that need it.
    if (graph_.value(v).released && !graph_.needed_by_evicted(v)) graph_.drop(v);
    return;
  }
  log_transfer(LogKind::SwapIn, c, value_ref(v));
  graph_.finish_swap_in(v);
  graph_.touch(v);
  observe_memory();
  if (graph_.value(v).released && graph_.value(v).pins == 0) release_value(v);
}

bool Engine::bring_back(std::uint32_t v) {
  while (!oom_) {
    switch (graph_.value(v).state) {
      case ValueState::Resident: return true;
      case ValueState::SwappedOut:
        if (!remat_swap_in(v)) return false;
        break;
      case ValueState::SwappingOut:
      case ValueState::SwappingIn:
        if (!wait_for_next_completion()) throw std::logic_error("engine: transfer lost");
        break;
      case ValueState::Evicted:
      case ValueState::Gone: throw std::logic_error("engine: bring_back of a value that is not swapped");
    }
  }
  return false;
}

}  // namespace coopsim::engine_detail
