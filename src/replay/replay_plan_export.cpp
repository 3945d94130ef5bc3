// plan_from_runlog: the run's event log (runlog.hpp) as a replayable plan (docs/plan-format.md).
//
// Steps are the log's physical records in log order (transfers sit where the engine recorded
// their completion; Stall and Memory records carry no step). Offsets are addresses minus one
// base: 0 when every block already lies in [0, budget) (arena allocators), else the lowest
// address used. `after` lists come from the steps' accesses (plan_order.hpp): every
// read-after-write, write-after-read and write-after-write conflict with a step of another
// stream, plus, for a swap-out, the compute-stream step it was issued after (the last one that
// had finished when the copy started). Each list keeps only the steps not already implied by
// the others and by stream order.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>

#include "coopsim/replay/replay_plan.hpp"
#include "coopsim/model/link.hpp"
#include "coopsim/model/report.hpp"
#include "coopsim/model/runlog.hpp"
#include "coopsim/model/trace.hpp"
#include "replay_plan_order.hpp"

namespace coopsim::gpu {

namespace {

class Exporter {
 public:
  Exporter(const Trace& trace, const RunLog& log, const Report& report) : trace_(trace), log_(log), report_(report) {}

  Plan run(const LinkModel& link) {
    check_replayable();
    fill_header(link);
    for (std::uint32_t i = 0; i < log_.records.size(); ++i) add_record(i);
    for (const TensorId s : storages_) {
      const TensorInfo& t = trace_.tensor(s);
      plan_.tensors.push_back(PlanTensor{s, t.file_id, t.size, t.name});
    }
    for (const OpId o : ops_) {
      const OpInfo& op = trace_.op(o);
      plan_.ops.push_back(PlanOp{o, op.file_id, op.name, op.duration});
    }
    link_steps();
    return std::move(plan_);
  }

 private:
  void check_replayable() {
    if (report_.status != RunStatus::Completed) {
      throw Error(fmt::format("--plan: the run ended in {}: only a completed run has a plan to replay",
                              to_string(report_.status)));
    }
    if (!log_.address_aware) {
      throw Error(
          fmt::format("--plan: allocator {} does not place blocks at addresses; a plan needs an "
                      "address-aware allocator such as bestfit",
                      report_.allocator));
    }
    std::uint64_t lowest = UINT64_MAX, highest_end = 0;
    for (const LogRecord& r : log_.records) {
      if (r.kind != LogKind::Alloc) continue;
      lowest = std::min(lowest, log_.ref(r).addr);
      highest_end = std::max(highest_end, log_.ref(r).addr + log_.ref(r).size.value);
    }
    base_ = highest_end <= log_.budget.value ? 0 : lowest;
    for (const LogRecord& r : log_.records) {
      if (r.kind != LogKind::Alloc) continue;
      const LogRef& ref = log_.ref(r);
      if (ref.addr - base_ + ref.size.value > log_.budget.value) {
        throw Error(fmt::format(
            "--plan: allocator {} placed tensor {} at addresses [{:#x}, {:#x}), beyond one arena of the budget "
            "({} bytes) from {:#x}; a plan needs blocks that fit one arena (e.g. --allocator bestfit)",
            report_.allocator, trace_.tensor(ref.storage).file_id, ref.addr, ref.addr + ref.size.value,
            log_.budget.value, base_));
      }
    }
  }

  void fill_header(const LinkModel& link) {
    PlanHeader& h = plan_.header;
    h.coopsim_version = report_.coopsim_version;
    h.trace_path = report_.trace_path;
    h.model = report_.model;
    h.trace_hash = report_.trace_hash;
    h.iterations = report_.iterations;
    h.allocator = report_.allocator;
    h.policy = report_.policy;
    h.budget = log_.budget;
    h.arena_size = log_.budget;
    h.address_base = base_;
    h.link = PlanLink{link.name,        link.d2h.ns_per_byte, link.h2d.ns_per_byte,
                      link.d2h.latency, link.h2d.latency,     link.serial};
    h.simulated_time = report_.time.simulated;
    h.stall_time = report_.time.stall;
    h.op_time = report_.time.op_time;
    h.recompute_time = report_.time.recompute_time;
  }

  PlanRef ref(const LogRef& r) {
    storages_.insert(r.storage);
    return PlanRef{r.storage, r.version, r.addr - base_, r.size};
  }

  PlanStep& push(StepKind kind, const LogRecord& r, RecordId record) {
    PlanStep s;
    s.kind = kind;
    s.stream = stream_of(kind);
    s.start = r.start;
    s.end = r.end;
    step_of_record_[record] = StepId{static_cast<std::uint32_t>(plan_.steps.size())};
    plan_.steps.push_back(std::move(s));
    return plan_.steps.back();
  }

  // A read of version 0 from a block that still holds what its fresh allocation put there:
  // the replay must write version 0's pattern when it allocates the block.
  void note_read(const PlanRef& r) {
    auto it = pristine_.find(r.offset);
    if (r.version == 0 && it != pristine_.end() && it->second != kNoStep) plan_.steps[index_of(it->second)].fill = true;
  }
  void note_write(const PlanRef& r) {
    if (auto it = pristine_.find(r.offset); it != pristine_.end()) it->second = kNoStep;
  }

