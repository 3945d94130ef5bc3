// replay-gpu's device side: one arena, pinned host copies, three streams, and the plan's steps
// issued in order. Every step first waits (cudaStreamWaitEvent) for the events of the steps in
// its `after` list, runs on its stream (op / recompute / access: the op kernel; alloc: a fill
// of version 0's pattern, or a poison fill with --poison; swaps: cudaMemcpyAsync between the
// arena and the tensor's pinned host copy), and records its own event when a later step waits
// for it. By default one iteration is captured as a CUDA graph and launched for each warm-up
// and timed iteration, so host issue overhead does not enter the timing. A second capture has an
// event pair (external event nodes) around every step and runs once after the timed iterations for
// the per-step times: on an H200 the pairs cost about 3.5 us per step, so the timed iterations run
// without them.
#include <algorithm>
#include <array>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "coopsim/replay/replay.hpp"
#include "cuda_kernels.hpp"

namespace coopsim::gpu::cuda {

namespace {

using detail::check;
using detail::DevRef;

// Every device and host object of one replay, released in the destructor.
struct Resources {
  char* arena = nullptr;
  DevRef* refs = nullptr;
  std::uint32_t* fail = nullptr;
  std::map<TensorId, void*> host;  // tensor -> pinned host copy
  std::array<cudaStream_t, kStreams> streams{};
  std::vector<cudaEvent_t> done, t0, t1;  // per step; nullptr where not needed
  std::vector<cudaEvent_t> own;           // every event created, for release
  cudaEvent_t fork = nullptr, join_d2h = nullptr, join_h2d = nullptr;
  cudaEvent_t it_start = nullptr, it_compute = nullptr, it_end = nullptr;
  cudaGraphExec_t exec = nullptr;        // one iteration, timed as a whole
  cudaGraphExec_t exec_steps = nullptr;  // one iteration with an event pair around every step

  Resources() = default;
  Resources(const Resources&) = delete;
  Resources& operator=(const Resources&) = delete;
  ~Resources() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (exec_steps != nullptr) cudaGraphExecDestroy(exec_steps);
    for (cudaEvent_t e : own) cudaEventDestroy(e);
    for (cudaStream_t s : streams) {
      if (s != nullptr) cudaStreamDestroy(s);
    }
    for (auto& [t, p] : host) cudaFreeHost(p);
    if (fail != nullptr) cudaFree(fail);
    if (refs != nullptr) cudaFree(refs);
    if (arena != nullptr) cudaFree(arena);
  }
  cudaEvent_t event(bool timing) {
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming), "cudaEventCreate");
    own.push_back(e);
    return e;
  }
};

// What each step launches, prepared once on the host.
struct Prepared {
  std::vector<std::uint32_t> first_ref;  // per step: index of its first DevRef
  std::vector<std::uint32_t> reads, writes;
  std::vector<long long> cycles;   // op / recompute spin in SM cycles (short spins)
  std::vector<long long> spin_ns;  // the same spin in ns (long spins follow the global timer)
  std::vector<std::uint32_t> read_stride;  // op / recompute / access: the input check's stride
  std::vector<DevRef> refs;
  std::vector<bool> fill;  // alloc steps that write a pattern
  // Op steps of no duration that write nothing (views: detach, t, slice, ...): PyTorch launches no
  // kernel for them, so neither does the replay; the later ops that read the tensor check it.
  std::vector<bool> view;
  std::uint64_t fills = 0, poisons = 0;
  std::uint64_t read_words = 0, read_words_checked = 0, thinned_steps = 0, view_steps = 0;
};


bool gpu_work(const PlanStep& s, const Prepared& p, std::uint32_t i) {
  switch (s.kind) {
    case StepKind::Op:
    case StepKind::Recompute: return !p.view[i];
    case StepKind::Access:
    case StepKind::SwapOut:
    case StepKind::SwapIn: return true;
    case StepKind::Alloc: return p.fill[i];
    case StepKind::Free:
    case StepKind::Evict: return false;
  }
  return false;
}

DevRef content(const Plan& plan, const PlanRef& r) {
  if (r.offset % 4 != 0) {
    throw Error("replay-gpu: tensor " + std::to_string(index_of(r.tensor)) + " is at offset " +
                std::to_string(r.offset) + ", which is not a multiple of 4");
  }
  const Bytes bytes = std::min(plan.tensor(r.tensor)->size, r.size);
  return DevRef{r.offset, bytes.value / 4, index_of(r.tensor), r.version, r.version};
}

