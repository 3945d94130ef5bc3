// Link presets and the "link" config section. Derivations are in link.hpp.
#include "coopsim/model/link.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <utility>

#include "coopsim/base/error.hpp"

namespace coopsim {

SimTime LinkDirection::transfer_time(Bytes b) const {
  // Saturates at 2^63 - 1 ns, so a slower link never gives a shorter copy (and the engine stops
  // a run whose clock would pass that; docs/limits.md, "Arithmetic").
  const double ns = ns_per_byte * static_cast<double>(b.value);
  const SimTime copy = ns < 0x1p63 ? SimTime{static_cast<std::int64_t>(std::llround(ns))} : SimTime::max();
  return sat_add(latency, copy);
}

namespace {
// ns per byte for a bandwidth given in GB/s (10^9 bytes per second) is 1 / GBps.
constexpr double from_gbps(double gbps) { return 1.0 / gbps; }

const std::array<LinkPreset, 5> kPresets{{
    {"pcie3-x16",
     "PCIe 3.0 x16, AutoSwap's measured fit: D2H 0.0756 ns/B + 47.2 us, H2D 0.0823 ns/B + 9.7 us",
     {0.0756, SimTime{47200}},
     {0.0823, SimTime{9700}}},
    {"pcie4-x16",
     "PCIe 4.0 x16: the pcie3 fit at twice the bandwidth, same latencies",
     {0.0756 / 2, SimTime{47200}},
     {0.0823 / 2, SimTime{9700}}},
    {"pcie5-x16",
     "PCIe 5.0 x16: the pcie3 fit at four times the bandwidth, same latencies",
     {0.0756 / 4, SimTime{47200}},
     {0.0823 / 4, SimTime{9700}}},
    {"nvlink-c2c",
     "Grace-Hopper NVLink-C2C: 450 GB/s per direction, 2 us latency (assumed)",
     {from_gbps(450), SimTime{2000}},
     {from_gbps(450), SimTime{2000}}},
    // The fit of the copies of one AutoSwap replay on an H200 (coopsim replay-gpu --calibrate-link,
    // link_in_replay: 805 device-to-host and 735 host-to-device copies of ResNet-50 at 50 %,
    // 2026-11-28; docs/cuda-validation.md, run D). AutoSwap plans simulated with it replayed within
    // -0.3 to +3.4 % (16 of 16). Copies beside training run below the 55.3 / 55.5 GB/s of isolated
    // ones.
    {"h200",
     "NVIDIA H200's PCIe 5.0 x16 host link as copies run beside training (measured): D2H 51.1 GB/s + 8.6 us, "
     "H2D 54.2 GB/s + 5.6 us",
     {from_gbps(51.12), SimTime{8639}},
     {from_gbps(54.25), SimTime{5647}}},
}};
}  // namespace

std::span<const LinkPreset> link_presets() { return kPresets; }

std::vector<ParamDoc> link_param_docs() {
  std::vector<std::string> names;
  for (const auto& p : kPresets) names.push_back(p.name);
  return {
      {"preset", ParamType::String, "pcie4-x16", "link preset; the fields below override it", names},
      {"d2h_gbps", ParamType::Float, "0", "device-to-host bandwidth in GB/s (0 = preset's)", {}},
      {"h2d_gbps", ParamType::Float, "0", "host-to-device bandwidth in GB/s (0 = preset's)", {}},
      {"d2h_latency", ParamType::Time, "0", "device-to-host latency per transfer (when unset: the preset's)", {}},
      {"h2d_latency", ParamType::Time, "0", "host-to-device latency per transfer (when unset: the preset's)", {}},
      {"serial", ParamType::Bool, "true", "one transfer at a time per direction (false: unlimited overlap)", {}},
  };
}

LinkModel make_link(const Params& p) {
  const std::string preset = p.get_string("preset");
  LinkModel m;
  for (const auto& x : kPresets) {
    if (x.name == preset) {
      m.name = x.name;
      m.d2h = x.d2h;
      m.h2d = x.h2d;
    }
  }
  const double d2h = p.get_float("d2h_gbps"), h2d = p.get_float("h2d_gbps");
  if (d2h < 0 || h2d < 0) throw ConfigError("link", "bandwidths must be positive");
  // ns per byte is 1 / GB/s: it must be a finite number (NaN, infinity and bandwidths so small
  // that the reciprocal overflows are refused).
  for (const auto& [key, gbps] : {std::pair{"d2h_gbps", d2h}, std::pair{"h2d_gbps", h2d}}) {
    if (!std::isfinite(gbps) || (gbps > 0 && !std::isfinite(from_gbps(gbps))))
      throw ConfigError(std::string("link.") + key,
                        "must be a finite bandwidth in GB/s above 0 (0: the preset's), got " + fmt::format("{}", gbps));
  }
  if (d2h > 0) m.d2h.ns_per_byte = from_gbps(d2h);
  if (h2d > 0) m.h2d.ns_per_byte = from_gbps(h2d);
  if (p.is_set("d2h_latency")) m.d2h.latency = p.get_time("d2h_latency");
  if (p.is_set("h2d_latency")) m.h2d.latency = p.get_time("h2d_latency");
  m.serial = p.get_bool("serial");
  if (d2h > 0 || h2d > 0 || p.is_set("d2h_latency") || p.is_set("h2d_latency")) m.name += "+custom";
  return m;
}

}  // namespace coopsim
