// Host<->device link model: transfer time = latency + bytes / bandwidth, per direction.
// Presets (see docs/architecture.md for derivations):
//   pcie3-x16   AutoSwap's measured linear fit on PCIe 3.0 x16, pinned memory
//               (apache/singa PR #412 @8e8a7e15 src/core/device/swap_gpu.cc SwapOutTime/SwapInTime):
//               D2H 0.0756 ns/B + 47.2 us, H2D 0.0823 ns/B + 9.7 us.
//   pcie4-x16   the pcie3 fit with twice the bandwidth (PCIe 4.0 doubles the per-lane rate), same latency.
//   pcie5-x16   four times the pcie3 bandwidth, same latency.
//   nvlink-c2c  Grace-Hopper NVLink-C2C: 450 GB/s per direction (900 GB/s total), 2 us latency (assumed).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "coopsim/base/params.hpp"
#include "coopsim/base/units.hpp"

namespace coopsim {

enum class Direction : std::uint8_t { DeviceToHost, HostToDevice };

struct LinkDirection {
  double ns_per_byte = 0.0;  // 1 / bandwidth
  SimTime latency{0};
  [[nodiscard]] SimTime transfer_time(Bytes b) const;
};

struct LinkModel {
  std::string name;
  LinkDirection d2h, h2d;
  bool serial = true;  // one transfer at a time per direction (AutoSwap); false = unlimited overlap
  [[nodiscard]] SimTime transfer_time(Direction d, Bytes b) const {
    return d == Direction::DeviceToHost ? d2h.transfer_time(b) : h2d.transfer_time(b);
  }
};

struct LinkPreset {
  std::string name;
  std::string help;
  LinkDirection d2h, h2d;
};
std::span<const LinkPreset> link_presets();

// The "link" config section: preset plus optional per-direction overrides.
std::vector<ParamDoc> link_param_docs();
LinkModel make_link(const Params& p);

}  // namespace coopsim
