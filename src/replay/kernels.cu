// The CUDA backend's kernels (op, fill, spin) and the clock and launch-overhead calibration.
// An op kernel lasts the op's simulated duration less the launch overhead, from the moment its
// block starts: spins of at least kGlobalTimerSpinNs follow the global nanosecond timer
// (%globaltimer), shorter ones count SM cycles with clock64() at the measured clock. Counting cycles
// alone ran memory-heavy ops 8-11 % long on an H200 (ResNet-50's batch-norm and ReLU steps) while
// compute-light spins stayed within 0.5 %: the SM clock drops under the check's memory traffic.
#include <algorithm>
#include <vector>

#include "coopsim/replay/check_layout.hpp"
#include "cuda_kernels.hpp"

namespace coopsim::gpu::cuda::detail {

namespace {

__device__ __forceinline__ std::uint32_t mix(std::uint32_t tensor, std::uint32_t version, std::uint64_t word) {
  std::uint32_t x = tensor * 0x9E3779B1U ^ (version + 1U) * 0x85EBCA77U ^
                    static_cast<std::uint32_t>(word) * 0xC2B2AE3DU ^
                    static_cast<std::uint32_t>(word >> 32) * 0x27D4EB2FU;
  x ^= x >> 16;
  x *= 0x7FEB352DU;
  x ^= x >> 15;
  x *= 0x846CA68BU;
  x ^= x >> 16;
  return x;
}

__device__ __forceinline__ uint4 pattern4(const DevRef& ref, std::uint64_t w) {
  return make_uint4(mix(ref.tensor, ref.version, w), mix(ref.tensor, ref.version, w + 1),
                    mix(ref.tensor, ref.version, w + 2), mix(ref.tensor, ref.version, w + 3));
}

// Whether word w of `ref` holds the version it is read at, or the version its op writes in place.
__device__ __forceinline__ bool holds(const DevRef& ref, std::uint64_t w, std::uint32_t x) {
  return x == mix(ref.tensor, ref.version, w) ||
         (ref.written_version != ref.version && x == mix(ref.tensor, ref.written_version, w));
}

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ std::uint64_t grid_thread() {
  return static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::uint64_t grid_threads() { return static_cast<std::uint64_t>(gridDim.x) * blockDim.x; }

// Checks the units of `ref` this thread owns (check_layout.hpp) at `read_stride`; true on a mismatch.
// Unthinned quads are loaded four at a time per thread (64 bytes in flight).
__device__ __forceinline__ bool check_ref(const char* arena, const DevRef& ref, std::uint32_t sample_stride,
                                          std::uint32_t read_stride) {
  const CheckLayout layout = CheckLayout::of(ref.offset, ref.words, sample_stride);
  const std::uint64_t t = grid_thread(), threads = grid_threads(), units = layout.units();
  const auto* p = reinterpret_cast<const std::uint32_t*>(arena + ref.offset);
  bool bad = false;
  if (read_stride != sample_stride) {  // thinned: the words at multiples of read_stride, spread evenly
    const std::uint64_t checks = layout.thinned_checks(read_stride);
    for (std::uint64_t j = t; j < checks; j += threads) {
      const std::uint64_t w = layout.thinned_word(j, read_stride);
      bad |= !holds(ref, w, p[w]);
    }
    return bad;
  }
  std::uint64_t first_single = t;  // this thread's first unit that is not a quad
  if (layout.quads) {
    const std::uint64_t quads = layout.body_quads();
    const auto* q = reinterpret_cast<const uint4*>(p);
    for (std::uint64_t m = t; m < quads; m += 4 * threads) {
      uint4 v[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        if (m + k * threads < quads) v[k] = q[m + k * threads];
      }
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const std::uint64_t i = m + k * threads;
        if (i >= quads) continue;
        const uint4 e = pattern4(ref, 4 * i);
        bad |= (v[k].x != e.x) | (v[k].y != e.y) | (v[k].z != e.z) | (v[k].w != e.w);
      }
    }
    first_single = quads + (t + threads - quads % threads) % threads;  // the least m >= quads, m = t mod threads
  }
  for (std::uint64_t m = first_single; m < units; m += threads) {
    const std::uint64_t w = layout.first_word(m);
    bad |= p[w] != mix(ref.tensor, ref.version, w);
  }
  return bad;
}

// Writes the units of `ref` this thread owns.
__device__ __forceinline__ void write_ref(char* arena, const DevRef& ref, std::uint32_t sample_stride) {
  const CheckLayout layout = CheckLayout::of(ref.offset, ref.words, sample_stride);
  const std::uint64_t t = grid_thread(), threads = grid_threads(), units = layout.units();
  auto* p = reinterpret_cast<std::uint32_t*>(arena + ref.offset);
  for (std::uint64_t m = t; m < units; m += threads) {
    const std::uint64_t w = layout.first_word(m);
    if (layout.unit_words(m) == 4) {
      reinterpret_cast<uint4*>(p)[m] = pattern4(ref, w);
    } else {
      p[w] = mix(ref.tensor, ref.version, w);
    }
  }
}

__global__ void op_kernel(char* arena, const DevRef* refs, std::uint32_t reads, std::uint32_t writes,
                          std::uint32_t read_stride, std::uint32_t write_stride, long long cycles, long long spin_ns,
                          std::uint32_t step, std::uint32_t* fail) {
  const long long t0 = clock64();
  const unsigned long long g0 = global_ns();
  for (std::uint32_t r = 0; r < reads; ++r) {
    if (check_ref(arena, refs[r], write_stride, read_stride)) atomicMin(fail, step);
  }
  for (std::uint32_t k = reads; k < reads + writes; ++k) write_ref(arena, refs[k], write_stride);
  if (spin_ns >= kGlobalTimerSpinNs) {
    while (global_ns() - g0 < static_cast<unsigned long long>(spin_ns)) {
    }
  } else {
    while (clock64() - t0 < cycles) {
    }
  }
}

__global__ void fill_kernel(char* arena, DevRef ref, std::uint32_t stride) { write_ref(arena, ref, stride); }

__global__ void spin_kernel(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

// Elapsed ms between two completed events.
float elapsed_ms(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
  return ms;
}

struct EventPair {
  cudaEvent_t a = nullptr, b = nullptr;
  EventPair() {
    check(cudaEventCreate(&a), "cudaEventCreate");
    check(cudaEventCreate(&b), "cudaEventCreate");
  }
  ~EventPair() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
};

}  // namespace

KernelShape op_kernel_shape(int sms) {
  constexpr int kThreads = 256;
  int per_sm = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, op_kernel, kThreads, 0), "cudaOccupancy (op kernel)");
  int fill_per_sm = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fill_per_sm, fill_kernel, kThreads, 0),
        "cudaOccupancy (fill kernel)");
  return KernelShape{std::max(1, sms) * std::max(1, std::min(per_sm, fill_per_sm)), kThreads};
}

