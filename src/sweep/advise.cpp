// `coopsim advise`: the candidates (PYTORCH_CUDA_ALLOC_CONF settings, then policies), their
// simulations at the usable capacity on a pool of threads, the ranking, and the minimum-budget search
// for PyTorch's defaults. Output: advise_output.cpp.
#include "coopsim/sweep/advise.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <map>
#include <thread>

#include "coopsim/alloc/pytorch.hpp"
#include "coopsim/base/error.hpp"
#include "coopsim/policy/policy.hpp"
#include "coopsim/sweep/sweep.hpp"

namespace coopsim::advise {
namespace {

constexpr std::uint64_t kMiB = 1ULL << 20;
// PyTorch refuses max_split_size_mb <= 20 (kLargeBuffer / 1 MiB).
constexpr std::uint64_t kMinSplitMb = 21;

// One option that differs from PyTorch's default: its PYTORCH_CUDA_ALLOC_CONF key and value as
// PyTorch parses them, and the `pytorch` model's parameter and value. In PyTorch's order.
struct ChangedOption {
  const char* conf_key;
  std::string conf_value;
  const char* param;
  std::string param_value;
};

std::vector<ChangedOption> changed_options(const AllocConf& c) {
  std::vector<ChangedOption> out;
  if (c.expandable_segments) out.push_back({"expandable_segments", "True", "expandable_segments", "true"});
  if (c.max_split_size_mb != 0) {
    const std::string mb = std::to_string(c.max_split_size_mb);
    out.push_back({"max_split_size_mb", mb, "max_split_size", mb + "MiB"});
  }
  if (c.roundup_power2_divisions != 0) {
    const std::string d = std::to_string(c.roundup_power2_divisions);
    out.push_back({"roundup_power2_divisions", d, "roundup_power2_divisions", d});
  }
  if (c.garbage_collection_threshold != 0.0) {
    const std::string t = fmt::format("{}", c.garbage_collection_threshold);  // shortest form: 0.6
    out.push_back({"garbage_collection_threshold", t, "garbage_collection_threshold", t});
  }
  return out;
}

// A request size at which the requests of at least that size hold `share` of the bytes of all
// requests from kMinSplitMb MiB up (counted once per alloc event): the sizes where the trace's
// large tensors sit.
std::optional<std::uint64_t> byte_share_size(std::vector<std::uint64_t> sizes, double share) {
  if (sizes.empty()) return std::nullopt;
  std::sort(sizes.begin(), sizes.end());
  long double total = 0;
  for (const auto s : sizes) total += static_cast<long double>(s);
  long double above = 0;
  for (auto it = sizes.rbegin(); it != sizes.rend(); ++it) {
    above += static_cast<long double>(*it);
    if (above >= total * static_cast<long double>(share)) return *it;
  }
  return sizes.front();
}

void add(std::vector<Candidate>& out, const AllocConf& c, const std::string& origin) {
  if (std::none_of(out.begin(), out.end(), [&](const Candidate& x) { return x.conf == c; })) {
    out.push_back({c, "keep", origin});
  }
}

Outcome outcome_of(const Candidate& c, const Report& r, std::uint64_t events) {
  Outcome o;
  o.candidate = c;
  o.status = r.status;
  o.peak_reserved = r.memory.peak_reserved;
  o.peak_allocated = r.memory.peak_allocated;
  o.compute_overhead = r.time.compute_overhead;
  o.alloc_retries = r.counters.alloc_retries;
  o.device_mallocs = r.counters.device_mallocs;
  o.events = events;
  if (r.oom) o.oom_event = index_of(r.oom->event);
  o.simulated = r.time.simulated;
  o.iterations = r.iterations;
  return o;
}

// Simulates every candidate on up to `jobs` threads. Each result lands at its candidate's index, so
// the outcomes do not depend on the thread count; of several failures the first by index is
// rethrown.
CheckedConfig config_of(const SimConfig& base, const Candidate& c, Bytes budget) {
  SimConfig cfg = base;
  for (const auto& s : conf_overrides(c.conf)) apply_override(cfg, s);
  cfg.doc["allocator"] = "pytorch";
  cfg.doc["policy"] = c.policy;
  cfg.doc["budget"] = budget.value;
  return check_config(cfg);
}

std::vector<Outcome> simulate_all(const SimConfig& base, const Trace& trace, const std::vector<Candidate>& cands,
                                  std::size_t first_index, std::uint64_t events, Bytes budget, const Options& o,
                                  std::vector<Report>* reports = nullptr) {
  std::vector<CheckedConfig> configs;
  for (const Candidate& c : cands) configs.push_back(config_of(base, c, budget));
  std::vector<std::optional<Report>> done(cands.size());
  std::vector<std::exception_ptr> failures(cands.size());
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < cands.size(); i = next++) {
      try {
        RunOptions ro;
        ro.audit = o.audit;
        done[i] = run_simulation(configs[i], trace, ro);
      } catch (...) {
        failures[i] = std::current_exception();
      }
    }
  };
  const unsigned cores = std::max(1U, std::thread::hardware_concurrency());
  const auto jobs =
      static_cast<unsigned>(std::min<std::size_t>(o.jobs > 0 ? o.jobs : cores, std::max<std::size_t>(1, cands.size())));
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < jobs; ++i) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (const auto& f : failures) {
    if (f) std::rethrow_exception(f);
  }
  std::vector<Outcome> out;
  for (std::size_t i = 0; i < cands.size(); ++i) {
    out.push_back(outcome_of(cands[i], *done[i], events));
    out.back().index = first_index + i;
    if (reports != nullptr) reports->push_back(std::move(*done[i]));
  }
  return out;
}

