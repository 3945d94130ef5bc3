// The plain-C++ side of replay-gpu: the link fit (ordinary least squares of copy time on size)
// and the report comparing a replay's measured times with the plan's simulated ones.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>

#include "coopsim/replay/replay_report.hpp"

namespace coopsim::gpu {

namespace {

using Json = nlohmann::ordered_json;

// (measured - simulated) / simulated, or null when nothing was simulated.
Json relative_error(double measured, double simulated) {
  if (simulated <= 0.0) return nullptr;
  return measured / simulated - 1.0;
}

Json spread(const std::vector<double>& v) {
  if (v.empty()) return nullptr;
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  return Json{
      {"mean", mean}, {"min", *std::min_element(v.begin(), v.end())}, {"max", *std::max_element(v.begin(), v.end())}};
}

std::string cuda_version(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

Json fit_json(const LinkFit& f) {
  return Json{{"gbps", f.ns_per_byte > 0 ? 1.0 / f.ns_per_byte : 0.0},
              {"ns_per_byte", f.ns_per_byte},
              {"latency_ns", f.latency_ns},
              {"r2", f.r2},
              {"samples", f.samples}};
}

// {"d2h": fit, "h2d": fit} of the replay's own copies, or null when a direction cannot be fitted
// (fewer than two sizes, or time not growing with size).
Json in_replay_link_json(const std::vector<LinkSample>& samples) {
  try {
    return Json{{"d2h", fit_json(fit_link(samples, true))}, {"h2d", fit_json(fit_link(samples, false))}};
  } catch (const Error&) {
    return nullptr;
  }
}

struct Sum {
  std::uint64_t steps = 0, bytes = 0;
  double simulated = 0.0, measured = 0.0, abs_step_error = 0.0;
  std::uint64_t errors = 0;  // steps with a simulated duration
};

}  // namespace

LinkFit fit_link(const std::vector<LinkSample>& samples, bool device_to_host) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  std::uint64_t lo = UINT64_MAX, hi = 0;
  for (const auto& s : samples) {
    if (s.device_to_host != device_to_host) continue;
    const auto x = static_cast<double>(s.bytes);
    n += 1;
    sx += x;
    sy += s.ns;
    sxx += x * x;
    sxy += x * s.ns;
    lo = std::min(lo, s.bytes);
    hi = std::max(hi, s.bytes);
  }
  const char* dir = device_to_host ? "device-to-host" : "host-to-device";
  if (n < 2 || lo == hi) throw Error(fmt::format("link fit: {} copies of at least two sizes are needed", dir));
  LinkFit f;
  f.samples = static_cast<std::size_t>(n);
  f.ns_per_byte = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  if (!(f.ns_per_byte > 0)) throw Error(fmt::format("link fit: {} copy time does not grow with size", dir));
  f.latency_ns = (sy - f.ns_per_byte * sx) / n;
  const double mean = sy / n;
  double ss_res = 0, ss_tot = 0;
  for (const auto& s : samples) {
    if (s.device_to_host != device_to_host) continue;
    const double predicted = f.latency_ns + f.ns_per_byte * static_cast<double>(s.bytes);
    ss_res += (s.ns - predicted) * (s.ns - predicted);
    ss_tot += (s.ns - mean) * (s.ns - mean);
  }
  f.r2 = ss_tot > 0 ? 1.0 - ss_res / ss_tot : 1.0;
  return f;
}

std::vector<LinkSample> replay_copy_samples(const Plan& plan, const ReplayMeasurement& m) {
  std::vector<LinkSample> out;
  for (std::uint32_t i = 0; i < plan.steps.size() && i < m.step_ns.size(); ++i) {
    const PlanStep& s = plan.steps[i];
    if ((s.kind != StepKind::SwapOut && s.kind != StepKind::SwapIn) || !(m.step_ns[i] > 0.0)) continue;
    out.push_back(LinkSample{s.kind == StepKind::SwapOut, s.bytes.value, m.step_ns[i]});
  }
  return out;
}

Json link_preset_json(const LinkFit& d2h, const LinkFit& h2d, const std::string& device_name,
                      const std::string& source) {
  auto latency = [](const LinkFit& f) { return static_cast<std::int64_t>(std::llround(std::max(0.0, f.latency_ns))); };
  return Json{{"description", "host<->device link measured by coopsim replay-gpu on " + device_name + " (" + source + ")"},
              {"link", Json{{"preset", "pcie4-x16"},
                            {"d2h_gbps", 1.0 / d2h.ns_per_byte},
                            {"h2d_gbps", 1.0 / h2d.ns_per_byte},
                            {"d2h_latency", latency(d2h)},
                            {"h2d_latency", latency(h2d)},
                            {"serial", true}}}};
}

Json replay_report_json(const Plan& plan, const std::string& plan_path, const DeviceInfo& device,
                        const ReplaySettings& settings, const ReplayMeasurement& m, const LinkFit& d2h,
                        const LinkFit& h2d) {
  const PlanHeader& h = plan.header;
  Json r;
  r["format"] = "coopsim-gpu-report";
  r["version"] = 1;
  r["plan"] = Json{{"path", plan_path},        {"trace", h.trace_path},
                   {"model", h.model},         {"trace_hash", fmt::format("{:016x}", h.trace_hash)},
                   {"allocator", h.allocator}, {"policy", h.policy},
                   {"budget", h.budget.value}, {"steps", plan.steps.size()}};
  r["device"] = Json{{"index", device.index},
                     {"name", device.name},
                     {"compute_capability", fmt::format("{}.{}", device.compute_major, device.compute_minor)},
                     {"sm_count", device.sm_count},
                     {"clock_khz", device.clock_khz},
                     {"memory_bytes", device.memory_bytes},
                     {"driver_version", cuda_version(device.driver_version)},
                     {"runtime_version", cuda_version(device.runtime_version)}};
  r["settings"] = Json{{"iterations", settings.iterations},
                       {"warmup", settings.warmup},
                       {"graph", settings.graph},
                       {"poison", settings.poison},
                       {"sample_stride", settings.sample_stride},
                       {"check", settings.full_check ? "full" : "fit"}};
  r["calibration"] = Json{{"sm_clock_ghz", m.calibration.cycles_per_ns},
                          {"kernel_overhead_ns", m.calibration.kernel_overhead_ns},
                          {"check_read_gbps", m.calibration.check_read_bytes_per_ns},
                          {"check_write_gbps", m.calibration.check_write_bytes_per_ns},
                          {"spin_excess_timer_ns", m.calibration.spin_excess_timer_ns},
                          {"spin_excess_cycles_ns", m.calibration.spin_excess_cycles_ns}};
  Json integrity{{"ok", m.first_failing_step == kNoStep},
                 {"first_failing_step", nullptr},
                 {"read_words", m.read_words},
                 {"read_words_checked", m.read_words_checked},
                 {"thinned_steps", m.thinned_steps},
                 {"view_steps_not_launched", m.view_steps}};
  if (m.first_failing_step != kNoStep && index_of(m.first_failing_step) < plan.steps.size()) {
    integrity["first_failing_step"] =
        Json{{"id", index_of(m.first_failing_step)}, {"step", describe_step(plan, m.first_failing_step)}};
  }
  r["integrity"] = integrity;

  const double mean_iteration = m.iteration_ns.empty()
                                    ? 0.0
                                    : std::accumulate(m.iteration_ns.begin(), m.iteration_ns.end(), 0.0) /
                                          static_cast<double>(m.iteration_ns.size());
  r["iteration"] = Json{
      {"simulated_ns", h.simulated_time.count()},
      {"measured_ns", spread(m.iteration_ns)},
      {"error", m.iteration_ns.empty() ? Json(nullptr)
                                       : relative_error(mean_iteration, static_cast<double>(h.simulated_time.count()))},
      {"all_streams_ns", spread(m.all_streams_ns)},
      {"host_issue_ns", m.host_issue_ns},
      {"host_bound", !m.iteration_ns.empty() && m.host_issue_ns >= mean_iteration},
      {"fills", m.fills},
      {"poisons", m.poisons}};

  std::map<std::string, Sum> classes;
  Sum out, in;
  for (std::uint32_t i = 0; i < plan.steps.size() && i < m.step_ns.size(); ++i) {
    const PlanStep& s = plan.steps[i];
    const double simulated = static_cast<double>((s.end - s.start).count());
    const double measured = m.step_ns[i];
    Sum* sum = nullptr;
    if (s.kind == StepKind::Op || s.kind == StepKind::Recompute) {
      const PlanOp* op = plan.op(s.op);
      sum = &classes[fmt::format("{} {}", to_string(s.kind), op == nullptr ? std::string("?") : op->name)];
    } else if (s.kind == StepKind::Alloc && (s.fill || settings.poison)) {
      sum = &classes["alloc fill"];
    } else if (s.kind == StepKind::SwapOut || s.kind == StepKind::SwapIn) {
      sum = s.kind == StepKind::SwapOut ? &out : &in;
      sum->bytes += s.bytes.value;
    }
    if (sum == nullptr) continue;
    ++sum->steps;
    sum->simulated += simulated;
    sum->measured += measured;
    if (simulated > 0) {
      sum->abs_step_error += std::abs(measured / simulated - 1.0);
      ++sum->errors;
    }
  }
  std::vector<std::pair<std::string, Sum>> ordered(classes.begin(), classes.end());
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto& a, const auto& b) { return a.second.simulated > b.second.simulated; });
  Json list = Json::array();
  for (const auto& [name, s] : ordered) {
    list.push_back(Json{{"class", name},
                        {"steps", s.steps},
                        {"simulated_ns", s.simulated},
                        {"measured_ns", s.measured},
                        {"error", relative_error(s.measured, s.simulated)}});
  }
  r["op_classes"] = list;
  auto transfer = [](const Sum& s) {
    return Json{{"steps", s.steps},
                {"bytes", s.bytes},
                {"simulated_ns", s.simulated},
                {"measured_ns", s.measured},
                {"error", relative_error(s.measured, s.simulated)},
                {"mean_abs_step_error",
                 s.errors == 0 ? Json(nullptr) : Json(s.abs_step_error / static_cast<double>(s.errors))}};
  };
  r["transfers"] = Json{{"d2h", transfer(out)}, {"h2d", transfer(in)}};
  r["link"] = Json{{"d2h", fit_json(d2h)}, {"h2d", fit_json(h2d)}};
  // Every copy as [step id, bytes, simulated ns, measured ns], per direction: what a copy model is
  // fitted to (scripts/copy_model.py), and the link as it ran in this replay, when each direction
  // had copies of two sizes or more.
  Json copies{{"d2h", Json::array()}, {"h2d", Json::array()}};
  for (std::uint32_t i = 0; i < plan.steps.size() && i < m.step_ns.size(); ++i) {
    const PlanStep& s = plan.steps[i];
    if (s.kind != StepKind::SwapOut && s.kind != StepKind::SwapIn) continue;
    copies[s.kind == StepKind::SwapOut ? "d2h" : "h2d"].push_back(
        Json::array({i, s.bytes.value, (s.end - s.start).count(), m.step_ns[i]}));
  }
  r["copies"] = copies;
  r["link_in_replay"] = in_replay_link_json(replay_copy_samples(plan, m));
  return r;
}

}  // namespace coopsim::gpu
