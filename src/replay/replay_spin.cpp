// The spin of replay-gpu's op kernel (include/coopsim/replay/replay.hpp): what is left of an op's
// simulated duration once the launch overhead and the spin's own excess are taken off.
#include <algorithm>

#include "coopsim/replay/replay.hpp"

namespace coopsim::gpu {

double op_spin_ns(double duration_ns, const Calibration& cal) {
  const double spin = std::max(0.0, duration_ns - cal.kernel_overhead_ns);
  // A spin that still reaches the timer's range after its excess follows the timer; the rest count
  // cycles and lose the cycle spin's excess instead.
  const double on_timer = spin - std::max(0.0, cal.spin_excess_timer_ns);
  if (on_timer >= kSpinTimerNs) return on_timer;
  return std::min(std::max(0.0, spin - std::max(0.0, cal.spin_excess_cycles_ns)), kSpinTimerNs - 1.0);
}

}  // namespace coopsim::gpu
