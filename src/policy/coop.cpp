// coop policy (see src/policy/coop.hpp).
#include "coop.hpp"
#include "coopsim/policy/registry.hpp"

#include <algorithm>
#include <array>

#include "coopsim/base/error.hpp"
#include "remat/sliding_window.hpp"

namespace coopsim {

namespace {
constexpr std::string_view kNoOpGuided = "no op-guided allocation";
constexpr std::string_view kNoRecomputableInPlace = "no recomputable in-place";
constexpr std::string_view kNoLayoutAware = "no layout-aware eviction";

// Strips a namespace ("aten::") and an overload (".Tensor").
std::string_view bare_op_name(std::string_view name) {
  if (const auto colon = name.rfind("::"); colon != std::string_view::npos) name.remove_prefix(colon + 2);
  if (const auto dot = name.find('.'); dot != std::string_view::npos) name = name.substr(0, dot);
  return name;
}
}  // namespace

std::vector<ParamDoc> CoopPolicy::param_docs() {
  std::vector<ParamDoc> d{
      ParamDoc{"ablation",
               ParamType::String,
               "none",
               "turn one technique off, named as in the paper's ablation study",
               {"none", std::string(kNoOpGuided), std::string(kNoRecomputableInPlace), std::string(kNoLayoutAware)}},
      ParamDoc{"layout_aware_eviction",
               ParamType::Bool,
               "true",
               "sliding-window eviction of one contiguous, minimum-cost range (else the per-tensor "
               "DTE-style loop)",
               {}},
      ParamDoc{"op_guided_allocation",
               ParamType::Bool,
               "true",
               "cheap tensor partitioning: cheap tensors at the high end of the best-fit hole",
               {}},
      ParamDoc{"partition",
               ParamType::String,
               "op-name",
               "how tensors are classified cheap/expensive: op-name (OneFlow's is_high_op list) "
               "or cost-density (op time / bytes against density_threshold)",
               {"op-name", "cost-density"}},
      ParamDoc{"compat",
               ParamType::String,
               "none",
               "oneflow: OneFlow's rules where coopsim's defaults differ (only OneFlow's six expensive "
               "ops at the low end, parameters and inputs at the high end, OOM when no window yields "
               "an eviction); docs/models/coop.md",
               {"none", "oneflow"}},
      ParamDoc{"density_threshold",
               ParamType::Float,
               "0",
               "cost-density partitioning: ns of op time per byte at or above which a tensor is "
               "expensive; 0 = the median over the trace's produced tensors",
               {}},
  };
  for (auto& o : remat_option_docs(InPlaceMode::Recomputable)) d.push_back(std::move(o));
  return d;
}

std::unique_ptr<Policy> CoopPolicy::create(const Params& p) {
  CoopOptions o;
  o.remat = parse_remat_options(p);
  o.layout_aware_eviction = p.get_bool("layout_aware_eviction");
  o.op_guided_allocation = p.get_bool("op_guided_allocation");
  o.partition_by_density = p.get_string("partition") == "cost-density";
  o.density_threshold = p.get_float("density_threshold");
  o.oneflow_compat = p.get_string("compat") == "oneflow";
  if (o.oneflow_compat && o.partition_by_density) {
    throw ConfigError(p.component() + ".partition", "compat=oneflow classifies tensors by OneFlow's op names (op-name)");
  }
  if (!(o.density_threshold >= 0.0)) throw ConfigError(p.component() + ".density_threshold", "must be >= 0");
  const std::string ablation = p.get_string("ablation");
  if (ablation == kNoOpGuided) o.op_guided_allocation = false;
  if (ablation == kNoRecomputableInPlace) o.remat.inplace = InPlaceMode::CopyOnWrite;
  if (ablation == kNoLayoutAware) o.layout_aware_eviction = false;
  return std::make_unique<CoopPolicy>(o);
}

bool CoopPolicy::expensive_op_name(std::string_view name) {
  name = bare_op_name(name);
  static constexpr std::array<std::string_view, 15> kExpensive{
      // OneFlow is_high_op (oneflow/core/vm/remat/allocator.cpp)
      "conv2d", "conv_data_grad", "conv_filter_grad", "add_n", "matmul", "batch_matmul",
      // their ATen counterparts
      "convolution", "_convolution", "cudnn_convolution", "convolution_backward", "mm", "addmm", "bmm", "baddbmm",
      "linear"};
  return std::find(kExpensive.begin(), kExpensive.end(), name) != kExpensive.end();
}

bool CoopPolicy::oneflow_expensive_op_name(std::string_view name) {
  name = bare_op_name(name);
  // OneFlow's high_compute_cost_names (Oneflow-Inc/oneflow @25c8978c1c
  // oneflow/core/vm/remat/allocator.cpp:423-424), and the ATen ops OneFlow runs as one of them:
  // convolutions (conv2d; their backward = conv_data_grad + conv_filter_grad), mm (matmul), bmm
  // (batch_matmul). Not addmm / baddbmm / linear: a Linear with bias is OneFlow's
  // fused_matmul_bias, and a matmul over more than two dimensions its broadcast_matmul, both
  // cheap there. ATen has no add_n (autograd sums gradients with add, cheap in OneFlow too).
  static constexpr std::array<std::string_view, 12> kExpensive{
      "conv2d", "conv_data_grad", "conv_filter_grad", "add_n", "matmul", "batch_matmul",
      "convolution", "_convolution", "cudnn_convolution", "convolution_backward", "mm", "bmm"};
  return std::find(kExpensive.begin(), kExpensive.end(), name) != kExpensive.end();
}

void CoopPolicy::prepare(const MemoryView& view) {
  const Trace& trace = view.trace();
  // OneFlow places every tensor that is not an expensive op's output at the high end, parameters
  // and inputs included; coopsim's default keeps those (unevictable) together at the low end.
  cheap_.assign(trace.tensors.size(), opts_.oneflow_compat ? 1 : 0);
  std::vector<std::uint8_t> seen(trace.tensors.size(), 0);
  std::vector<std::pair<std::uint32_t, double>> density;  // storage, ns per byte
  for (const TraceEvent& e : trace.events) {
    if (e.kind != EventKind::Compute) continue;
    const OpInfo& op = trace.op(e.compute_op());
    auto classify = [&](TensorId t) {
      const std::uint32_t s = trace.storage_of(index_of(t));
      if (seen[s] != 0 || trace.tensors[index_of(t)].is_view()) return;
      seen[s] = 1;
      if (opts_.partition_by_density) {
        density.emplace_back(s, static_cast<double>(op.duration.count()) /
                                    static_cast<double>(std::max<std::uint64_t>(1, trace.tensors[s].size.value)));
      } else {
        const bool expensive = opts_.oneflow_compat ? oneflow_expensive_op_name(op.name) : expensive_op_name(op.name);
        cheap_[s] = expensive ? 0 : 1;
      }
    };
    for (TensorId t : op.outputs) classify(t);
    if (op.outputs.empty()) {
      for (TensorId t : op.mutated) classify(t);
    }
  }
  if (!opts_.partition_by_density || density.empty()) return;
  double threshold = opts_.density_threshold;
  if (threshold == 0.0) {
    std::vector<double> d;
    d.reserve(density.size());
    for (const auto& x : density) d.push_back(x.second);
    std::nth_element(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(d.size() / 2), d.end());
    threshold = d[d.size() / 2];
  }
  for (const auto& [s, dens] : density) cheap_[s] = dens < threshold ? 1 : 0;
}

// Inline: the layout walk adds every candidate of every search through them.
inline void CoopPolicy::add_barrier() {
  pieces_.push_back(WindowPiece{Bytes{0}, true, 0.0});
  owner_.push_back(kNoValue);
}

inline void CoopPolicy::add_candidate(const RematGraph& g, ValueId v, Bytes size) {
  pieces_.push_back(WindowPiece{size, false, coop_score(g, v)});
  owner_.push_back(v);
}

// The pieces of the window search from the full list of ranges (models without free ranges by
// address, and the --paranoid cross-check).
void CoopPolicy::pieces_from_ranges(const MemoryView& view) {
  const RematGraph& g = *view.remat();
  const std::vector<Range> ranges = view.allocator().ranges();
  pieces_.clear();
  owner_.clear();
  const std::uint64_t limit = view.allocator().reclaimable_end();
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    const Range& r = ranges[i];
    if (r.addr >= limit) {  // eviction never reclaims what lies above (the small-piece area)
      add_barrier();
      break;
    }
    if (i > 0 && r.segment != ranges[i - 1].segment) add_barrier();  // windows never span two reservations
    if (r.free) {
      pieces_.push_back(WindowPiece{r.size, false, 0.0});
      owner_.push_back(kNoValue);
      continue;
    }
    const auto v = g.resident_at(r.addr);
    if (v && g.evictable(*v)) {
      add_candidate(g, *v, r.size);
    } else {
      add_barrier();
    }
  }
}