Prepared prepare(const Plan& plan, const ReplaySettings& settings, const Calibration& cal) {
  Prepared p;
  const std::size_t n = plan.steps.size();
  p.first_ref.resize(n);
  p.reads.resize(n);
  p.writes.resize(n);
  p.cycles.resize(n);
  p.spin_ns.resize(n);
  p.fill.resize(n);
  p.view.resize(n);
  p.read_stride.assign(n, settings.sample_stride);
  auto count_reads = [&](std::size_t i) {
    for (std::uint32_t k = 0; k < p.reads[i]; ++k) {
      const std::uint64_t words = p.refs[p.first_ref[i] + k].words;
      p.read_words += words;
    }
    if (p.view[i]) return;  // read by no kernel
    for (std::uint32_t k = 0; k < p.reads[i]; ++k) {
      const std::uint64_t words = p.refs[p.first_ref[i] + k].words;
      p.read_words_checked += (words + p.read_stride[i] - 1) / p.read_stride[i];
    }
    if (p.read_stride[i] != settings.sample_stride) ++p.thinned_steps;
  };
  for (std::size_t i = 0; i < n; ++i) {
    const PlanStep& s = plan.steps[i];
    p.first_ref[i] = static_cast<std::uint32_t>(p.refs.size());
    switch (s.kind) {
      case StepKind::Op:
      case StepKind::Recompute: {
        for (const auto& r : s.reads) {
          DevRef ref = content(plan, r);
          for (const auto& w : s.writes) {
            if (w.tensor == r.tensor) ref.written_version = w.version;  // in place: see DevRef
          }
          p.refs.push_back(ref);
        }
        for (const auto& r : s.writes) p.refs.push_back(content(plan, r));
        p.reads[i] = static_cast<std::uint32_t>(s.reads.size());
        p.writes[i] = static_cast<std::uint32_t>(s.writes.size());
        const double spin_ns = op_spin_ns(static_cast<double>((s.end - s.start).count()), cal);
        p.cycles[i] = static_cast<long long>(spin_ns * cal.cycles_per_ns);
        p.spin_ns[i] = static_cast<long long>(spin_ns);
        double read_bytes = 0, write_bytes = 0;
        for (std::uint32_t k = 0; k < p.reads[i] + p.writes[i]; ++k) {
          (k < p.reads[i] ? read_bytes : write_bytes) += 4.0 * static_cast<double>(p.refs[p.first_ref[i] + k].words);
        }
        p.read_stride[i] = check_read_stride(spin_ns, read_bytes, write_bytes, settings, cal);
        p.view[i] = s.kind == StepKind::Op && s.end == s.start && s.writes.empty() && !settings.full_check;
        p.view_steps += p.view[i];
        count_reads(i);
        break;
      }
      case StepKind::Access:
        p.refs.push_back(content(plan, s.block));
        p.reads[i] = 1;
        p.read_stride[i] = check_read_stride(0.0, 4.0 * static_cast<double>(p.refs.back().words), 0.0, settings, cal);
        count_reads(i);
        break;
      case StepKind::Alloc:
        if (s.fill) {
          p.refs.push_back(content(plan, PlanRef{s.block.tensor, 0, s.block.offset, s.block.size}));
          p.fill[i] = true;
          ++p.fills;
        } else if (settings.poison) {
          p.refs.push_back(DevRef{s.block.offset, s.block.size.value / 4, detail::kPoisonTensor, 0, 0});
          p.fill[i] = true;
          ++p.poisons;
        }
        break;
      case StepKind::SwapOut:
      case StepKind::SwapIn:
        (void)content(plan, s.block);  // alignment check
        break;
      case StepKind::Free:
      case StepKind::Evict: break;
    }
  }
  return p;
}

