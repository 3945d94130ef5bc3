// `coopsim advise` output: the verdict, the ranked tables as text and JSON, the line to use, and
// the `coopsim run` arguments that reproduce each row.
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <ostream>

#include "coopsim/base/schema_version.hpp"
#include "coopsim/sweep/advise.hpp"

namespace coopsim::advise {
namespace {

using OJ = nlohmann::ordered_json;

std::string shown_conf(const AllocConf& c) { return c.changed() == 0 ? "(defaults)" : conf_string(c); }

// Milliseconds per training step: 812.3, 12.5, 0.004.
std::string format_ms(double ms) { return ms >= 1.0 ? fmt::format("{:.1f}", ms) : fmt::format("{:.3f}", ms); }

std::string conf_phrase(const AllocConf& c) {
  return c.changed() == 0 ? "the defaults (no PYTORCH_CUDA_ALLOC_CONF)" : "PYTORCH_CUDA_ALLOC_CONF=" + conf_string(c);
}

// Share of the trace simulated (the "replayed" column): all of it when the run completed, up to
// the OOM event otherwise.
std::string share_simulated(const Outcome& o) {
  if (o.fits()) return "100%";
  if (!o.oom_event || o.events == 0) return "-";
  // Rounded down, so a run that stopped short never shows as 100%.
  const std::uint64_t permille = *o.oom_event * 1000 / o.events;
  return fmt::format("{}.{}%", permille / 10, permille % 10);
}

OJ outcome_json(const Advice& a, const Outcome& o, std::size_t rank) {
  const AllocConf& c = o.candidate.conf;
  auto unless_zero = [](auto v) { return v == 0 ? OJ(nullptr) : OJ(v); };
  OJ j;
  j["rank"] = rank;
  j["policy"] = o.candidate.policy;
  j["conf"] = conf_string(c);
  j["settings"] = {{"expandable_segments", c.expandable_segments},
                   {"max_split_size_mb", unless_zero(c.max_split_size_mb)},
                   {"roundup_power2_divisions", unless_zero(c.roundup_power2_divisions)},
                   {"garbage_collection_threshold", unless_zero(c.garbage_collection_threshold)}};
  j["origin"] = o.candidate.origin;
  j["fits"] = o.fits();
  j["status"] = std::string(to_string(o.status));
  j["peak_reserved_bytes"] = o.peak_reserved.value;
  j["peak_allocated_bytes"] = o.peak_allocated.value;
  j["compute_overhead"] = o.fits() ? OJ(o.compute_overhead) : OJ(nullptr);
  j["alloc_retries"] = o.alloc_retries;
  j["device_mallocs"] = o.device_mallocs;
  j["oom_event"] = o.oom_event ? OJ(*o.oom_event) : OJ(nullptr);
  j["step_ms"] = o.fits() ? OJ(o.step_ms()) : OJ(nullptr);
  const std::string counterpart = in_pytorch(o.candidate.policy).counterpart;
  j["in_pytorch"] = counterpart.empty() ? OJ(nullptr) : OJ(counterpart);
  j["run"] = run_arguments(a, o);
  return j;
}

void table(std::ostream& out, const std::vector<Outcome>& rows, bool policies) {
  out << fmt::format("{:>4}  {:<10}  {:>8}  {:>13}  {:>8}  {:>9}  {:>7}  {}{}\n", "rank", "fits", "replayed",
                     "peak reserved", "overhead", "ms/step", "retries", policies ? "policy    " : "",
                     "PYTORCH_CUDA_ALLOC_CONF");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Outcome& o = rows[i];
    out << fmt::format("{:>4}  {:<10}  {:>8}  {:>13}  {:>8}  {:>9}  {:>7}  {}{}\n", i + 1,
                       o.fits() ? "yes" : std::string(to_string(o.status)), share_simulated(o),
                       format_bytes(o.peak_reserved), o.fits() ? fmt::format("{:.3f}", o.compute_overhead) : "-",
                       o.fits() ? format_ms(o.step_ms()) : "-", o.alloc_retries,
                       policies ? fmt::format("{:<10}", o.candidate.policy) : "", shown_conf(o.candidate.conf));
  }
}

}  // namespace

