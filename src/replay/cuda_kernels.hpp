// Private to the CUDA backend's .cu files: the kernels' launchers (src/replay/kernels.cu) and the
// CUDA error check. The integrity pattern: 4-byte word w of tensor t's content version v
// holds mix(t, v, w); a poisoned block holds the pattern of tensor 0xffffffff, which no plan
// names, so reading it never matches.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "coopsim/base/error.hpp"
#include "coopsim/replay/replay.hpp"

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
  // An input of an op that also writes the same tensor (in place, e.g. aten::add_): the version it
  // writes, which a thinned check also accepts, since the word's owner may already have written it;
  // else `version`.
  std::uint32_t written_version = 0;
};

struct KernelShape {
  int blocks = 1;  // SMs x resident blocks per SM (occupancy), so every block of a kernel runs at once
  int threads = 256;
};

// The shape of the op and fill kernels on the current device: as many 256-thread blocks as are
// resident at once (cudaOccupancyMaxActiveBlocksPerMultiprocessor x SMs), enough loads in flight
// to run the check near the memory's bandwidth.
KernelShape op_kernel_shape(int sms);

// The op kernel: checks refs[0, reads) against their patterns at `read_stride` (a mismatch sets
// *fail to the smallest failing step), writes refs[reads, reads + writes) at `write_stride`,
// then spins until `spin_ns` ns of the global timer (spins of at least kGlobalTimerSpinNs) or
// `cycles` SM cycles (shorter spins) have passed since the block started. Stride 1 uses
// 16-byte loads and stores where the block is 16-byte aligned.
void launch_op(cudaStream_t stream, KernelShape shape, char* arena, const DevRef* refs, std::uint32_t reads,
               std::uint32_t writes, std::uint32_t read_stride, std::uint32_t write_stride, long long cycles,
               long long spin_ns, std::uint32_t step, std::uint32_t* fail);

// Spins at least this long follow %globaltimer (immune to SM clock changes); shorter ones count
// cycles, where a clock change costs little and the timer's update step could cost more.
inline constexpr long long kGlobalTimerSpinNs = static_cast<long long>(kSpinTimerNs);

// Bytes per ns of the op kernel checking (read) and writing (write) a 256 MiB scratch block at
// stride 1, best of three; the scratch is allocated and freed here.
struct CheckBandwidth {
  double read_bytes_per_ns = 0.0, write_bytes_per_ns = 0.0;
};
CheckBandwidth measure_check_bandwidth(cudaStream_t stream, KernelShape shape, std::uint32_t* fail);

// Writes version `version` of `tensor` over `words` words at `offset` (poison: kPoisonTensor).
void launch_fill(cudaStream_t stream, KernelShape shape, char* arena, DevRef ref, std::uint32_t stride);

// The SM clock: cycles per ns of CUDA-event time, from a single-thread spin of known length.
double measure_cycles_per_ns(cudaStream_t stream);

// Mean time per op kernel that checks and writes nothing and spins `spin_ns` (cycles at
// `cycles_per_ns` below kGlobalTimerSpinNs) over back-to-back launches, issued the way the replay
// issues (captured as one CUDA graph, or from the host). With spin 0: the launch overhead.
double measure_launch_ns(cudaStream_t stream, KernelShape shape, bool graph, std::uint32_t* fail, long long spin_ns,
                         double cycles_per_ns);

}  // namespace coopsim::gpu::cuda::detail
