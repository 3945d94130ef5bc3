// The CUDA backend's kernels (op, fill, spin) and the clock and launch-overhead calibration.
// An op kernel lasts the op's simulated duration: it counts SM cycles with clock64() from the
// moment its block starts and stops at cycles = (duration - launch overhead) * measured clock.
#include <algorithm>
#include <vector>

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

// Word w of `ref` from word `first` on, every `stride` words (the strided form), or every word with
// 16-byte accesses over the aligned body (stride 1): `visit(word index, pointer)` for the scalar
// words, `visit4(first word, pointer to 4 words)` for the quads. Four quads per thread per round, so
// each thread has 64 bytes in flight.
template <class Word, class Quad>
__device__ __forceinline__ void for_words(char* arena, const DevRef& ref, std::uint32_t stride, Word visit,
                                          Quad visit4) {
  const std::uint64_t thread = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::uint64_t threads = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  auto* p = reinterpret_cast<std::uint32_t*>(arena + ref.offset);
  if (stride != 1 || ref.offset % 16 != 0) {
    for (std::uint64_t w = thread * stride; w < ref.words; w += threads * stride) visit(w, p + w);
    return;
  }
  const std::uint64_t quads = ref.words / 4;
  auto* q = reinterpret_cast<uint4*>(p);
  for (std::uint64_t base = thread; base < quads; base += 4 * threads) {
    uint4 v[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const std::uint64_t i = base + k * threads;
      if (i < quads) v[k] = q[i];
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const std::uint64_t i = base + k * threads;
      if (i < quads) visit4(4 * i, &q[i], v[k]);
    }
  }
  for (std::uint64_t w = 4 * quads + thread; w < ref.words; w += threads) visit(w, p + w);
}

__device__ __forceinline__ uint4 pattern4(const DevRef& ref, std::uint64_t w) {
  return make_uint4(mix(ref.tensor, ref.version, w), mix(ref.tensor, ref.version, w + 1),
                    mix(ref.tensor, ref.version, w + 2), mix(ref.tensor, ref.version, w + 3));
}

__device__ __forceinline__ void write_ref(char* arena, const DevRef& ref, std::uint32_t stride) {
  // The quad form loads before it visits; a write needs no load, so it stores straight away.
  const std::uint64_t thread = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::uint64_t threads = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  auto* p = reinterpret_cast<std::uint32_t*>(arena + ref.offset);
  if (stride != 1 || ref.offset % 16 != 0) {
    for (std::uint64_t w = thread * stride; w < ref.words; w += threads * stride) p[w] = mix(ref.tensor, ref.version, w);
    return;
  }
  const std::uint64_t quads = ref.words / 4;
  auto* q = reinterpret_cast<uint4*>(p);
  for (std::uint64_t i = thread; i < quads; i += threads) q[i] = pattern4(ref, 4 * i);
  for (std::uint64_t w = 4 * quads + thread; w < ref.words; w += threads) p[w] = mix(ref.tensor, ref.version, w);
}

__global__ void op_kernel(char* arena, const DevRef* refs, std::uint32_t reads, std::uint32_t writes,
                          std::uint32_t read_stride, std::uint32_t write_stride, long long cycles, std::uint32_t step,
                          std::uint32_t* fail) {
  const long long t0 = clock64();
  for (std::uint32_t r = 0; r < reads; ++r) {
    const DevRef ref = refs[r];
    bool bad = false;
    for_words(
        arena, ref, read_stride, [&](std::uint64_t w, const std::uint32_t* at) { bad |= *at != mix(ref.tensor, ref.version, w); },
        [&](std::uint64_t w, const uint4*, const uint4& v) {
          const uint4 e = pattern4(ref, w);
          bad |= (v.x != e.x) | (v.y != e.y) | (v.z != e.z) | (v.w != e.w);
        });
    if (bad) atomicMin(fail, step);
  }
  for (std::uint32_t k = reads; k < reads + writes; ++k) write_ref(arena, refs[k], write_stride);
  while (clock64() - t0 < cycles) {
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
               std::uint32_t step, std::uint32_t* fail) {
  op_kernel<<<shape.blocks, shape.threads, 0, stream>>>(arena, refs, reads, writes, read_stride, write_stride, cycles,
                                                        step, fail);
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

double measure_kernel_overhead_ns(cudaStream_t stream, KernelShape shape, bool graph, std::uint32_t* fail) {
  constexpr int kLaunches = 200;
  EventPair ev;
  cudaGraphExec_t exec = nullptr;
  auto issue = [&] {
    for (int i = 0; i < kLaunches; ++i) launch_op(stream, shape, nullptr, nullptr, 0, 0, 1, 1, 0, 0, fail);
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
    const DevRef block{0, kBytes / 4, 1, 0};
    check(cudaMemcpy(ref, &block, sizeof block, cudaMemcpyHostToDevice), "cudaMemcpy (check calibration)");
    EventPair ev;
    auto best = [&](bool read) {
      double fastest = 0;
      for (int round = 0; round < 4; ++round) {  // the first round warms up and is not counted
        check(cudaEventRecord(ev.a, stream), "cudaEventRecord");
        launch_op(stream, shape, scratch, ref, read ? 1 : 0, read ? 0 : 1, 1, 1, 0, kNoFailure - 1, fail);
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
