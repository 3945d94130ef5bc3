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

__global__ void op_kernel(char* arena, const DevRef* refs, std::uint32_t reads, std::uint32_t writes,
                          std::uint32_t stride, long long cycles, std::uint32_t step, std::uint32_t* fail) {
  const long long t0 = clock64();
  const std::uint64_t first = (static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * stride;
  const std::uint64_t step_words = static_cast<std::uint64_t>(gridDim.x) * blockDim.x * stride;
  for (std::uint32_t r = 0; r < reads; ++r) {
    const DevRef ref = refs[r];
    const auto* p = reinterpret_cast<const std::uint32_t*>(arena + ref.offset);
    for (std::uint64_t w = first; w < ref.words; w += step_words) {
      if (p[w] != mix(ref.tensor, ref.version, w)) {
        atomicMin(fail, step);
        break;
      }
    }
  }
  for (std::uint32_t k = reads; k < reads + writes; ++k) {
    const DevRef ref = refs[k];
    auto* p = reinterpret_cast<std::uint32_t*>(arena + ref.offset);
    for (std::uint64_t w = first; w < ref.words; w += step_words) p[w] = mix(ref.tensor, ref.version, w);
  }
  while (clock64() - t0 < cycles) {
  }
}

__global__ void fill_kernel(char* arena, DevRef ref, std::uint32_t stride) {
  const std::uint64_t first = (static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * stride;
  const std::uint64_t step_words = static_cast<std::uint64_t>(gridDim.x) * blockDim.x * stride;
  auto* p = reinterpret_cast<std::uint32_t*>(arena + ref.offset);
  for (std::uint64_t w = first; w < ref.words; w += step_words) p[w] = mix(ref.tensor, ref.version, w);
}

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

void launch_op(cudaStream_t stream, KernelShape shape, char* arena, const DevRef* refs, std::uint32_t reads,
               std::uint32_t writes, std::uint32_t stride, long long cycles, std::uint32_t step, std::uint32_t* fail) {
  op_kernel<<<shape.blocks, shape.threads, 0, stream>>>(arena, refs, reads, writes, stride, cycles, step, fail);
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
    for (int i = 0; i < kLaunches; ++i) launch_op(stream, shape, nullptr, nullptr, 0, 0, 1, 0, 0, fail);
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

}  // namespace coopsim::gpu::cuda::detail
