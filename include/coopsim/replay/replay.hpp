// The CUDA backend's boundary (plain C++: no CUDA header crosses it) and the report of a replay.
//
// The backend (src/replay/*.cu, built only when the Meson `cuda` feature finds nvcc) replays a
// plan on one device: one cudaMalloc arena of the plan's arena size, every tensor at its
// planned offset, one kernel per op or recompute (checks its inputs' integrity pattern, spins
// for the op's simulated duration on the measured SM clock, writes its outputs' pattern),
// swaps as cudaMemcpyAsync between the arena and pinned host copies on a device-to-host and a
// host-to-device stream, and every `after` entry as a cudaStreamWaitEvent. The link fit below
// and the report (replay_report.hpp) are plain C++ and always built.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "coopsim/replay/replay_plan.hpp"

namespace coopsim::gpu {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0, compute_minor = 0;
  int sm_count = 0;
  int clock_khz = 0;  // cudaDevAttrClockRate (peak)
  std::uint64_t memory_bytes = 0;
  int driver_version = 0;   // cudaDriverGetVersion, e.g. 13000
  int runtime_version = 0;  // cudaRuntimeGetVersion
};

struct ReplaySettings {
  int iterations = 5;               // timed replays of the whole plan
  int warmup = 1;                   // untimed replays before them
  bool graph = true;                // capture one replay as a CUDA graph and launch it (else issue from the host)
  bool poison = false;              // fill blocks allocated without content with a pattern no version has
  std::uint32_t sample_stride = 1;  // check and write every Nth 4-byte word of a tensor
  // false (default): an op's input check is thinned (every 16th, 32nd, ... 1024th sampled word) where
  // checking every word would take longer than the op's simulated duration leaves after writing
  // its outputs, so the check never adds time, and op steps of no duration that write nothing
  // (views) launch no kernel, as in PyTorch; true: every sampled word of every input of every step
  // is checked.
  bool full_check = false;
};

struct Calibration {
  double cycles_per_ns = 0.0;             // measured SM clock (clock64 cycles per ns of CUDA-event time)
  double kernel_overhead_ns = 0.0;        // launch-to-launch time of an empty op kernel, taken off every spin
  double check_read_bytes_per_ns = 0.0;   // the op kernel checking a 256 MiB block (every word)
  double check_write_bytes_per_ns = 0.0;  // the op kernel writing a 256 MiB block (every word)
  // What a spinning op kernel takes beyond its spin and the empty kernel's overhead (its blocks do
  // not all start at once, and each spins from its own start): measured for a 20 us spin on the
  // global timer and a 1 us spin in cycles, and taken off the spins of those kinds (op_spin). On an
  // H200 the replays ran about 1.6 us per op long before this was measured.
  double spin_excess_timer_ns = 0.0;
  double spin_excess_cycles_ns = 0.0;
};

// How long an op kernel of simulated duration `duration_ns` spins: the duration less the kernel
// overhead and the spin excess of the kind of spin it gets (global timer from kSpinTimerNs, else
// SM cycles), never below 0. An op shorter than overhead + excess cannot be replayed at its duration.
inline constexpr double kSpinTimerNs = 2000.0;
double op_spin_ns(double duration_ns, const Calibration& cal);

// What one replay measured. Times are CUDA-event times in ns.
struct ReplayMeasurement {
  Calibration calibration;
  std::vector<double> iteration_ns;      // per timed iteration: start to the compute stream's last step
  std::vector<double> all_streams_ns;    // per timed iteration: start until every stream finished
  std::vector<double> step_ns;           // per step: mean duration over timed iterations (0 for markers)
  double host_issue_ns = 0.0;            // host wall time to issue one iteration (graph: one launch)
  StepId first_failing_step = kNoStep;   // integrity: the first step that found a wrong pattern
  std::uint64_t fills = 0, poisons = 0;  // pattern writes at allocations, per iteration
  std::uint64_t read_words = 0;          // per iteration: input words of op / recompute / access steps
  std::uint64_t read_words_checked = 0;  // of them, checked (sample stride and thinning)
  std::uint64_t thinned_steps = 0;       // steps whose check was thinned to fit their duration
  std::uint64_t view_steps = 0;          // op steps of no duration and no writes: no kernel launched
};

// The stride at which an op step checks its inputs (plain C++, shared by the backend and its tests).
// Checking every sampled word costs traffic / check bandwidth on top of writing the outputs; where
// that does not fit in kCheckShare of what `spin_ns` (the op's duration less the kernel overhead)
// leaves after the writes, the check is thinned: the sample stride times 16, 32, ... up to
// kMaxThinning, the first that fits. Thinning below 8 words (one 32-byte memory sector) would read
// the same sectors and save nothing. The share and the ceiling come from the H200 replays of
// 2026-11-28 (docs/cuda-validation.md): at 0.8 and a ceiling of 1024 (one word per 4 KiB), ops at the
// 4.5 us floor that read bilstm's 1 GiB buffers outlasted their duration by 2-4 us, and long
// element-wise ops by 2-3 us (the check's and the writes' tails). The outputs are always written at
// the sample stride, so a thinned check reads only words that were written.
inline constexpr std::uint32_t kFirstThinning = 16, kMaxThinning = 1U << 20;
inline constexpr double kCheckShare = 0.6;
// Bytes of memory traffic for checking `bytes` every `stride` 4-byte words.
double check_traffic(double bytes, std::uint32_t stride);
std::uint32_t check_read_stride(double spin_ns, double read_bytes, double write_bytes, const ReplaySettings& settings,
                                const Calibration& cal);

// One timed copy between pinned host memory and the device.
struct LinkSample {
  bool device_to_host = true;
  std::uint64_t bytes = 0;
  double ns = 0.0;
};

// Least-squares fit ns = latency + bytes * ns_per_byte over one direction's samples.
struct LinkFit {
  double ns_per_byte = 0.0;
  double latency_ns = 0.0;
  double r2 = 0.0;  // coefficient of determination
  std::size_t samples = 0;
};
// Throws Error when the samples hold fewer than two distinct sizes or time does not grow with size.
LinkFit fit_link(const std::vector<LinkSample>& samples, bool device_to_host);

// The plan's swap steps as the replay timed them (m.step_ns), one sample per copy with a measured
// time: the link as copies run during training, beside compute and the other direction's copies.
// On the H200 those ran at 0.90 of the bandwidth isolated copies reach (docs/cuda-validation.md,
// "Copy model"), so this fit, not measure_link's, is the link a simulation should use.
std::vector<LinkSample> replay_copy_samples(const Plan& plan, const ReplayMeasurement& m);

// The backend: defined only in builds with CUDA (COOPSIM_HAVE_CUDA), in src/replay/*.cu.
namespace cuda {
// Number of usable devices; 0 with `why` set when there is none or no driver.
int device_count(std::string& why);
// Selects the device; throws Error when it cannot.
DeviceInfo open_device(int index);
ReplayMeasurement replay(const Plan& plan, const ReplaySettings& settings);
// Timed copies of a sweep of sizes in both directions, `repeats` times each.
std::vector<LinkSample> measure_link(int repeats);
}  // namespace cuda

}  // namespace coopsim::gpu