// The same pieces from the free ranges and the eviction candidates only (layout_walk.hpp): runs
// of barriers become one barrier, which the search treats alike. False when the allocator does
// not keep its free ranges by address.
bool CoopPolicy::pieces_from_layout(const MemoryView& view) {
  const RematGraph& g = *view.remat();
  pieces_.clear();
  owner_.clear();
  bool walked = false;
  const bool trailing = walk_layout(view.allocator(), g, layout_scratch_, walked, [&](const LayoutItem& it) {
    if (it.barrier_before) add_barrier();
    if (it.value == kNoValue) {
      pieces_.push_back(WindowPiece{it.size, false, 0.0});
      owner_.push_back(kNoValue);
    } else if (g.evictable(it.value)) {
      add_candidate(g, it.value, it.size);
    } else {
      add_barrier();
    }
  });
  if (trailing) add_barrier();
  return walked;
}

std::vector<Action> CoopPolicy::window_eviction(const AllocRequest& request, const MemoryView& view) {
  const Allocator& a = view.allocator();
  if (!a.address_aware()) return {};
  const bool walked = pieces_from_layout(view);
  if (!walked) pieces_from_ranges(view);
  WindowSearchStats stats;
  const auto w = find_min_cost_window(pieces_, a.placement_size(request), &stats);
  view.count_scanned(stats.pieces_examined);
  std::vector<Action> out;
  if (w) {
    for (std::size_t i = w->first; i < w->last; ++i) {
      if (owner_[i] != kNoValue) out.push_back(Action::evict(owner_[i]));
    }
  }
  if (walked && view.cross_check()) {
    // Cross-check: the search over every range chooses the same tensors after as many pieces.
    pieces_from_ranges(view);
    WindowSearchStats full_stats;
    const auto fw = find_min_cost_window(pieces_, a.placement_size(request), &full_stats);
    std::vector<ValueId> full;
    if (fw) {
      for (std::size_t i = fw->first; i < fw->last; ++i) {
        if (owner_[i] != kNoValue) full.push_back(owner_[i]);
      }
    }
    bool same = full.size() == out.size() && full_stats.pieces_examined == stats.pieces_examined;
    for (std::size_t i = 0; same && i < full.size(); ++i) same = full[i] == out[i].value;
    if (!same) {
      throw InvariantError("coop: the window over free ranges and candidates chose " + std::to_string(out.size()) +
                           " tensors after " + std::to_string(stats.pieces_examined) +
                           " pieces, the window over every range " + std::to_string(full.size()) + " after " +
                           std::to_string(full_stats.pieces_examined));
    }
  }
  return out;
}

std::vector<Action> CoopPolicy::on_alloc_failure(const AllocRequest& request, const MemoryView& view) {
  if (opts_.layout_aware_eviction) {
    auto window = window_eviction(request, view);
    if (!window.empty()) return window;
    // OneFlow: no window that evicts something means out of memory (no per-tensor fallback).
    if (opts_.oneflow_compat && view.allocator().address_aware()) return {};
  }
  if (auto v = find_victim(view, EvictionScore::Dte, draws_)) return {Action::evict(*v)};
  return {};
}

// Its line in the registry (src/policy/registry.cpp).
PolicyRegistry::Entry coop_policy_entry() { return PolicyRegistry::entry_for<CoopPolicy>(); }

}  // namespace coopsim