void launch_op(cudaStream_t stream, KernelShape shape, char* arena, const DevRef* refs, std::uint32_t reads,
               std::uint32_t writes, std::uint32_t read_stride, std::uint32_t write_stride, long long cycles,
               long long spin_ns, std::uint32_t step, std::uint32_t* fail) {
  op_kernel<<<shape.blocks, shape.threads, 0, stream>>>(arena, refs, reads, writes, read_stride, write_stride, cycles,
                                                        spin_ns, step, fail);
  check(cudaGetLastError(), "op kernel launch");
}

void launch_fill(cudaStream_t stream, KernelShape shape, char* arena, DevRef ref, std::uint32_t stride) {
  fill_kernel<<<shape.blocks, shape.threads, 0, stream>>>(arena, ref, stride);
  check(cudaGetLastError(), "fill kernel launch");
}

double measure_cycles_per_ns(cudaStream_t stream) {
  constexpr long long kCycles = 100'000'000;  // about 50 ms at 2 GHz
  EventPair ev;
  std::vector<double> rates;
  spin_kernel<<<1, 1, 0, stream>>>(kCycles / 10);  // wake the clocks up
  check(cudaGetLastError(), "spin kernel launch");
  for (int i = 0; i < 3; ++i) {
    check(cudaEventRecord(ev.a, stream), "cudaEventRecord");
    spin_kernel<<<1, 1, 0, stream>>>(kCycles);
    check(cudaGetLastError(), "spin kernel launch");
    check(cudaEventRecord(ev.b, stream), "cudaEventRecord");
    check(cudaEventSynchronize(ev.b), "cudaEventSynchronize");
    rates.push_back(static_cast<double>(kCycles) / (static_cast<double>(elapsed_ms(ev.a, ev.b)) * 1e6));
  }
  std::sort(rates.begin(), rates.end());
  return rates[1];
}

