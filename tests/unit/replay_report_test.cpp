// The plain-C++ side of replay-gpu: the least-squares link fit, the link written back as a
// config that `coopsim run -c` accepts, and the report's comparison of measured and simulated
// times, on hand-made measurements (no GPU involved).
#include <catch2/catch.hpp>

#include <fstream>

#include "coopsim/base/error.hpp"
#include "coopsim/replay/replay_report.hpp"
#include "coopsim/model/link.hpp"
#include "coopsim/base/params.hpp"
#include "coopsim/sim/simulation.hpp"
#include "plan_scenarios.hpp"
#include "test_paths.hpp"

using namespace coopsim;
using namespace coopsim::gpu;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace replay_report_test {

namespace {

std::vector<LinkSample> line_samples() {
  // d2h: 5000 ns + 0.05 ns/B exactly; h2d: 2000 ns + 0.04 ns/B with +-100 ns around it.
  std::vector<LinkSample> s;
  for (const std::uint64_t b : {4096ULL, 65536ULL, 1048576ULL, 16777216ULL}) {
    s.push_back({true, b, 5000.0 + 0.05 * static_cast<double>(b)});
  }
  s.push_back({false, 1000000, 2000.0 + 40000.0 + 100.0});
  s.push_back({false, 1000000, 2000.0 + 40000.0 - 100.0});
  s.push_back({false, 3000000, 2000.0 + 120000.0 + 100.0});
  s.push_back({false, 3000000, 2000.0 + 120000.0 - 100.0});
  return s;
}

}  // namespace

TEST_CASE("link fit: least squares of copy time on size") {
  const auto s = line_samples();
  const LinkFit d2h = fit_link(s, true);
  CHECK(d2h.ns_per_byte == Approx(0.05));
  CHECK(d2h.latency_ns == Approx(5000.0));
  CHECK(d2h.r2 == Approx(1.0));
  CHECK(d2h.samples == 4);
  const LinkFit h2d = fit_link(s, false);
  CHECK(h2d.ns_per_byte == Approx(0.04));
  CHECK(h2d.latency_ns == Approx(2000.0));
  // Residuals +-100 ns around a line through the means: SSres = 4e4, SStot = 4 * 40000^2.
  CHECK(h2d.r2 == Approx(1.0 - 4e4 / (4 * 4e4 * 4e4)));
  CHECK_THROWS_WITH(fit_link({{true, 4096, 10.0}, {true, 4096, 12.0}}, true),
                    "link fit: device-to-host copies of at least two sizes are needed");
  CHECK_THROWS_WITH(fit_link({{false, 4096, 10.0}, {false, 8192, 5.0}}, false),
                    "link fit: host-to-device copy time does not grow with size");
}

TEST_CASE("link fit: the written link is a config coopsim run accepts") {
  const auto s = line_samples();
  const auto doc = link_preset_json(fit_link(s, true), fit_link(s, false), "Test GPU");
  const auto dir = test::scratch_dir("link-preset");
  const std::string path = (dir / "link.json").string();
  std::ofstream(path) << doc.dump(2);
  const SimConfig cfg = load_config(path);
  CHECK_NOTHROW(check_config(cfg));
  const LinkModel m = make_link(Params("link", cfg.doc.at("link"), link_param_docs()));
  CHECK(m.d2h.ns_per_byte == Approx(0.05));
  CHECK(m.h2d.ns_per_byte == Approx(0.04));
  CHECK(m.d2h.latency == SimTime{5000});
  CHECK(m.h2d.latency == SimTime{2000});
  CHECK(cfg.doc.at("description") == "host<->device link measured by coopsim replay-gpu on Test GPU (isolated copies)");
}

TEST_CASE("replay report: measured against simulated, per op class and per transfer direction") {
  const Plan plan = test::plan_of(test::swap_scenario());
  DeviceInfo dev;
  dev.name = "Test GPU";
  dev.compute_major = 9;
  dev.driver_version = 13000;
  dev.runtime_version = 12080;
  ReplaySettings settings;
  settings.iterations = 2;
  ReplayMeasurement m;
  m.calibration = {1.98, 2500.0};
  m.iteration_ns = {2100.0, 2300.0};  // simulated 2000: mean 2200, +10 %
  m.all_streams_ns = {2150.0, 2350.0};
  m.step_ns.assign(plan.steps.size(), 0.0);
  m.step_ns[3] = 1100.0;  // f: simulated 1000
  m.step_ns[6] = 450.0;   // g: 500
  m.step_ns[12] = 330.0;  // h: 300
  m.step_ns[7] = 300.0;   // swap-out: 200
  m.step_ns[11] = 150.0;  // swap-in: 200
  m.step_ns[0] = 40.0;    // fills of w and x
  m.step_ns[1] = 60.0;
  m.host_issue_ns = 900.0;
  m.first_failing_step = StepId{12};
  m.fills = 2;
  const auto s = line_samples();
  const auto r = replay_report_json(plan, "swap.plan.json", dev, settings, m, fit_link(s, true), fit_link(s, false));
  CHECK(r.at("device").at("driver_version") == "13.0");
  CHECK(r.at("device").at("runtime_version") == "12.8");
  CHECK(r.at("device").at("compute_capability") == "9.0");
  CHECK(r.at("integrity").at("ok") == false);
  CHECK(r.at("integrity").at("first_failing_step").at("step") == "steps[12] (op 2 'h')");
  const auto& it = r.at("iteration");
  CHECK(it.at("simulated_ns") == 2000);
  CHECK(it.at("measured_ns").at("mean").get<double>() == Approx(2200.0));
  CHECK(it.at("measured_ns").at("min").get<double>() == Approx(2100.0));
  CHECK(it.at("error").get<double>() == Approx(0.1));
  CHECK(it.at("host_bound") == false);
  const auto& classes = r.at("op_classes");
  REQUIRE(classes.size() == 4);
  CHECK(classes[0].at("class") == "op f");  // largest simulated time first
  CHECK(classes[0].at("error").get<double>() == Approx(0.1));
  CHECK(classes[1].at("class") == "op g");
  CHECK(classes[1].at("error").get<double>() == Approx(-0.1));
  CHECK(classes[2].at("class") == "op h");
  CHECK(classes[3].at("class") == "alloc fill");
  CHECK(classes[3].at("steps") == 2);
  CHECK(classes[3].at("measured_ns").get<double>() == Approx(100.0));
  CHECK(classes[3].at("error").is_null());
  const auto& d2h = r.at("transfers").at("d2h");
  CHECK(d2h.at("bytes") == 1000);
  CHECK(d2h.at("error").get<double>() == Approx(0.5));
  CHECK(r.at("transfers").at("h2d").at("mean_abs_step_error").get<double>() == Approx(0.25));
  CHECK(r.at("link").at("d2h").at("gbps").get<double>() == Approx(20.0));
  // Each copy as [step, bytes, simulated, measured]; one copy per direction: no in-replay fit.
  CHECK(r.at("copies").at("d2h") == nlohmann::ordered_json::parse("[[7, 1000, 200, 300.0]]"));
  CHECK(r.at("copies").at("h2d") == nlohmann::ordered_json::parse("[[11, 1000, 200, 150.0]]"));
  CHECK(r.at("link_in_replay").is_null());
}

TEST_CASE("replay report: the link as the replay's own copies ran") {
  // Plans whose copies come in two sizes: the copies' measured times are 1000 ns + 0.02 ns/B
  // (50 GB/s) out and 2000 ns + 0.025 ns/B (40 GB/s) in, so the in-replay fit finds exactly that,
  // whatever the isolated copies said.
  Plan plan;
  const std::uint64_t sizes[] = {1000000, 4000000, 1000000, 4000000};
  ReplayMeasurement m;
  for (std::uint32_t i = 0; i < 8; ++i) {
    PlanStep s;
    s.kind = i < 4 ? StepKind::SwapOut : StepKind::SwapIn;
    s.bytes = Bytes{sizes[i % 4]};
    plan.steps.push_back(s);
    const double bytes = static_cast<double>(sizes[i % 4]);
    m.step_ns.push_back(i < 4 ? 1000.0 + 0.02 * bytes : 2000.0 + 0.025 * bytes);
  }
  m.step_ns[2] = 0.0;  // not timed (no event pair): left out
  const auto samples = replay_copy_samples(plan, m);
  CHECK(samples.size() == 7);
  const LinkFit out = fit_link(samples, true), in = fit_link(samples, false);
  CHECK(1.0 / out.ns_per_byte == Approx(50.0));
  CHECK(out.latency_ns == Approx(1000.0));
  CHECK(1.0 / in.ns_per_byte == Approx(40.0));
  CHECK(in.latency_ns == Approx(2000.0));
  const auto s = line_samples();
  const auto r = replay_report_json(plan, "p.json", DeviceInfo{}, ReplaySettings{}, m, fit_link(s, true),
                                    fit_link(s, false));
  CHECK(r.at("link_in_replay").at("d2h").at("gbps").get<double>() == Approx(50.0));
  CHECK(r.at("link_in_replay").at("h2d").at("latency_ns").get<double>() == Approx(2000.0));
  CHECK(r.at("copies").at("d2h").size() == 4);
  const auto link = link_preset_json(out, in, "Test GPU", "7 copies during the replay");
  CHECK(link.at("description") == "host<->device link measured by coopsim replay-gpu on Test GPU (7 copies during the replay)");
  CHECK(link.at("link").at("h2d_gbps").get<double>() == Approx(40.0));
}

TEST_CASE("replay-gpu input checks are thinned only as far as the op's duration needs") {
  // Check bandwidth 2 B/ns read, 4 B/ns write (hand-picked for round numbers).
  Calibration cal;
  cal.check_read_bytes_per_ns = 2.0;
  cal.check_write_bytes_per_ns = 4.0;
  ReplaySettings settings;

  // Traffic: every word up to a 32-byte sector (8 words), then one sector per checked word.
  CHECK(check_traffic(1024.0, 1) == 1024.0);
  CHECK(check_traffic(1024.0, 8) == 1024.0);
  CHECK(check_traffic(1024.0, 16) == 512.0);
  CHECK(check_traffic(1024.0, 1024) == 8.0);

  // 1000 B read takes 500 ns; 400 B written 100 ns. Spin 934 ns: (934 - 100) * 0.6 = 500.4 -> fits.
  CHECK(check_read_stride(934.0, 1000.0, 400.0, settings, cal) == 1);
  // Spin 933 ns: budget 499.8 ns; stride 16 costs 250 ns -> 16.
  CHECK(check_read_stride(933.0, 1000.0, 400.0, settings, cal) == 16);
  // Budget 100.2 ns (spin 267): 16 -> 250, 32 -> 125, 64 -> 62.5 ns -> 64.
  CHECK(check_read_stride(267.0, 1000.0, 400.0, settings, cal) == 64);
  // A 1 GiB input of a 3.5 us spin (budget 2,100 ns): at 2 B/ns it needs 2^33 / s / 2 <= 2100, a
  // stride past the ceiling, so the ceiling.
  CHECK(check_read_stride(3500.0, 1073741824.0, 0.0, settings, cal) == kMaxThinning);
  cal.check_read_bytes_per_ns = 3600.0;
  // At 3600 B/ns (an H200): 2^33 / s / 3600 <= 2100 -> s >= 1136.2 -> 2048, past the old ceiling of 1024.
  CHECK(check_read_stride(3500.0, 1073741824.0, 0.0, settings, cal) == 2048);
  cal.check_read_bytes_per_ns = 2.0;
  // No time at all (a view op of 0 ns): the sparsest check, one word per 4 KiB.
  CHECK(check_read_stride(0.0, 369295360.0, 0.0, settings, cal) == kMaxThinning);
  // Outputs that alone outlast the op leave nothing for the check.
  CHECK(check_read_stride(100.0, 8.0, 4000.0, settings, cal) == kMaxThinning);
  // Nothing to read: the sample stride.
  CHECK(check_read_stride(0.0, 0.0, 0.0, settings, cal) == 1);

  SECTION("--sample-stride scales every stride, so a thinned check reads only written words") {
    settings.sample_stride = 4;
    CHECK(check_read_stride(934.0, 1000.0, 400.0, settings, cal) == 4);
    CHECK(check_read_stride(0.0, 1e6, 0.0, settings, cal) == 4 * kMaxThinning);
    // A stride that would pass 2^31 words stops below it.
    settings.sample_stride = 1U << 16;
    CHECK(check_read_stride(0.0, 1e6, 0.0, settings, cal) == (1U << 31));
  }
  SECTION("--full-check never thins") {
    settings.full_check = true;
    CHECK(check_read_stride(0.0, 369295360.0, 0.0, settings, cal) == 1);
  }
  SECTION("without a calibration (no check bandwidth) nothing is thinned") {
    CHECK(check_read_stride(0.0, 1e6, 0.0, settings, Calibration{}) == 1);
  }
}

TEST_CASE("replay-gpu op spins lose the launch overhead and the spin excess of their kind") {
  Calibration cal;
  cal.kernel_overhead_ns = 1000.0;
  cal.spin_excess_timer_ns = 1500.0;
  cal.spin_excess_cycles_ns = 300.0;
  // 20 us op: 19,000 ns after the overhead, 17,500 on the timer.
  CHECK(op_spin_ns(20000.0, cal) == 17500.0);
  // 4.5 us op: 3,500 after the overhead, 2,000 on the timer (its first value).
  CHECK(op_spin_ns(4500.0, cal) == kSpinTimerNs);
  // 4 us op: 1,500 on the timer would be below its range: cycles, 3,000 - 300 = 2,700, at most just
  // under the timer's range.
  CHECK(op_spin_ns(4000.0, cal) == kSpinTimerNs - 1.0);
  // 2 us op: 1,000 after the overhead, 700 in cycles.
  CHECK(op_spin_ns(2000.0, cal) == 700.0);
  // Shorter than overhead + excess: no spin at all.
  CHECK(op_spin_ns(1200.0, cal) == 0.0);
  CHECK(op_spin_ns(0.0, cal) == 0.0);
  // An old report's calibration (no excess measured) spins the duration less the overhead.
  Calibration old;
  old.kernel_overhead_ns = 1000.0;
  CHECK(op_spin_ns(20000.0, old) == 19000.0);
  CHECK(op_spin_ns(2500.0, old) == 1500.0);
}

}  // namespace replay_report_test