std::string run_arguments(const Advice& a, const Outcome& o) {
  std::string args = fmt::format("-a pytorch -p {} -b {}", o.candidate.policy, a.usable.value);
  for (const auto& s : conf_overrides(o.candidate.conf)) args += " --set " + s;
  if (!a.base_sets.empty()) args += " " + a.base_sets;
  return args;
}

std::string use_line(const Advice& a) {
  const Outcome* o = a.answer();
  if (o == nullptr) return "";
  const std::string conf = conf_phrase(o->candidate.conf);
  if (o->candidate.policy == "keep") return conf;
  const PolicyInPyTorch p = in_pytorch(o->candidate.policy);
  return fmt::format("policy {} at budget {} ({} bytes) with {}{}", o->candidate.policy, format_bytes(a.usable),
                     a.usable.value, conf,
                     p.counterpart.empty() ? "" : fmt::format("; {}, in PyTorch: {}", p.kind, p.counterpart));
}

std::string verdict(const Advice& a) {
  const Outcome* d = a.defaults();
  const Outcome* best = a.answer();
  if (d != nullptr && d->fits()) {
    return fmt::format("fits with {} to spare with PyTorch's defaults (peak reserved {} of {} usable); {} ms per step",
                       format_bytes(*a.spare()), format_bytes(d->peak_reserved), format_bytes(a.usable),
                       format_ms(d->step_ms()));
  }
  std::string v = a.short_by() ? fmt::format("needs {} more with PyTorch's defaults (a capacity of {} or more)",
                                             format_bytes(*a.short_by()), format_bytes(*a.min_capacity()))
                               : "does not fit with PyTorch's defaults at any capacity the search tried";
  if (a.fits_with_settings()) {
    return v + fmt::format("; {} makes it fit ({} to spare); {} ms per step", conf_phrase(best->candidate.conf),
                           format_bytes(a.usable - std::min(a.usable, best->peak_reserved)),
                           format_ms(best->step_ms()));
  }
  if (!a.policies_skipped.empty()) {
    return v + "; no allocator setting fits, and no recompute or swap policy could be tried: " + a.policies_skipped;
  }
  if (best == nullptr) return v + "; nothing fits, neither an allocator setting nor a recompute or swap policy";
  auto named = [](const Outcome& o) {
    return fmt::format("{}{}, {} ms per step", o.candidate.policy,
                       o.candidate.conf.changed() == 0 ? "" : " with " + conf_string(o.candidate.conf),
                       format_ms(o.step_ms()));
  };
  v += fmt::format(
      "; only a recompute/swap policy fits (research policies; in PyTorch: activation checkpointing of blocks, CPU "
      "offload): {}",
      named(*best));
  // The answer ranks what PyTorch offers first; the fastest fitting policy may be another.
  const auto fastest = std::min_element(a.policies.begin(), a.policies.end(), [](const Outcome& x, const Outcome& y) {
    return x.fits() && (!y.fits() || x.step_ms() < y.step_ms());
  });
  if (&*fastest != best && fastest->step_ms() < best->step_ms()) v += "; fastest: " + named(*fastest);
  return v;
}