double measure_launch_ns(cudaStream_t stream, KernelShape shape, bool graph, std::uint32_t* fail, long long spin_ns,
                         double cycles_per_ns) {
  constexpr int kLaunches = 200;
  const long long cycles = static_cast<long long>(static_cast<double>(spin_ns) * cycles_per_ns);
  EventPair ev;
  cudaGraphExec_t exec = nullptr;
  auto issue = [&] {
    for (int i = 0; i < kLaunches; ++i) launch_op(stream, shape, nullptr, nullptr, 0, 0, 1, 1, cycles, spin_ns, 0, fail);
  };
  if (graph) {
    cudaGraph_t g = nullptr;
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    issue();
    check(cudaStreamEndCapture(stream, &g), "cudaStreamEndCapture");
    check(cudaGraphInstantiate(&exec, g, 0), "cudaGraphInstantiate");
    cudaGraphDestroy(g);
  }
  double best = 0;
  for (int round = 0; round < 3; ++round) {
    check(cudaEventRecord(ev.a, stream), "cudaEventRecord");
    if (graph) {
      check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
    } else {
      issue();
    }
    check(cudaEventRecord(ev.b, stream), "cudaEventRecord");
    check(cudaEventSynchronize(ev.b), "cudaEventSynchronize");
    const double ns = static_cast<double>(elapsed_ms(ev.a, ev.b)) * 1e6 / kLaunches;
    best = round == 0 ? ns : std::min(best, ns);
  }
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  return best;
}

CheckBandwidth measure_check_bandwidth(cudaStream_t stream, KernelShape shape, std::uint32_t* fail) {
  constexpr std::uint64_t kBytes = 256ULL << 20;
  char* scratch = nullptr;
  DevRef* ref = nullptr;
  check(cudaMalloc(reinterpret_cast<void**>(&scratch), kBytes), "cudaMalloc (check calibration)");
  const cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&ref), sizeof(DevRef));
  if (e != cudaSuccess) cudaFree(scratch);
  check(e, "cudaMalloc (check calibration)");
  CheckBandwidth bw;
  try {
    const DevRef block{0, kBytes / 4, 1, 0, 0};
    check(cudaMemcpy(ref, &block, sizeof block, cudaMemcpyHostToDevice), "cudaMemcpy (check calibration)");
    EventPair ev;
    auto best = [&](bool read) {
      double fastest = 0;
      for (int round = 0; round < 4; ++round) {  // the first round warms up and is not counted
        check(cudaEventRecord(ev.a, stream), "cudaEventRecord");
        launch_op(stream, shape, scratch, ref, read ? 1 : 0, read ? 0 : 1, 1, 1, 0, 0, kNoFailure - 1, fail);
        check(cudaEventRecord(ev.b, stream), "cudaEventRecord");
        check(cudaEventSynchronize(ev.b), "cudaEventSynchronize");
        const double rate = static_cast<double>(kBytes) / (static_cast<double>(elapsed_ms(ev.a, ev.b)) * 1e6);
        if (round > 0) fastest = std::max(fastest, rate);
      }
      return fastest;
    };
    bw.write_bytes_per_ns = best(false);  // writes version 0 of tensor 1, which the read then checks
    bw.read_bytes_per_ns = best(true);
  } catch (...) {
    cudaFree(ref);
    cudaFree(scratch);
    throw;
  }
  cudaFree(ref);
  cudaFree(scratch);
  return bw;
}

}  // namespace coopsim::gpu::cuda::detail
