// `import dtr --compat simrd`: what the simrd profile's simulation needs beyond trace v1. Zero-byte
// storages are left out of ops and events in v1 (docs/import-dtr.md, Decisions), but simrd keeps
// them: they sit in its storage pool, are evicted at release, recomputed as parents and counted
// in neighbourhood costs. Under the profile the importer records them in the header key
// `simrd` (read by src/engine/simrd/runtime.cpp):
//   ops:   {"<op index>": {"inputs": [tensor...], "outputs": [tensor...]}} for every op that lost
//          a zero-byte tensor: its full ARGS / RESULT lists (tensor indices)
//   roots: [[tensor, storage root], ...] for views of zero-byte storages (v1 keeps them unlinked)
//   frees: [[event index, storage root], ...] zero-byte storages dying before that event
//   outputs: tensors still referenced at the end, one per name in first-definition order (simrd
//          rematerializes and pins them in that order: parse.py OutputCondition.REMATERIALIZE)
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace coopsim::dtr_detail {

class SimrdExtra {
 public:
  void note_op(std::uint32_t op, const std::vector<std::uint32_t>& inputs, const std::vector<std::uint32_t>& outputs) {
    ops_[std::to_string(op)] = {{"inputs", inputs}, {"outputs", outputs}};
  }
  void note_root(std::uint32_t tensor, std::uint32_t root) { roots_.push_back({tensor, root}); }
  // `body_position`: index in the iteration's events of the next event (made absolute by json()).
  void note_free(std::size_t body_position, std::uint32_t root) { frees_.push_back({body_position, root}); }
  [[nodiscard]] nlohmann::json json(std::size_t body_offset, const std::vector<std::uint32_t>& outputs) const {
    nlohmann::json frees = nlohmann::json::array();
    for (const auto& f : frees_) frees.push_back({f[0] + body_offset, f[1]});
    return {{"ops", ops_}, {"roots", roots_}, {"frees", frees}, {"outputs", outputs}};
  }

 private:
  nlohmann::json ops_ = nlohmann::json::object();
  std::vector<std::vector<std::uint64_t>> roots_, frees_;
};

}  // namespace coopsim::dtr_detail
