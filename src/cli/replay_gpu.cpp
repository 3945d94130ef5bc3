// `coopsim run --plan` (the plan export) and `coopsim replay-gpu` (the CUDA backend's command).
// Without CUDA (COOPSIM_HAVE_CUDA = 0) replay-gpu exists and says how it was built.
#include <fmt/format.h>

#include <optional>
#include <ostream>

#include "coopsim/cli/commands.hpp"
#include "coopsim/base/error.hpp"
#include "coopsim/replay/replay_plan.hpp"
#include "coopsim/replay/replay_report.hpp"
#include "coopsim/model/link.hpp"
#include "coopsim/sim/simulation.hpp"
#include "coopsim_config.h"
#include "run_exports.hpp"

namespace coopsim {

void write_plan_export(const Trace& trace, const RunLog& log, const Report& report, OutputFile& out) {
  const gpu::Plan plan = gpu::plan_from_runlog(trace, log, report, log.link);
  gpu::check_plan(plan, out.path());  // an export the checker rejects is a coopsim bug: fail loudly
  out.write(gpu::plan_to_text(plan));
}

int command_replay_gpu(const ReplayGpuArgs& args, std::ostream& out) {
#if COOPSIM_HAVE_CUDA
  if (args.iterations < 1) throw ConfigError("--iterations", "must be at least 1");
  if (args.warmup < 0) throw ConfigError("--warmup", "must not be negative");
  if (args.sample_stride < 1) throw ConfigError("--sample-stride", "must be at least 1");
  const NamedPath outputs[] = {{"--output", args.output}, {"--calibrate-link", args.calibrate_link}};
  const NamedPath inputs[] = {{"the plan", args.plan}};
  check_output_paths(outputs, inputs);
  // Opened before the replay, so a bad output fails before the GPU work.
  std::optional<OutputFile> report_file, link_file;
  if (!args.output.empty()) report_file.emplace(args.output);
  if (!args.calibrate_link.empty()) link_file.emplace(args.calibrate_link);
  const gpu::Plan plan = gpu::load_plan(args.plan, !args.skip_check);
  std::string why;
  if (gpu::cuda::device_count(why) <= args.device) {
    throw Error(why.empty() ? fmt::format("replay-gpu: no CUDA device {}", args.device)
                            : "replay-gpu: no CUDA device: " + why);
  }
  const gpu::DeviceInfo device = gpu::cuda::open_device(args.device);
  gpu::ReplaySettings settings;
  settings.iterations = args.iterations;
  settings.warmup = args.warmup;
  settings.graph = !args.no_graph;
  settings.poison = args.poison;
  settings.sample_stride = static_cast<std::uint32_t>(args.sample_stride);
  settings.full_check = args.full_check;
  const gpu::ReplayMeasurement m = gpu::cuda::replay(plan, settings);
  const auto samples = gpu::cuda::measure_link(5);
  const gpu::LinkFit d2h = gpu::fit_link(samples, true), h2d = gpu::fit_link(samples, false);
  const auto report = gpu::replay_report_json(plan, args.plan, device, settings, m, d2h, h2d);
  if (report_file) report_file->write(report.dump(2) + "\n");
  if (link_file) {
    // The link as the plan's own copies ran (beside compute and each other), when both directions
    // can be fitted; else the isolated copies' fit (docs/cuda-validation.md, "Copy model").
    const auto copies = gpu::replay_copy_samples(plan, m);
    try {
      link_file->write(gpu::link_preset_json(gpu::fit_link(copies, true), gpu::fit_link(copies, false), device.name,
                                             fmt::format("{} copies during the replay", copies.size()))
                           .dump(2) +
                       "\n");
    } catch (const Error&) {
      link_file->write(gpu::link_preset_json(d2h, h2d, device.name).dump(2) + "\n");
    }
  }
  if (report_file) report_file->commit();
  if (link_file) link_file->commit();
  const auto& it = report.at("iteration");
  out << fmt::format("{}: {} steps on {} (driver {}, runtime {})\n", args.plan, plan.steps.size(), device.name,
                     report.at("device").at("driver_version").get<std::string>(),
                     report.at("device").at("runtime_version").get<std::string>());
  out << fmt::format("  iteration: simulated {:.0f} ns, measured {} ns, error {}\n",
                     it.at("simulated_ns").get<double>(), it.at("measured_ns").at("mean").dump(),
                     it.at("error").dump());
  out << fmt::format("  link: d2h {:.2f} GB/s + {:.1f} us, h2d {:.2f} GB/s + {:.1f} us\n", 1.0 / d2h.ns_per_byte,
                     d2h.latency_ns / 1e3, 1.0 / h2d.ns_per_byte, h2d.latency_ns / 1e3);
  if (m.first_failing_step != gpu::kNoStep) {
    out << "  integrity: FAILED at " << gpu::describe_step(plan, m.first_failing_step) << "\n";
    return 6;
  }
  const auto& integrity = report.at("integrity");
  out << fmt::format(
      "  integrity: ok ({} of {} input words checked, {} checks thinned to fit their op, {} view steps not launched)\n",
      integrity.at("read_words_checked").get<std::uint64_t>(), integrity.at("read_words").get<std::uint64_t>(),
      integrity.at("thinned_steps").get<std::uint64_t>(), integrity.at("view_steps_not_launched").get<std::uint64_t>());
  return 0;
#else
  (void)args;
  (void)out;
  throw Error(
      "replay-gpu: this coopsim was built without CUDA (reconfigure with meson setup -Dcuda=enabled on a "
      "machine with nvcc and the CUDA runtime)");
#endif
}

}  // namespace coopsim
