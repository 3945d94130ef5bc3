// The event loop's bookkeeping (event_loop.hpp): memory observation, OOM points, recorded-address
// checks and the recorded initial state.
#include <algorithm>

#include "event_loop.hpp"

namespace coopsim::engine_detail {

void EventLoop::observe_memory() {
  rep_.observed(alloc_.stats());
  log_memory();
}

void EventLoop::check_address(std::uint64_t recorded, std::uint64_t placed) {
  rep_.address_checked(recorded, placed, event_index());
}

void EventLoop::record_oom(TensorId t, Bytes requested) {
  stop(RunStatus::OutOfMemory);
  OomPoint p;
  p.event = event_index();
  p.iteration = iteration_;
  p.tensor_file_id = trace_.tensor(t).file_id;
  p.tensor_name = trace_.tensor(t).name;
  p.requested = requested;
  const AllocatorStats s = alloc_.stats();
  p.allocated = s.allocated;
  p.reserved = s.reserved;
  p.largest_free = s.largest_free;
  // The op this allocation is for: the next compute that reads or writes the tensor.
  for (std::size_t i = index_; i < trace_.events.size(); ++i) {
    const TraceEvent& e = trace_.events[i];
    if (e.kind != EventKind::Compute) continue;
    const OpInfo& op = trace_.op(e.compute_op());
    auto touches = [&](const std::vector<TensorId>& v) {
      return std::any_of(v.begin(), v.end(), [&](TensorId x) { return trace_.storage_of(x) == t; });
    };
    if (touches(op.outputs) || touches(op.inputs)) {
      p.has_op = true;
      p.op_name = op.name;
      p.op_file_id = op.file_id;
      break;
    }
  }
  p.segsum = explain_oom(alloc_, *exec_, trace_);
  rep_.out_of_memory_at(std::move(p));
}

ConfigError EventLoop::seed_unsupported() const {
  return ConfigError("allocator", "allocator " +
                                      (rep_.allocator_name().empty() ? std::string("model") : rep_.allocator_name()) +
                                      " cannot start from a recorded state (" + trace_.path +
                                      " begins with one: use an allocator that supports it, e.g. pytorch, or "
                                      "--initial-state empty)");
}

// A trace recorded from a running program starts from its recorded allocator state: the model
// takes the initial segments and the tensors in them are resident with their blocks. The
// recorded addresses of later segments go to the model as a placement plan.
void EventLoop::seed_initial_state() {
  alloc_.assign_segment_addresses(trace_.segment_addresses);
  if (trace_.initial_segments.empty()) return;
  std::vector<SeedSegment> seeds;
  std::vector<TensorId> owners;  // tensor of each allocated seed block, in order
  seeds.reserve(trace_.initial_segments.size());
  for (const InitialSegment& s : trace_.initial_segments) {
    SeedSegment& g = seeds.emplace_back();
    g.addr = s.addr;
    g.stream = s.stream;
    g.pool = s.pool;
    g.expandable = s.expandable;
    for (const InitialBlock& b : s.blocks) {
      const bool allocated = !b.is_free();
      g.blocks.push_back({b.size, allocated ? trace_.tensor(b.tensor).size : Bytes{0}, allocated});
      if (allocated) owners.push_back(b.tensor);
    }
  }
  // A recorded state larger than the budget makes the run infeasible (a failed run, as an OOM
  // is), not an error: budget lists, sweeps and minbudget probes go on. Allocators that cannot
  // start from a recorded state are still an error, so ask first (seeding nothing is a no-op).
  Bytes recorded;
  for (const InitialSegment& s : trace_.initial_segments) recorded += s.size();
  if (recorded > opt_.budget) {
    try {
      (void)alloc_.seed({});
    } catch (const SeedUnsupported&) {
      throw seed_unsupported();
    }
    stop(RunStatus::Infeasible);
    rep_.infeasible_at(InfeasiblePoint{recorded, trace_.initial_segments.size()});
    return;
  }
  std::vector<Block> placed;
  try {
    placed = alloc_.seed(seeds);
  } catch (const SeedUnsupported&) {
    throw seed_unsupported();
  } catch (const ConfigError& e) {  // e.g. the recorded segments exceed the budget
    throw ConfigError("allocator", trace_.path + ": the recorded initial state cannot be installed: " + e.what());
  }
  if (placed.size() != owners.size()) throw std::logic_error("allocator seed() returned the wrong number of blocks");
  for (std::size_t i = 0; i < owners.size(); ++i) {
    exec_->seed(owners[i], placed[i]);
    log_alloc(owners[i], placed[i], /*fresh=*/true);
  }
}

}  // namespace coopsim::engine_detail