// Why the trace cannot drive a recompute or swap policy, or "" when it can (the rule of
// run_simulation's dataflow check: some op input or access event).
std::string no_dataflow(const Trace& trace, const SimConfig& base) {
  const auto engine = base.doc.find("engine");
  if (engine != base.doc.end() && engine->is_object() && engine->value("allow_no_dataflow", false)) return "";
  for (const OpInfo& op : trace.ops) {
    if (!op.inputs.empty()) return "";
  }
  for (const TraceEvent& e : trace.events) {
    if (e.kind == EventKind::Access) return "";
  }
  return trace.ops.empty() ? "the trace has no ops" : "none of the trace's ops reads a tensor";
}

}  // namespace

std::size_t AllocConf::changed() const { return changed_options(*this).size(); }

double Outcome::step_ms() const {
  return static_cast<double>(simulated.count()) / 1e6 / static_cast<double>(std::max<std::uint32_t>(1, iterations));
}

PolicyInPyTorch in_pytorch(const std::string& policy) {
  static const std::string checkpointing =
      "activation checkpointing (torch.utils.checkpoint), which PyTorch applies per block, not per tensor";
  if (policy == "vdnn") {
    return {"swap", "CPU offload of saved activations (torch.autograd.graph.save_on_cpu, which does not prefetch)",
            true};
  }
  if (policy == "coop" || policy == "dte" || policy == "dtr") return {"recompute", checkpointing, false};
  if (policy == "autoswap") {
    return {"swap",
            "CPU offload of saved activations (torch.autograd.graph.save_on_cpu), which PyTorch applies per region, "
            "not per tensor",
            false};
  }
  if (policy == "pooch" || policy == "capuchin") {
    return {"swap and recompute",
            "CPU offload and activation checkpointing, which PyTorch applies per region and per block, not per tensor",
            false};
  }
  return {"policy", "", false};
}

std::string conf_string(const AllocConf& c) {
  std::vector<std::string> parts;
  for (const auto& o : changed_options(c)) parts.push_back(fmt::format("{}:{}", o.conf_key, o.conf_value));
  return fmt::format("{}", fmt::join(parts, ","));
}

std::vector<std::string> conf_overrides(const AllocConf& c) {
  std::vector<std::string> sets;
  for (const auto& o : changed_options(c)) sets.push_back(fmt::format("pytorch.{}={}", o.param, o.param_value));
  return sets;
}

bool ranks_before(const Outcome& a, const Outcome& b) {
  if (a.fits() != b.fits()) return a.fits();
  if (a.fits()) {
    if (a.is_defaults() != b.is_defaults()) return a.is_defaults();
    const bool oa = in_pytorch(a.candidate.policy).offered, ob = in_pytorch(b.candidate.policy).offered;
    if (oa != ob) return oa;
    if (a.compute_overhead != b.compute_overhead) return a.compute_overhead < b.compute_overhead;
    if (a.alloc_retries != b.alloc_retries) return a.alloc_retries < b.alloc_retries;
    if (a.peak_reserved != b.peak_reserved) return a.peak_reserved < b.peak_reserved;
    const std::size_t ca = a.candidate.conf.changed(), cb = b.candidate.conf.changed();
    if (ca != cb) return ca < cb;
  } else {
    const std::uint64_t pa = a.oom_event.value_or(0), pb = b.oom_event.value_or(0);
    if (pa != pb) return pa > pb;
  }
  return a.index < b.index;
}

void rank(std::vector<Outcome>& outcomes) { std::stable_sort(outcomes.begin(), outcomes.end(), ranks_before); }

