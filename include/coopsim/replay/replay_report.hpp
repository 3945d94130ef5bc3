// The report of a replay-gpu run (gpu-report.json) and the measured link as a config file.
// Plain C++ (nlohmann::json), kept out of replay.hpp so that nvcc never compiles JSON code.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "coopsim/replay/replay.hpp"

namespace coopsim::gpu {

// A config file holding a "description" and a "link" section (include/coopsim/model/link.hpp keys)
// with the fitted bandwidths and latencies: `coopsim run -c FILE` simulates with the measured link.
// `source` says which copies were fitted (the description names it).
nlohmann::ordered_json link_preset_json(const LinkFit& d2h, const LinkFit& h2d, const std::string& device_name,
                                        const std::string& source = "isolated copies");

// The gpu-report.json document (docs/cuda-validation.md describes its keys).
nlohmann::ordered_json replay_report_json(const Plan& plan, const std::string& plan_path, const DeviceInfo& device,
                                          const ReplaySettings& settings, const ReplayMeasurement& m,
                                          const LinkFit& d2h, const LinkFit& h2d);

}  // namespace coopsim::gpu
