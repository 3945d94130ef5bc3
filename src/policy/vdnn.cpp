// vdnn policy (see src/policy/vdnn.hpp; docs/models/swap-policies.md).
#include "vdnn.hpp"
#include "coopsim/policy/registry.hpp"

#include <algorithm>
#include <cctype>
#include <string>

#include "coopsim/base/error.hpp"
#include "swap_schedule.hpp"

namespace coopsim {

using swap_detail::PlannedSwap;

namespace {

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// Event index of the first mark labelled `label` in [b, e), or e.
std::size_t find_mark(const Trace& trace, std::size_t b, std::size_t e, std::string_view label) {
  for (std::size_t i = b; i < e; ++i) {
    const TraceEvent& ev = trace.events[i];
    if (ev.kind == EventKind::Mark && trace.labels[ev.label_index()] == label) return i;
  }
  return e;
}

bool feature_map(const TensorInfo& t) { return t.role == TensorRole::Activation || t.role == TensorRole::Input; }

}  // namespace

bool VdnnPolicy::is_conv(std::string_view op_name) {
  std::string lower(op_name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return contains(lower, "conv") && !contains(lower, "backward");
}

std::vector<ParamDoc> VdnnPolicy::param_docs() {
  return {
      ParamDoc{"variant",
               ParamType::String,
               "all",
               "vDNN_all offloads the inputs of every forward layer, vDNN_conv only those of "
               "convolutions",
               {"all", "conv"}},
      ParamDoc{"fallback",
               ParamType::Bool,
               "false",
               "on a failed allocation swap out the tensor used furthest in the future (Belady); "
               "vDNN itself has no such fallback",
               {}},
  };
}

std::unique_ptr<Policy> VdnnPolicy::create(const Params& p) {
  VdnnOptions o;
  o.conv_only = p.get_string("variant") == "conv";
  o.fallback = p.get_bool("fallback");
  return std::make_unique<VdnnPolicy>(o);
}

VdnnPolicy::VdnnPolicy(VdnnOptions o) : ScheduledSwapPolicy(o.fallback), opts_(o) {}
VdnnPolicy::~VdnnPolicy() = default;

void VdnnPolicy::prepare(const MemoryView& view) {
  const Trace& trace = view.trace();
  const swap_detail::UseIndex& uses = index_uses(trace);
  std::vector<PlannedSwap> plan;
  std::vector<std::uint8_t> chosen(trace.tensors.size());
  for (const auto& [b, e] : swap_detail::iteration_ranges(trace)) {
    const std::size_t backward = find_mark(trace, b, e, "backward");
    if (backward == e) continue;  // no backward pass marked: nothing to offload
    std::fill(chosen.begin(), chosen.end(), 0);
    std::vector<std::uint32_t> computes_in_backward;
    for (std::size_t i = backward; i < e; ++i) {
      if (trace.events[i].kind == EventKind::Compute) computes_in_backward.push_back(static_cast<std::uint32_t>(i));
    }
    for (std::size_t i = b; i < backward; ++i) {
      const TraceEvent& ev = trace.events[i];
      if (ev.kind != EventKind::Compute) continue;
      const OpInfo& op = trace.op(ev.compute_op());
      if (opts_.conv_only && !is_conv(op.name)) continue;
      for (TensorId x : op.inputs) {
        const std::uint32_t s = trace.storage_of(index_of(x));
        if (chosen[s] != 0 || !feature_map(trace.tensors[s]) || trace.tensors[s].size.value == 0) continue;
        chosen[s] = 1;
        const auto& u = uses.uses(s);
        const auto first_bwd = std::lower_bound(u.begin(), u.end(), backward);
        if (first_bwd == u.end() || *first_bwd >= e || first_bwd == u.begin()) continue;
        const std::uint32_t last_fwd = *(first_bwd - 1), use = *first_bwd;
        // One layer ahead: start just before the backward layer that precedes the use.
        auto prev_layer = std::lower_bound(computes_in_backward.begin(), computes_in_backward.end(), use);
        std::uint32_t in_at = static_cast<std::uint32_t>(backward);
        if (prev_layer != computes_in_backward.begin()) in_at = std::max(in_at, *(prev_layer - 1) - 1);
        plan.push_back({s, last_fwd, in_at, use});
      }
    }
  }
  set_plan(std::move(plan));
}

// Its line in the registry (src/policy/registry.cpp).
PolicyRegistry::Entry vdnn_policy_entry() { return PolicyRegistry::entry_for<VdnnPolicy>(); }

}  // namespace coopsim