std::vector<Candidate> first_round(const Trace& trace, std::vector<std::string>& not_tried) {
  std::vector<Candidate> out;
  add(out, {}, "default");
  add(out, {.expandable_segments = true}, "fixed");

  // The largest block the trace can make: a segment for its largest request (PyTorch's
  // get_allocation_size). A max_split_size above it splits and releases exactly as no limit.
  std::uint64_t largest = 0;
  std::vector<std::uint64_t> large;
  auto request = [&](std::uint64_t bytes) {
    largest = std::max(largest, bytes);
    if (bytes >= kMinSplitMb * kMiB) large.push_back(bytes);
  };
  for (const InitialSegment& s : trace.initial_segments) {  // requests too when simulated from empty
    for (const InitialBlock& b : s.blocks) {
      if (!b.is_free()) request(trace.tensor(b.tensor).size.value);
    }
  }
  for (const TraceEvent& e : trace.events) {
    if (e.kind == EventKind::Alloc) request(trace.tensor(e.tensor()).size.value);
  }
  const std::uint64_t largest_block =
      PyTorchCachingAllocator::allocation_size(PyTorchCachingAllocator::round_size(largest, PyTorchOptions{}));
  std::map<std::uint64_t, std::string> splits;  // MiB -> origin, in increasing order
  for (const std::uint64_t mb : {128, 256, 512}) splits.emplace(mb, "fixed");
  // Sizes of the trace's large tensors: where the requests above hold half, and a tenth, of the
  // large-request bytes; rounded down to whole MiB so those requests count as oversize.
  for (const double share : {0.5, 0.1}) {
    const auto s = byte_share_size(large, share);
    if (s && *s / kMiB >= kMinSplitMb) splits.emplace(*s / kMiB, "trace sizes");
  }
  for (const auto& [mb, origin] : splits) {
    if (mb * kMiB > largest_block) {
      not_tried.push_back(fmt::format("max_split_size_mb:{} (no block reaches {} MiB: the largest segment is {})", mb,
                                      mb, format_bytes(Bytes{largest_block})));
      continue;
    }
    add(out, {.max_split_size_mb = mb}, origin);
  }
  for (const std::uint32_t d : {2U, 4U, 8U, 16U}) add(out, {.roundup_power2_divisions = d}, "fixed");
  for (const double t : {0.6, 0.8}) add(out, {.garbage_collection_threshold = t}, "fixed");
  return out;
}

std::vector<Candidate> second_round(const std::vector<Outcome>& ranked_first) {
  auto best = [&](auto pick) -> std::optional<AllocConf> {
    for (const Outcome& o : ranked_first) {
      if (o.candidate.conf.changed() == 1 && pick(o.candidate.conf)) return o.candidate.conf;
    }
    return std::nullopt;
  };
  const auto split = best([](const AllocConf& c) { return c.max_split_size_mb != 0; });
  const auto round = best([](const AllocConf& c) { return c.roundup_power2_divisions != 0; });
  const auto gc = best([](const AllocConf& c) { return c.garbage_collection_threshold != 0.0; });
  std::vector<Candidate> out;
  auto combine = [&](AllocConf a, const std::optional<AllocConf>& b) {
    if (!b) return;
    a.max_split_size_mb = std::max(a.max_split_size_mb, b->max_split_size_mb);
    a.roundup_power2_divisions = std::max(a.roundup_power2_divisions, b->roundup_power2_divisions);
    a.garbage_collection_threshold = std::max(a.garbage_collection_threshold, b->garbage_collection_threshold);
    add(out, a, "combination");
  };
  if (split) {
    combine(*split, gc);
    combine(*split, round);
  }
  // Garbage collection never frees blocks of expandable segments (upstream and here): no
  // expandable + GC combination.
  combine({.expandable_segments = true}, round);
  combine({.expandable_segments = true}, split);
  for (const Outcome& o : ranked_first) {  // a combination tried in the first round is not tried again
    std::erase_if(out, [&](const Candidate& c) { return c.conf == o.candidate.conf; });
  }
  return out;
}

const Outcome* Advice::answer() const {
  if (!settings.empty() && settings.front().fits()) return &settings.front();
  if (!policies.empty() && policies.front().fits()) return &policies.front();
  return nullptr;
}

const Outcome* Advice::defaults() const {
  const auto it = std::find_if(settings.begin(), settings.end(), [](const Outcome& o) { return o.is_defaults(); });
  return it == settings.end() ? nullptr : &*it;
}

bool Advice::fits_with_settings() const { return !settings.empty() && settings.front().fits(); }

bool Advice::fits_with_policy() const { return !fits_with_settings() && !policies.empty() && policies.front().fits(); }

std::optional<Bytes> Advice::spare() const {
  const Outcome* d = defaults();
  if (d == nullptr || !d->fits()) return std::nullopt;
  return usable - std::min(usable, d->peak_reserved);
}

