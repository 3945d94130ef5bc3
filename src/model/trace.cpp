// Names of roles and event kinds, summary figures and the in-memory fan-in caps of a trace.
#include "coopsim/model/trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>

#include "coopsim/base/error.hpp"

namespace coopsim {
namespace {

constexpr std::array<std::pair<TensorRole, std::string_view>, 7> kRoles{{
    {TensorRole::Parameter, "parameter"},
    {TensorRole::Input, "input"},
    {TensorRole::Activation, "activation"},
    {TensorRole::Gradient, "gradient"},
    {TensorRole::OptimizerState, "optimizer_state"},
    {TensorRole::Workspace, "workspace"},
    {TensorRole::Other, "other"},
}};

std::uint64_t sat_add(std::uint64_t a, std::uint64_t b) {
  return a > std::numeric_limits<std::uint64_t>::max() - b ? std::numeric_limits<std::uint64_t>::max() : a + b;
}

std::int64_t sat_add(std::int64_t a, std::int64_t b) {  // b >= 0
  return a > std::numeric_limits<std::int64_t>::max() - b ? std::numeric_limits<std::int64_t>::max() : a + b;
}

}  // namespace

std::string_view to_string(TensorRole r) {
  for (const auto& [role, name] : kRoles) {
    if (role == r) return name;
  }
  return "other";
}

std::optional<TensorRole> parse_role(std::string_view s) {
  for (const auto& [role, name] : kRoles) {
    if (name == s) return role;
  }
  return std::nullopt;
}

std::string_view to_string(EventKind k) {
  switch (k) {
    case EventKind::Alloc: return "alloc";
    case EventKind::Free: return "free";
    case EventKind::Access: return "access";
    case EventKind::Compute: return "compute";
    case EventKind::Iteration: return "iteration";
    case EventKind::Mark: return "mark";
  }
  return "unknown";
}

TraceSummary summarize(const Trace& trace) {
  TraceSummary s;
  s.tensors = trace.tensors.size();
  for (const auto& t : trace.tensors) {
    if (t.is_view()) ++s.views;
  }
  s.ops = trace.ops.size();
  s.events = trace.events.size();
  // Liveness is tracked defensively so that hand-built traces with unmatched frees cannot
  // underflow the running total.
  std::vector<std::uint8_t> live(trace.tensors.size(), 0);
  std::uint64_t current = 0, peak = 0, total = 0;
  std::int64_t compute = 0;
  // Tensors placed by the initial state are live from the start.
  for (const auto& seg : trace.initial_segments) {
    ++s.initial_segments;
    s.initial_reserved += seg.size();
    for (const auto& b : seg.blocks) {
      if (b.is_free() || index_of(b.tensor) >= trace.tensors.size() || live[index_of(b.tensor)]) continue;
      live[index_of(b.tensor)] = 1;
      ++s.initial_tensors;
      current = sat_add(current, trace.tensor(b.tensor).size.value);
    }
  }
  s.initial_live = Bytes{current};
  peak = current;
  for (const auto& e : trace.events) {
    switch (e.kind) {
      case EventKind::Alloc: {
        ++s.allocs;
        const std::uint32_t t = index_of(e.tensor());
        if (t >= trace.tensors.size()) break;
        const std::uint64_t size = trace.tensors[t].size.value;
        total = sat_add(total, size);
        if (!live[t]) {
          live[t] = 1;
          current = sat_add(current, size);
          if (current > peak) peak = current;
        }
        break;
      }
      case EventKind::Free: {
        ++s.frees;
        const std::uint32_t t = index_of(e.tensor());
        if (t < trace.tensors.size() && live[t]) {
          live[t] = 0;
          const std::uint64_t size = trace.tensors[t].size.value;
          current = size > current ? 0 : current - size;
        }
        break;
      }
      case EventKind::Access: ++s.accesses; break;
      case EventKind::Compute: {
        ++s.computes;
        const std::uint32_t op = index_of(e.compute_op());
        if (op < trace.ops.size() && trace.ops[op].duration.count() > 0) {
          compute = sat_add(compute, trace.ops[op].duration.count());
        }
        break;
      }
      case EventKind::Iteration: ++s.iterations; break;
      case EventKind::Mark: break;
    }
  }
  s.peak_live = Bytes{peak};
  s.total_allocated = Bytes{total};
  s.compute_time = SimTime{compute};
  return s;
}

void check_limits(const Trace& trace, const Limits& limits, const std::string& file) {
  auto fail = [&](const std::string& problem) { throw Error(fmt::format("{}: {}", file, problem)); };
  if (trace.tensors.size() > limits.max_tensors) fail(limit_problem(limits.max_tensors, "tensors", "max_tensors"));
  if (trace.events.size() > limits.max_events) fail(limit_problem(limits.max_events, "events", "max_events"));
  for (const OpInfo& op : trace.ops) {
    const std::size_t most = std::max({op.inputs.size(), op.outputs.size(), op.mutated.size(), op.views.size()});
    if (most > limits.max_op_fan_in) {
      fail(fmt::format("op {}: {}", op.file_id, limit_problem(limits.max_op_fan_in, "tensors", "max_op_fan_in")));
    }
  }
}

}  // namespace coopsim