  void add_record(std::uint32_t i) {
    const LogRecord& r = log_.records[i];
    const RecordId id{i};
    switch (r.kind) {
      case LogKind::Alloc: {
        PlanStep& s = push(StepKind::Alloc, r, id);
        s.block = ref(log_.ref(r));
        s.block.version = 0;
        s.fresh = r.fresh;
        pristine_[s.block.offset] = r.fresh ? StepId{static_cast<std::uint32_t>(plan_.steps.size() - 1)} : kNoStep;
        return;
      }
      case LogKind::Free: {
        PlanStep& s = push(StepKind::Free, r, id);
        s.block = ref(log_.ref(r));
        s.block.version = 0;
        pristine_.erase(s.block.offset);
        return;
      }
      case LogKind::Evict: {
        PlanStep& s = push(StepKind::Evict, r, id);
        s.block = ref(log_.ref(r));
        s.forced = r.forced;
        note_write(s.block);
        return;
      }
      case LogKind::Access: {
        PlanStep& s = push(StepKind::Access, r, id);
        s.block = ref(log_.ref(r));
        note_read(s.block);
        return;
      }
      case LogKind::Compute:
      case LogKind::Recompute: {
        PlanStep& s = push(r.kind == LogKind::Compute ? StepKind::Op : StepKind::Recompute, r, id);
        s.op = r.op;
        ops_.insert(r.op);
        for (std::uint32_t k = 0; k < r.reads; ++k) s.reads.push_back(ref(log_.ref(r, k)));
        for (std::uint32_t k = 0; k < r.writes; ++k) s.writes.push_back(ref(log_.ref(r, r.reads + k)));
        if (r.kind == LogKind::Recompute) {
          const auto it = step_of_record_.find(r.origin);
          if (it == step_of_record_.end() || plan_.step(it->second).kind != StepKind::Op) {
            throw Error(
                fmt::format("--plan: event log record {} recomputes from record {}, which is not an "
                            "earlier compute record",
                            i, index_of(r.origin)));
          }
          s.origin = it->second;
        }
        const PlanStep& done = plan_.steps.back();
        for (const auto& x : done.reads) note_read(x);
        for (const auto& x : done.writes) note_write(x);
        return;
      }
      case LogKind::SwapOut:
      case LogKind::SwapIn: {
        PlanStep& s = push(r.kind == LogKind::SwapOut ? StepKind::SwapOut : StepKind::SwapIn, r, id);
        s.block = ref(log_.ref(r));
        s.bytes = trace_.tensor(s.block.tensor).size;
        if (r.kind == LogKind::SwapOut) {
          note_read(plan_.steps.back().block);
        } else {
          note_write(plan_.steps.back().block);
        }
        return;
      }
      case LogKind::Stall:
      case LogKind::Memory: return;
    }
  }

  // The compute-stream step a swap-out starting at `start` was issued after: the last one
  // listed before `before` that had finished by `start` (and began before it).
  StepId issue_point(StepId before, SimTime start) const {
    auto it = std::lower_bound(compute_steps_.begin(), compute_steps_.end(), before);
    while (it != compute_steps_.begin()) {
      --it;
      const PlanStep& c = plan_.step(*it);
      if (c.end <= start && c.start < start) return *it;
    }
    return kNoStep;
  }

  void link_steps() {
    detail::RangeHistory arena, host;
    detail::StepOrder order;
    std::vector<StepId> candidates;
    for (std::uint32_t index = 0; index < plan_.steps.size(); ++index) {
      const StepId i{index};
      PlanStep& s = plan_.steps[index];
      const auto accesses = detail::accesses_of(s);
      candidates.clear();
      for (const auto& a : accesses) {
        (a.space == detail::Space::Arena ? arena : host).conflicts(a.lo, a.hi, a.write, candidates);
      }
      if (s.kind == StepKind::SwapOut) {
        if (const StepId p = issue_point(i, s.start); p != kNoStep) candidates.push_back(p);
      }
      std::erase_if(candidates, [&](StepId c) { return c == i || plan_.step(c).stream == s.stream; });
      std::sort(candidates.begin(), candidates.end(), std::greater<>());
      candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
      for (const StepId c : candidates) {
        if (!order.implied(s.stream, s.after, c)) s.after.push_back(c);
      }
      std::sort(s.after.begin(), s.after.end());
      order.add(s.stream, s.after);
      for (const auto& a : accesses) {
        (a.space == detail::Space::Arena ? arena : host).record(a.lo, a.hi, a.write, i, s.stream);
      }
      if (s.stream == Stream::Compute) compute_steps_.push_back(i);
    }
  }

  const Trace& trace_;
  const RunLog& log_;
  const Report& report_;
  Plan plan_;
  std::uint64_t base_ = 0;
  std::set<TensorId> storages_;
  std::set<OpId> ops_;
  std::map<RecordId, StepId> step_of_record_;
  std::map<std::uint64_t, StepId> pristine_;  // live block offset -> its fresh alloc step, or kNoStep
  std::vector<StepId> compute_steps_;
};

}  // namespace

Plan plan_from_runlog(const Trace& trace, const RunLog& log, const Report& report, const LinkModel& link) {
  return Exporter(trace, log, report).run(link);
}

}  // namespace coopsim::gpu
