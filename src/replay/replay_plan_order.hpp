// Private to src/replay: what each plan step reads and writes (arena byte ranges and host copies),
// the byte-range access history that turns those into conflicts (read-after-write,
// write-after-read, write-after-write), and the happens-before order that stream order plus
// `after` lists define. The plan export derives `after` lists from these; the plan checker
// verifies that a plan's `after` lists order every conflict.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include "coopsim/replay/replay_plan.hpp"

namespace coopsim::gpu::detail {

// Host copies are addressed by tensor id: tensor t's copy is the range [index_of(t), index_of(t) + 1).
enum class Space : std::uint8_t { Arena, Host };

struct Access {
  Space space = Space::Arena;
  std::uint64_t lo = 0, hi = 0;
  bool write = false;
};

// alloc writes its block (the replay may fill it); free and evict touch nothing; op, recompute
// and access read and write their refs; swap_out reads the block and writes the host copy;
// swap_in reads the host copy and writes the block.
std::vector<Access> accesses_of(const PlanStep& step);

// Last writer and the last reader on each stream since that write, per byte range.
class RangeHistory {
 public:
  // Appends the steps whose recorded accesses conflict with this one to `out` (unsorted, may
  // repeat): the writers of [lo, hi), and for a write also the readers.
  void conflicts(std::uint64_t lo, std::uint64_t hi, bool write, std::vector<StepId>& out) const;
  void record(std::uint64_t lo, std::uint64_t hi, bool write, StepId step, Stream stream);

 private:
  struct Segment {
    std::uint64_t end = 0;
    StepId writer = kNoStep;
    std::array<StepId, kStreams> readers{kNoStep, kNoStep, kNoStep};
  };
  void split_at(std::uint64_t at);
  std::map<std::uint64_t, Segment> segments_;  // disjoint, keyed by start
};

// Happens-before over steps added in id order: a step follows every earlier step of its own
// stream and, transitively, the steps in its `after` list (vector clocks over the 3 streams).
class StepOrder {
 public:
  void add(Stream stream, const std::vector<StepId>& after);
  [[nodiscard]] bool before(StepId earlier, StepId later) const;
  [[nodiscard]] std::uint32_t size() const { return static_cast<std::uint32_t>(stream_.size()); }
  // Whether a step on `stream` added next with `after` would already follow `earlier`.
  [[nodiscard]] bool implied(Stream stream, const std::vector<StepId>& after, StepId earlier) const;

 private:
  using Clock = std::array<std::uint32_t, kStreams>;  // steps of each stream known complete
  [[nodiscard]] Clock clock_for(Stream stream, const std::vector<StepId>& after) const;
  std::vector<Stream> stream_;           // by step
  std::vector<std::uint32_t> position_;  // by step: index within its stream
  std::vector<Clock> clock_;             // by step
  std::array<StepId, kStreams> last_{kNoStep, kNoStep, kNoStep};
  std::array<std::uint32_t, kStreams> count_{};
};

}  // namespace coopsim::gpu::detail
