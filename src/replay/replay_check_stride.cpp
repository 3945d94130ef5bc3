// The input-check stride of replay-gpu's op kernel (include/coopsim/replay/replay.hpp): the check
// never makes an op outlast its simulated duration unless --full-check asks for every word.
#include <algorithm>

#include "coopsim/replay/replay.hpp"

namespace coopsim::gpu {

double check_traffic(double bytes, std::uint32_t stride) { return stride <= 8 ? bytes : bytes * 8.0 / stride; }

std::uint32_t check_read_stride(double spin_ns, double read_bytes, double write_bytes, const ReplaySettings& settings,
                                const Calibration& cal) {
  const std::uint32_t base = std::max<std::uint32_t>(1, settings.sample_stride);
  if (settings.full_check || read_bytes <= 0 || cal.check_read_bytes_per_ns <= 0) return base;
  const double write_ns =
      cal.check_write_bytes_per_ns > 0 ? check_traffic(write_bytes, base) / cal.check_write_bytes_per_ns : 0.0;
  const double budget_ns = std::max(0.0, spin_ns - write_ns) * kCheckShare;
  const std::uint32_t max_thin = std::max<std::uint32_t>(1, std::min<std::uint32_t>(kMaxThinning, (1U << 31) / base));
  std::uint32_t thin = 1;
  while (thin < max_thin && check_traffic(read_bytes, base * thin) / cal.check_read_bytes_per_ns > budget_ns) {
    thin = thin == 1 ? kFirstThinning : thin * 2;
  }
  return base * thin;
}

}  // namespace coopsim::gpu
