// The CUDA backend's device queries and the host<->device link measurement: pinned host memory,
// one copy at a time on its own stream, each timed with CUDA events, over a sweep of sizes
// (the fit is fit_link in replay_report.cpp).
#include <string>
#include <vector>

#include "coopsim/replay/replay.hpp"
#include "cuda_kernels.hpp"

namespace coopsim::gpu::cuda {

using detail::check;

int device_count(std::string& why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    why = cudaGetErrorString(e);
    return 0;
  }
  if (n == 0) why = "cudaGetDeviceCount reports no device";
  return n;
}

DeviceInfo open_device(int index) {
  check(cudaSetDevice(index), "cudaSetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
  DeviceInfo d;
  d.index = index;
  d.name = prop.name;
  d.compute_major = prop.major;
  d.compute_minor = prop.minor;
  d.sm_count = prop.multiProcessorCount;
  d.memory_bytes = prop.totalGlobalMem;
  check(cudaDeviceGetAttribute(&d.clock_khz, cudaDevAttrClockRate, index), "cudaDeviceGetAttribute");
  check(cudaDriverGetVersion(&d.driver_version), "cudaDriverGetVersion");
  check(cudaRuntimeGetVersion(&d.runtime_version), "cudaRuntimeGetVersion");
  return d;
}

std::vector<LinkSample> measure_link(int repeats) {
  // 4 KiB to 256 MiB in steps of 4x.
  std::vector<std::uint64_t> sizes;
  for (std::uint64_t s = 4096; s <= (256ULL << 20); s *= 4) sizes.push_back(s);
  const std::uint64_t largest = sizes.back();
  void* host = nullptr;
  void* dev = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t a = nullptr, b = nullptr;
  std::vector<LinkSample> out;
  auto release = [&] {
    if (a != nullptr) cudaEventDestroy(a);
    if (b != nullptr) cudaEventDestroy(b);
    if (stream != nullptr) cudaStreamDestroy(stream);
    if (dev != nullptr) cudaFree(dev);
    if (host != nullptr) cudaFreeHost(host);
  };
  try {
    check(cudaMallocHost(&host, largest), "cudaMallocHost (link sweep)");
    check(cudaMalloc(&dev, largest), "cudaMalloc (link sweep)");
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaEventCreate(&a), "cudaEventCreate");
    check(cudaEventCreate(&b), "cudaEventCreate");
    check(cudaMemsetAsync(dev, 0, largest, stream), "cudaMemsetAsync");
    for (const bool d2h : {true, false}) {
      for (const std::uint64_t size : sizes) {
        for (int r = 0; r <= repeats; ++r) {  // the first copy of each size warms up and is not kept
          check(cudaEventRecord(a, stream), "cudaEventRecord");
          check(d2h ? cudaMemcpyAsync(host, dev, size, cudaMemcpyDeviceToHost, stream)
                    : cudaMemcpyAsync(dev, host, size, cudaMemcpyHostToDevice, stream),
                "cudaMemcpyAsync (link sweep)");
          check(cudaEventRecord(b, stream), "cudaEventRecord");
          check(cudaEventSynchronize(b), "cudaEventSynchronize");
          float ms = 0;
          check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
          if (r > 0) out.push_back(LinkSample{d2h, size, static_cast<double>(ms) * 1e6});
        }
      }
    }
  } catch (...) {
    release();
    throw;
  }
  release();
  return out;
}

}  // namespace coopsim::gpu::cuda