std::optional<Bytes> Advice::short_by() const {
  const Outcome* d = defaults();
  if (d == nullptr || d->fits() || !defaults_min_usable) return std::nullopt;
  return *defaults_min_usable - std::min(*defaults_min_usable, usable);
}

std::optional<Bytes> Advice::min_capacity() const {
  if (!defaults_min_usable) return std::nullopt;
  return *defaults_min_usable + reserve;
}

void check_reserve(Bytes capacity, Bytes reserve) {
  if (reserve >= capacity) {
    throw UsageError("--reserve",
                     fmt::format("{} ({} bytes) leaves nothing of the capacity {} ({} bytes); give a "
                                 "smaller reserve (--reserve 0 replays at the whole capacity)",
                                 format_bytes(reserve), reserve.value, format_bytes(capacity), capacity.value));
  }
}

void check_base(const SimConfig& base) {
  const std::string where = base.source.empty() ? "" : base.source + ": ";
  for (const char* key : {"policy", "budget"}) {
    if (base.doc.contains(key)) {
      throw ConfigError(where + key, "advise chooses it (policies are tried at --capacity when no setting fits)");
    }
  }
  if (base.doc.contains("allocator") && base.doc["allocator"] != "pytorch") {
    const auto& a = base.doc["allocator"];
    throw ConfigError(where + "allocator", "advise replays the pytorch allocator model only, got " +
                                               quote_excerpt(a.is_string() ? a.get<std::string>() : a.dump()));
  }
  if (base.doc.contains("params") && base.doc["params"].contains("pytorch")) {
    throw ConfigError(where + "params.pytorch", "advise chooses the pytorch parameters itself");
  }
  (void)check_config(base);
}

Advice evaluate(const SimConfig& base_in, const Trace& trace, const Options& o) {
  check_base(base_in);
  check_reserve(o.capacity, o.reserve);
  SimConfig base = base_in;
  Advice a;
  a.trace = trace.path;
  a.capacity = o.capacity;
  a.reserve = o.reserve;
  a.usable = o.capacity - o.reserve;
  a.iterations = trace.header.iterations;
  const TraceSummary summary = summarize(trace);
  a.peak_live = summary.peak_live;
  a.events = summary.events;
  std::uint64_t simulated_events = summary.events;  // the simulation from empty allocates the recorded tensors first
  if (!trace.initial_segments.empty() && !base.doc.contains("initial_state")) {
    // A recorded allocator state fixes where most bytes sit, whatever the settings: simulate its
    // tensors as requests from an empty allocator, as a new process with these settings would.
    base.doc["initial_state"] = "empty";
    a.initial_state = "empty";
    a.recorded_reserved = summary.initial_reserved;
    a.base_sets = "--initial-state empty";
    simulated_events += summary.initial_tensors;
  }

  std::vector<Candidate> first = first_round(trace, a.not_tried);
  a.settings = simulate_all(base, trace, first, 0, simulated_events, a.usable, o);
  rank(a.settings);
  std::vector<Outcome> more =
      simulate_all(base, trace, second_round(a.settings), first.size(), simulated_events, a.usable, o);
  a.settings.insert(a.settings.end(), more.begin(), more.end());
  rank(a.settings);

  // How much the defaults need: `coopsim minbudget`'s search, above the usable bytes when they
  // fail there; when they fit, no more than the usable bytes (the search assumes that a larger
  // budget never fails, which an address-aware allocator does not guarantee).
  const bool defaults_fit = a.defaults()->fits();
  sweep::MinBudgetOptions search;
  search.audit = o.audit;
  if (!defaults_fit) search.fails_at = a.usable;
  const sweep::MinBudgetResult found = sweep::find_min_budget(config_of(base, Candidate{}, a.usable), trace, search);
  if (found.found) a.defaults_min_usable = defaults_fit ? std::min(found.budget, a.usable) : found.budget;
  if (a.settings.front().fits()) return a;

  a.policies_skipped = no_dataflow(trace, base);
  if (!a.policies_skipped.empty()) {
    a.policies_skipped += ": recompute and swap policies need to know what ops read";
    return a;
  }
  std::vector<Candidate> policies;
  for (const auto& e : builtin_components().policies.entries()) {
    if (e.make(Params(e.name, e.params))->needs_dataflow()) {  // keep needs none and was tried above
      for (const AllocConf& c : {AllocConf{}, AllocConf{.expandable_segments = true}}) {
        policies.push_back({c, e.name, "policy"});
      }
    }
  }
  std::vector<Report> reports;
  a.policies = simulate_all(base, trace, policies, a.settings.size(), simulated_events, a.usable, o, &reports);
  if (!reports.empty()) a.link = reports.front().config["link"].value("resolved_name", "");
  rank(a.policies);
  return a;
}

}  // namespace coopsim::advise