OJ to_json(const Advice& a) {
  auto bytes_or_null = [](const std::optional<Bytes>& b) { return b ? OJ(b->value) : OJ(nullptr); };
  const Outcome* best = a.answer();
  OJ j;
  j["schema_version"] = schema_version::kAdvice;
  j["trace"] = a.trace;
  j["capacity_bytes"] = a.capacity.value;
  j["reserve_bytes"] = a.reserve.value;
  j["usable_bytes"] = a.usable.value;
  j["peak_live_bytes"] = a.peak_live.value;
  j["events"] = a.events;
  j["iterations"] = a.iterations;
  j["initial_state"] = a.initial_state.empty() ? OJ(nullptr) : OJ(a.initial_state);
  j["verdict"] = verdict(a);
  j["fits"] = a.fits_with_settings();
  j["fits_with_settings"] = a.fits_with_settings();
  j["fits_with_policy"] = a.fits_with_policy();
  j["spare_bytes"] = bytes_or_null(a.spare());
  j["short_bytes"] = bytes_or_null(a.short_by());
  j["min_capacity_bytes"] = bytes_or_null(a.min_capacity());
  j["step_ms"] = best != nullptr ? OJ(best->step_ms()) : OJ(nullptr);
  j["use"] = best != nullptr ? OJ(use_line(a)) : OJ(nullptr);
  j["answer"] = best != nullptr ? outcome_json(a, *best, 1) : OJ(nullptr);
  j["settings"] = OJ::array();
  for (std::size_t i = 0; i < a.settings.size(); ++i) j["settings"].push_back(outcome_json(a, a.settings[i], i + 1));
  j["not_tried"] = a.not_tried;
  j["policies"] = OJ::array();
  for (std::size_t i = 0; i < a.policies.size(); ++i) j["policies"].push_back(outcome_json(a, a.policies[i], i + 1));
  j["policies_skipped"] = a.policies_skipped.empty() ? OJ(nullptr) : OJ(a.policies_skipped);
  j["link"] = a.link.empty() ? OJ(nullptr) : OJ(a.link);
  return j;
}

void write_text(std::ostream& out, const Advice& a) {
  out << verdict(a) << "\n";
  out << fmt::format(
      "advise: {}; capacity {} - reserve {} = usable {} ({} bytes); peak live {}; {} events, {} "
      "iteration{}\n",
      a.trace, format_bytes(a.capacity), format_bytes(a.reserve), format_bytes(a.usable), a.usable.value,
      format_bytes(a.peak_live), a.events, a.iterations, a.iterations == 1 ? "" : "s");
  if (!a.initial_state.empty()) {
    out << fmt::format(
        "note: the trace starts from a recorded allocator state ({} reserved) that would decide placement whatever "
        "the settings; each replay allocates its tensors from an empty allocator instead (initial_state: {}), as a "
        "new process would\n",
        format_bytes(a.recorded_reserved), a.initial_state);
  }
  out << "allocator settings, policy keep (no eviction); overhead = simulated / trace compute time; ms/step = "
         "simulated time per iteration\n";
  table(out, a.settings, false);
  for (const auto& n : a.not_tried) out << "not tried: " << n << "\n";
  const Outcome* best = a.answer();
  if (a.fits_with_settings()) {
    out << "use: " << use_line(a) << "\n";
  } else if (!a.policies_skipped.empty()) {
    out << fmt::format("no allocator setting fits in {}, and no policy was tried: {}\n", format_bytes(a.usable),
                       a.policies_skipped);
  } else {
    out << fmt::format("no allocator setting fits in {}; recompute and swap policies at budget {} (link {}):\n",
                       format_bytes(a.usable), format_bytes(a.usable), a.link);
    table(out, a.policies, true);
    out << (best != nullptr ? "use: " + use_line(a) : "nothing fits, not even with a policy") << "\n";
  }
  if (!a.fits_with_settings()) {
    // A trace is one training step as recorded; the changes a PyTorch user makes first (checkpointing
    // of blocks, micro-batches, bf16, a smaller batch) give other traces, which the Python package
    // records and ranks.
    out << "also: changes to the step itself (checkpointing of blocks, micro-batches, bf16, a smaller batch) are "
           "recorded and ranked by coopsim.fit(model, batch, loss_fn, capacity=...) (docs/python.md)\n";
  }
  if (best == nullptr) return;
  if (best->candidate.conf.garbage_collection_threshold != 0.0) {
    out << fmt::format(
        "note: garbage_collection_threshold acts only with a memory fraction: call "
        "torch.cuda.set_per_process_memory_fraction(F), F = {} / the device's memory\n",
        format_bytes(a.usable));
  }
  out << fmt::format("run: coopsim run {} {}\n", a.trace, run_arguments(a, *best));
}

}  // namespace coopsim::advise
