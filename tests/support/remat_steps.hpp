// Shared by the recompute-policy tests: engine options with every self-check on, and the coop and
// dtr policies made from JSON parameters through their registry parameter docs.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>

#include "coopsim/engine/engine.hpp"
#include "coopsim/policy/dtr.hpp"
#include "policy/coop.hpp"

namespace coopsim::test {

inline EngineOptions checked_options(std::uint64_t budget) {
  EngineOptions o;
  o.budget = Bytes{budget};
  o.link.name = "test";
  o.paranoid = true;
  o.residency_checks = true;
  return o;
}

inline std::unique_ptr<Policy> dtr_policy(const nlohmann::json& params) {
  return DtrPolicy::create(Params("dtr", params, DtrPolicy::param_docs()));
}

inline std::unique_ptr<Policy> coop_policy(const nlohmann::json& params) {
  return CoopPolicy::create(Params("coop", params, CoopPolicy::param_docs()));
}

}  // namespace coopsim::test