void allocate(Resources& r, const Plan& plan, const Prepared& p, const ReplaySettings& settings) {
  if (plan.header.arena_size.value > 0) {
    check(cudaMalloc(reinterpret_cast<void**>(&r.arena), plan.header.arena_size.value),
          ("cudaMalloc of the " + std::to_string(plan.header.arena_size.value) + "-byte arena").c_str());
  }
  if (!p.refs.empty()) {
    check(cudaMalloc(reinterpret_cast<void**>(&r.refs), p.refs.size() * sizeof(DevRef)), "cudaMalloc (refs)");
    check(cudaMemcpy(r.refs, p.refs.data(), p.refs.size() * sizeof(DevRef), cudaMemcpyHostToDevice),
          "cudaMemcpy (refs)");
  }
  check(cudaMalloc(reinterpret_cast<void**>(&r.fail), sizeof(std::uint32_t)), "cudaMalloc (flag)");
  check(cudaMemset(r.fail, 0xff, sizeof(std::uint32_t)), "cudaMemset (flag)");
  std::map<TensorId, std::uint64_t> host_bytes;
  for (const auto& s : plan.steps) {
    if (s.kind == StepKind::SwapOut || s.kind == StepKind::SwapIn) {
      auto& b = host_bytes[s.block.tensor];
      b = std::max(b, s.bytes.value);
    }
  }
  for (const auto& [t, bytes] : host_bytes) {
    void* h = nullptr;
    check(cudaMallocHost(&h, std::max<std::uint64_t>(bytes, 1)), "cudaMallocHost (host copies)");
    r.host[t] = h;
  }
  for (auto& s : r.streams) check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  const std::size_t n = plan.steps.size();
  r.done.assign(n, nullptr);
  r.t0.assign(n, nullptr);
  r.t1.assign(n, nullptr);
  for (std::size_t i = 0; i < n; ++i) {
    for (const StepId a : plan.steps[i].after) {
      if (r.done[index_of(a)] == nullptr) r.done[index_of(a)] = r.event(false);
    }
    if (gpu_work(plan.steps[i], p, static_cast<std::uint32_t>(i))) {
      r.t0[i] = r.event(true);
      r.t1[i] = r.event(true);
    }
  }
  r.fork = r.event(false);
  r.join_d2h = r.event(false);
  r.join_h2d = r.event(false);
  r.it_start = r.event(true);
  r.it_compute = r.event(true);
  r.it_end = r.event(true);
  (void)settings;
}

// Issues one iteration (under stream capture when `capture`).
void issue(Resources& r, const Plan& plan, const Prepared& p, const ReplaySettings& settings, detail::KernelShape shape,
           bool capture, bool step_events) {
  auto timing = [&](cudaEvent_t e, cudaStream_t s) {
    check(capture ? cudaEventRecordWithFlags(e, s, cudaEventRecordExternal) : cudaEventRecord(e, s), "cudaEventRecord");
  };
  cudaStream_t compute = r.streams[0];
  check(cudaEventRecord(r.fork, compute), "cudaEventRecord");
  for (std::size_t k = 1; k < kStreams; ++k) check(cudaStreamWaitEvent(r.streams[k], r.fork, 0), "cudaStreamWaitEvent");
  for (std::uint32_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& s = plan.steps[i];
    cudaStream_t st = r.streams[static_cast<std::size_t>(s.stream)];
    for (const StepId a : s.after) check(cudaStreamWaitEvent(st, r.done[index_of(a)], 0), "cudaStreamWaitEvent");
    if (step_events && r.t0[i] != nullptr) timing(r.t0[i], st);
    switch (s.kind) {
      case StepKind::Op:
      case StepKind::Recompute:
      case StepKind::Access:
        if (p.view[i]) break;
        detail::launch_op(st, shape, r.arena, r.refs + p.first_ref[i], p.reads[i], p.writes[i], p.read_stride[i],
                          settings.sample_stride, p.cycles[i], p.spin_ns[i], i, r.fail);
        break;
      case StepKind::Alloc:
        if (p.fill[i]) detail::launch_fill(st, shape, r.arena, p.refs[p.first_ref[i]], settings.sample_stride);
        break;
      case StepKind::SwapOut:
        check(cudaMemcpyAsync(r.host.at(s.block.tensor), r.arena + s.block.offset, s.bytes.value,
                              cudaMemcpyDeviceToHost, st),
              "cudaMemcpyAsync (swap-out)");
        break;
      case StepKind::SwapIn:
        check(cudaMemcpyAsync(r.arena + s.block.offset, r.host.at(s.block.tensor), s.bytes.value,
                              cudaMemcpyHostToDevice, st),
              "cudaMemcpyAsync (swap-in)");
        break;
      case StepKind::Free:
      case StepKind::Evict: break;
    }
    if (step_events && r.t1[i] != nullptr) timing(r.t1[i], st);
    if (r.done[i] != nullptr) check(cudaEventRecord(r.done[i], st), "cudaEventRecord");
  }
  timing(r.it_compute, compute);
  check(cudaEventRecord(r.join_d2h, r.streams[1]), "cudaEventRecord");
  check(cudaEventRecord(r.join_h2d, r.streams[2]), "cudaEventRecord");
  check(cudaStreamWaitEvent(compute, r.join_d2h, 0), "cudaStreamWaitEvent");
  check(cudaStreamWaitEvent(compute, r.join_h2d, 0), "cudaStreamWaitEvent");
}

double elapsed_ns(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
  return static_cast<double>(ms) * 1e6;
}

}  // namespace

