// autoswap: AutoSwap's offline swap planner (Zhang et al., "AutoSwap: Automatic Memory Swapping
// for Deep Learning", 2019; apache/singa PR #412 @8e8a7e15 src/core/device/swap_gpu.cc
// SwapGPU::Plan/SelectBlock/Scheduling; docs/models/swap-policies.md). Per iteration of the trace:
// candidates are the idle gaps of blocks >= smallest_block between two consecutive uses that
// straddle the iteration's load peak; they are ranked by a priority score (DOA_origin, DOA, AOA,
// WDOA or the majority vote of DOA_origin/AOA/WDOA ranks, AutoSwap's default) and taken
// greedily, each lowering the load curve over [ready, next use), until the peak is under the
// budget. Swap-outs start at the ready index (use + 4 events after a read, + 6 after a write);
// swap-ins are scheduled backwards from the next use on one serial H2D lane with the linear
// PCIe fit (the `link` preset; default pcie3-x16 = AutoSwap's measured constants), no
// earlier than just after the peak. When an allocation fails anyway, the resident, unpinned
// tensor whose next use is furthest away (Belady) is swapped out.
// Departures: iterations come from the trace's iteration events (no
// SINGA iteration detection) and each is planned on its own; indices count every trace event;
// DOA subtracts swap-out + swap-in time (SINGA's code subtracts the swap-out time twice); WDOA is
// the intended sum of (load - limit) over the gap (SINGA's is broken); the limit is the budget
// (SINGA hard-codes 550 MiB); the engine's copy streams and an allocated-bytes room check
// replace the "stick-to-limit" over-limit delays.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "coopsim/policy/policy.hpp"
#include "scheduled_swap.hpp"

namespace coopsim {

enum class SwapScore : std::uint8_t { DoaOrigin, Doa, Aoa, Wdoa, MajorityVote };

struct AutoSwapOptions {
  SwapScore score = SwapScore::MajorityVote;
  Bytes smallest_block{1U << 20};
  std::uint32_t read_buffer = 4;   // SwapGPU::data_buffer
  std::uint32_t write_buffer = 6;  // SwapGPU::mutable_data_buffer
  double limit_ratio = 1.0;        // memory-load target = ratio x budget
  std::string link = "pcie3-x16";
  bool fallback = true;
};

class AutoSwapPolicy final : public ScheduledSwapPolicy {
 public:
  static constexpr std::string_view kName = "autoswap";
  static constexpr std::string_view kHelp =
      "AutoSwap: offline plan of swap-outs over idle gaps across the load peak, ranked by "
      "priority score (majority vote by default), linear PCIe timing; Belady fallback";
  static std::vector<ParamDoc> param_docs();
  static std::unique_ptr<Policy> create(const Params& p);

  explicit AutoSwapPolicy(AutoSwapOptions o);
  ~AutoSwapPolicy() override;

  void prepare(const MemoryView& view) override;

 private:
  AutoSwapOptions opts_;
};

}  // namespace coopsim
