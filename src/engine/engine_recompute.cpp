// Recompute policies, the rematerialization itself (see engine_remat.cpp for the rules): an
// evicted value is brought back by re-running its producer execution, parents first with an
// explicit stack (at most limits.max_recompute_depth deep); a swapped value is swapped back in.
#include <fmt/format.h>

#include <algorithm>

#include "engine_impl.hpp"

namespace coopsim::engine_detail {

bool Engine::materialize(std::uint32_t target) {
  if (graph_.value(target).state == ValueState::Resident) return true;
  if (in_swap(graph_.value(target).state)) return bring_back(target);
  struct Frame {
    std::uint32_t execution;
    std::uint32_t next_input;
    std::uint32_t keep;  // the value the frame below waits for
  };
  auto frame_for = [&](std::uint32_t v) {
    const RematValue& x = graph_.value(v);
    if (x.state != ValueState::Evicted || x.producer == kNoIndex) {
      throw std::logic_error("engine: value of tensor " + std::to_string(trace_.tensors[x.storage].file_id) +
                             " is needed but cannot be recomputed");
    }
    return Frame{x.producer, 0, v};
  };
  std::vector<Frame> stack{frame_for(target)};
  while (!stack.empty()) {
    Frame& f = stack.back();
    const RematExecution& x = graph_.execution(f.execution);
    if (f.next_input < x.inputs.size()) {
      const std::uint32_t u = x.inputs[f.next_input];
      if (in_swap(graph_.value(u).state) && !bring_back(u)) return false;
      if (graph_.value(u).state == ValueState::Resident) {
        graph_.pin(u);  // kept while its siblings are rematerialized
        ++f.next_input;
      } else {
        if (stack.size() >= opt_.max_recompute_depth) {
          throw Error(fmt::format(
              "{}: event {}: rematerializing tensor {} needs more than {} nested "
              "recomputations (limits.max_recompute_depth)",
              trace_.path, index_, trace_.tensors[graph_.value(target).storage].file_id, opt_.max_recompute_depth));
        }
        stack.push_back(frame_for(u));
      }
      continue;
    }
    const Frame done = f;
    stack.pop_back();
    if (!recompute(done.execution, done.keep)) return false;
  }
  return true;
}

// Re-runs `execution`, whose inputs are resident and pinned (one pin per listed input).
bool Engine::recompute(std::uint32_t execution, std::uint32_t keep) {
  const RematExecution& x = graph_.execution(execution);
  std::vector<std::uint32_t> placed;
  std::vector<Block> temporaries;
  std::vector<std::uint32_t> temporary_of;  // their storages
  std::vector<std::uint32_t> outputs;
  std::vector<LogRef> writes;
  for (std::uint32_t w : x.outputs) push_unique(outputs, w);
  for (std::uint32_t w : outputs) {
    const RematValue& wv = graph_.value(w);
    auto b = obtain_block(AllocRequest{wv.size, 0, TensorId{wv.storage}});
    if (!b) return false;
    log_alloc(wv.storage, *b, /*fresh=*/false);
    if (logging()) writes.push_back(LogRef{wv.storage, value_version_[w], b->addr, b->size});
    if (wv.state == ValueState::Evicted) {
      graph_.place(w, *b);
      graph_.pin(w);
      placed.push_back(w);
    } else {
      temporaries.push_back(*b);  // a second copy of a resident, swapped or gone sibling
      temporary_of.push_back(wv.storage);
    }
  }
  const SimTime start = now_;
  now_ = later(now_, x.cost, [&] {
    return fmt::format("recomputing op {} ({} ns) at {} ns", trace_.ops[x.op].file_id, x.cost.count(), now_.count());
  });
  graph_.advance(x.cost);
  if (logging()) {
    std::vector<LogRef> reads;
    std::vector<std::uint32_t> seen;
    for (std::uint32_t u : x.inputs) {
      if (std::find(seen.begin(), seen.end(), u) != seen.end()) continue;
      seen.push_back(u);
      reads.push_back(value_ref(u));
    }
    log_op(LogKind::Recompute, x.op, start, reads, writes, exec_record_[execution]);
  }
  ++rep_.time.recomputes;
  rep_.time.recompute_time += x.cost;
  for (std::uint32_t w : placed) graph_.computed(w);
  for (std::uint32_t u : x.inputs) {
    graph_.touch(u);
    graph_.unpin(u);
  }
  for (std::uint32_t w : placed) graph_.unpin(w);
  for (std::size_t i = 0; i < temporaries.size(); ++i) free_block(temporary_of[i], temporaries[i]);
  // Eager eviction after recompute: released values were only needed for this.
  std::vector<std::uint32_t> inputs;
  for (std::uint32_t u : x.inputs) push_unique(inputs, u);
  for (std::uint32_t u : inputs) {
    const RematValue& uv = graph_.value(u);
    if (uv.released && uv.pins == 0 && uv.state == ValueState::Resident && !uv.unevictable) evict_value(u, false);
  }
  for (std::uint32_t w : placed) {
    const RematValue& wv = graph_.value(w);
    if (w != keep && wv.released && wv.pins == 0 && wv.state == ValueState::Resident) evict_value(w, false);
  }
  if (thrash_at_.count() >= 0 && rep_.time.recompute_time > thrash_at_) {
    record_thrash();
    return false;
  }
  return true;
}

}  // namespace coopsim::engine_detail
