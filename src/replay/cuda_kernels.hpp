// Private to the CUDA backend's .cu files: the kernels' launchers (src/replay/kernels.cu) and the
// CUDA error check. The integrity pattern: 4-byte word w of tensor t's content version v
// holds mix(t, v, w); a poisoned block holds the pattern of tensor 0xffffffff, which no plan
// names, so reading it never matches.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "coopsim/base/error.hpp"

namespace coopsim::gpu::cuda::detail {

// Throws Error("replay-gpu: WHAT: CUDA error text") unless `e` is cudaSuccess.
inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(std::string("replay-gpu: ") + what + ": " + cudaGetErrorString(e));
}

inline constexpr std::uint32_t kPoisonTensor = 0xffffffffU;
inline constexpr std::uint32_t kNoFailure = 0xffffffffU;

// One tensor content in the arena, as the kernels see it.
struct DevRef {
  std::uint64_t offset = 0;
  std::uint64_t words = 0;  // content bytes / 4
  std::uint32_t tensor = 0;
  std::uint32_t version = 0;
};

struct KernelShape {
  int blocks = 1;  // at most one per SM, so every block of a kernel runs at once
  int threads = 256;
};

// The op kernel: checks refs[0, reads) against their patterns (a mismatch sets *fail to the
// smallest failing step), writes refs[reads, reads + writes), then spins until `cycles` SM
// cycles have passed since the block started.
void launch_op(cudaStream_t stream, KernelShape shape, char* arena, const DevRef* refs, std::uint32_t reads,
               std::uint32_t writes, std::uint32_t stride, long long cycles, std::uint32_t step, std::uint32_t* fail);

// Writes version `version` of `tensor` over `words` words at `offset` (poison: kPoisonTensor).
void launch_fill(cudaStream_t stream, KernelShape shape, char* arena, DevRef ref, std::uint32_t stride);

// The SM clock: cycles per ns of CUDA-event time, from a single-thread spin of known length.
double measure_cycles_per_ns(cudaStream_t stream);

// Mean time per empty op kernel over back-to-back launches, issued the way the replay issues
// (captured as one CUDA graph, or from the host).
double measure_kernel_overhead_ns(cudaStream_t stream, KernelShape shape, bool graph, std::uint32_t* fail);

}  // namespace coopsim::gpu::cuda::detail
