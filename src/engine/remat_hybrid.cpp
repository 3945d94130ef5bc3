// Swaps under recompute policies: the hybrid (PoocH-like, Capuchin-like) policies both evict
// values (recomputed on demand, remat_compute.cpp) and swap them to the host. A swapped value
// keeps its identity and version: its block is freed when the device-to-host copy completes
// and a new block is filled by a host-to-device copy when it is needed again, on demand (the
// compute stream stalls) or ahead of time by the policy. While a copy is in flight the value
// holds its block and is neither evictable nor swappable. A swapped value is not evicted: an
// op that needs it waits for its swap-in, never recomputes it. A value the trace releases
// while it is on the host is dropped unless an evicted value still needs it for recomputation;
// dropping it locks the values that could only be recomputed through it (drop_value), which a
// planned or fallback eviction would otherwise leave with no way back.
#include <string>

#include "remat_executor.hpp"

namespace coopsim::engine_detail {

void RematExecutor::swap_out(ValueId v) {
  const RematValue& x = graph_.value(v);
  if (x.state != ValueState::Resident || x.pins > 0) {
    throw std::logic_error("policy asked to swap out tensor " + std::to_string(trace_.tensor(x.storage).file_id) +
                           ", which is not resident or is in use");
  }
  graph_.begin_swap_out(v);
  loop_.start_copy(Direction::DeviceToHost, x.size, index_of(v));
}

bool RematExecutor::swap_in(ValueId v) {
  if (graph_.value(v).state != ValueState::SwappedOut) {
    throw std::logic_error("swap-in of tensor " + std::to_string(trace_.tensor(graph_.value(v).storage).file_id) +
                           ", which is not swapped out");
  }
  const TensorId s = graph_.value(v).storage;
  auto b = loop_.obtain_block(AllocRequest{graph_.value(v).size, 0, s});
  if (!b) return false;  // OOM recorded
  // The policy may have been asked for room: the value is still on the host (nothing can
  // move it while it is swapped out).
  loop_.log_alloc(s, *b, /*fresh=*/false);
  graph_.begin_swap_in(v, *b);
  loop_.start_copy(Direction::HostToDevice, graph_.value(v).size, index_of(v));
  return true;
}

void RematExecutor::complete(const Completion& c) {
  const ValueId v{c.subject};
  if (c.direction == Direction::DeviceToHost) {
    loop_.log_transfer(LogKind::SwapOut, c, value_ref(v));
    const Block b = graph_.value(v).block;
    graph_.finish_swap_out(v);
    loop_.release_block(graph_.value(v).storage, b);
    // Released while it was copied out: keep the host copy only for evicted values that need it
    // (or a recomputation waiting for it: pinned).
    if (graph_.value(v).released) {
      if (graph_.value(v).pins > 0 || graph_.needed_by_evicted(v)) {
        kept_.push_back(v);
      } else {
        drop_value(v);
      }
    }
    return;
  }
  loop_.log_transfer(LogKind::SwapIn, c, value_ref(v));
  graph_.finish_swap_in(v);
  graph_.touch(v);
  loop_.observe_memory();
  if (graph_.value(v).released && graph_.value(v).pins == 0) release_value(v);
}

bool RematExecutor::bring_back(ValueId v) {
  while (!loop_.stopped()) {
    switch (graph_.value(v).state) {
      case ValueState::Resident: return true;
      case ValueState::SwappedOut:
        if (!swap_in(v)) return false;
        break;
      case ValueState::SwappingOut:
      case ValueState::SwappingIn:
        if (!loop_.wait_for_next_completion()) throw std::logic_error("engine: transfer lost");
        break;
      case ValueState::Evicted:
      case ValueState::Gone: throw std::logic_error("engine: bring_back of a value that is not swapped");
    }
  }
  return false;
}

}  // namespace coopsim::engine_detail