ReplayMeasurement replay(const Plan& plan, const ReplaySettings& settings) {
  int device = 0, sms = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  const detail::KernelShape shape = detail::op_kernel_shape(sms);

  Resources r;
  ReplayMeasurement m;
  check(cudaStreamCreateWithFlags(&r.streams[0], cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaMalloc(reinterpret_cast<void**>(&r.fail), sizeof(std::uint32_t)), "cudaMalloc (flag)");
  m.calibration.cycles_per_ns = detail::measure_cycles_per_ns(r.streams[0]);
  auto launch_ns = [&](long long spin_ns) {
    return detail::measure_launch_ns(r.streams[0], shape, settings.graph, r.fail, spin_ns, m.calibration.cycles_per_ns);
  };
  m.calibration.kernel_overhead_ns = launch_ns(0);
  constexpr long long kTimerSpin = 20'000, kCycleSpin = 1'000;
  static_assert(kTimerSpin >= detail::kGlobalTimerSpinNs && kCycleSpin < detail::kGlobalTimerSpinNs);
  m.calibration.spin_excess_timer_ns = launch_ns(kTimerSpin) - kTimerSpin - m.calibration.kernel_overhead_ns;
  m.calibration.spin_excess_cycles_ns = launch_ns(kCycleSpin) - kCycleSpin - m.calibration.kernel_overhead_ns;
  const detail::CheckBandwidth bw = detail::measure_check_bandwidth(r.streams[0], shape, r.fail);
  m.calibration.check_read_bytes_per_ns = bw.read_bytes_per_ns;
  m.calibration.check_write_bytes_per_ns = bw.write_bytes_per_ns;
  cudaFree(r.fail);
  r.fail = nullptr;
  cudaStreamDestroy(r.streams[0]);
  r.streams[0] = nullptr;

  const Prepared p = prepare(plan, settings, m.calibration);
  m.fills = p.fills;
  m.poisons = p.poisons;
  m.read_words = p.read_words;
  m.read_words_checked = p.read_words_checked;
  m.thinned_steps = p.thinned_steps;
  m.view_steps = p.view_steps;
  allocate(r, plan, p, settings);
  cudaStream_t compute = r.streams[0];
  auto capture = [&](bool step_events) {
    cudaGraph_t g = nullptr;
    cudaGraphExec_t exec = nullptr;
    check(cudaStreamBeginCapture(compute, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    issue(r, plan, p, settings, shape, true, step_events);
    check(cudaStreamEndCapture(compute, &g), "cudaStreamEndCapture");
    const cudaError_t e = cudaGraphInstantiate(&exec, g, 0);
    cudaGraphDestroy(g);
    check(e, "cudaGraphInstantiate");
    return exec;
  };
  if (settings.graph) {
    r.exec = capture(false);
    r.exec_steps = capture(true);
  }
  // Warm-ups and timed iterations run without per-step events (each event node costs about a
  // microsecond, thousands per iteration); one more iteration with them gives the per-step times.
  m.step_ns.assign(plan.steps.size(), 0.0);
  double host_total = 0;
  const int iterations = settings.warmup + settings.iterations + 1;
  for (int it = 0; it < iterations; ++it) {
    const bool profile = it == iterations - 1;
    check(cudaEventRecord(r.it_start, compute), "cudaEventRecord");
    const auto h0 = std::chrono::steady_clock::now();
    if (settings.graph) {
      check(cudaGraphLaunch(profile ? r.exec_steps : r.exec, compute), "cudaGraphLaunch");
    } else {
      issue(r, plan, p, settings, shape, false, profile);
    }
    const auto h1 = std::chrono::steady_clock::now();
    check(cudaEventRecord(r.it_end, compute), "cudaEventRecord");
    check(cudaEventSynchronize(r.it_end), "replaying the plan");
    if (profile) {
      for (std::size_t i = 0; i < plan.steps.size(); ++i) {
        if (r.t0[i] != nullptr) m.step_ns[i] = elapsed_ns(r.t0[i], r.t1[i]);
      }
      continue;
    }
    if (it < settings.warmup) continue;
    host_total += static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(h1 - h0).count());
    m.iteration_ns.push_back(elapsed_ns(r.it_start, r.it_compute));
    m.all_streams_ns.push_back(elapsed_ns(r.it_start, r.it_end));
  }
  m.host_issue_ns = host_total / settings.iterations;
  std::uint32_t flag = detail::kNoFailure;
  check(cudaMemcpy(&flag, r.fail, sizeof flag, cudaMemcpyDeviceToHost), "cudaMemcpy (flag)");
  m.first_failing_step = flag == detail::kNoFailure ? kNoStep : StepId{flag};
  return m;
}

}  // namespace coopsim::gpu::cuda
