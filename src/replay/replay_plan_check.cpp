// Plan checker: replays a plan's steps over a model of the arena (live blocks with their
// owner and content version) and of the host copies, and over the happens-before order of its
// streams, and rejects the first step that would be wrong on a device: an access to an absent
// tensor or a wrong content version, a block outside the arena or overlapping a live one, live
// bytes over the budget, a free that matches no allocation, a swap-in with no swap-out of that
// version before it, or two conflicting accesses on different streams that nothing orders.
#include <fmt/format.h>

#include <limits>
#include <map>
#include <optional>

#include "coopsim/replay/replay_plan.hpp"
#include "coopsim/base/text.hpp"
#include "replay_plan_order.hpp"

namespace coopsim::gpu {

namespace {

struct Block {
  TensorId tensor{0};
  Bytes size;
  std::optional<std::uint32_t> content;  // version held, or none
  StepId placed{0};                      // alloc step
  StepId emptied = kNoStep;              // step that left it without content (evict), if any
  StepId swapped_out = kNoStep;          // last swap-out of its content
};

// Why a tensor is not on the device: the step that took it off.
struct Exit {
  StepId step = kNoStep;
  bool swapped_out = false;
};

class Checker {
 public:
  Checker(const Plan& plan, const std::string& file) : plan_(plan), file_(file) {}

  void run() {
    for (std::uint32_t i = 0; i < plan_.steps.size(); ++i) {
      id_ = StepId{i};
      const PlanStep& s = plan_.step(id_);
      check_contents(s);
      check_order(s);
    }
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const {
    throw PlanError(file_, describe_step(plan_, id_), problem);
  }
  std::string tensor_name(TensorId t) const {
    const PlanTensor* x = plan_.tensor(t);
    return x == nullptr || x->name.empty() ? fmt::format("tensor {}", index_of(t))
                                           : fmt::format("tensor {} '{}'", index_of(t), one_line(x->name));
  }
  // The end is written as a sum when it passes 2^64 - 1 (a block outside any arena), not wrapped.
  static std::string range(const PlanRef& r) {
    if (r.offset > std::numeric_limits<std::uint64_t>::max() - r.size.value)
      return fmt::format("[{}, {} + {})", r.offset, r.offset, r.size.value);
    return fmt::format("[{}, {})", r.offset, r.offset + r.size.value);
  }

  // The live block `r` names: it must exist, belong to r.tensor and have r.size.
  Block& block_of(const PlanRef& r, std::string_view verb) {
    auto it = live_.find(r.offset);
    if (it == live_.end()) {
      std::string why;
      if (auto e = exits_.find(r.tensor); e != exits_.end()) {
        why = e->second.swapped_out
                  ? fmt::format(": it was swapped out at steps[{}] and not swapped in since", index_of(e->second.step))
                  : fmt::format(": it was freed at steps[{}]", index_of(e->second.step));
      }
      fail(fmt::format("{} {} at offset {}, but no block is allocated there{}", verb, tensor_name(r.tensor), r.offset,
                       why));
    }
    Block& b = it->second;
    if (b.tensor != r.tensor) {
      fail(fmt::format("{} {} at offset {}, but the block there belongs to {} (allocated at steps[{}])", verb,
                       tensor_name(r.tensor), r.offset, tensor_name(b.tensor), index_of(b.placed)));
    }
    if (b.size != r.size) {
      fail(fmt::format("{} {} at offset {} as {} bytes, but its block has {} bytes", verb, tensor_name(r.tensor),
                       r.offset, r.size.value, b.size.value));
    }
    return b;
  }

  void expect_content(const PlanRef& r, std::string_view verb) {
    const Block& b = block_of(r, verb);
    if (b.content == r.version) return;
    const std::string what =
        fmt::format("{} {} version {} at offset {}", verb, tensor_name(r.tensor), r.version, r.offset);
    if (b.content) fail(fmt::format("{}, but the block holds version {}", what, *b.content));
    if (b.emptied != kNoStep) fail(fmt::format("{}, but it was evicted at steps[{}]", what, index_of(b.emptied)));
    fail(fmt::format("{}, but the block holds nothing yet (allocated at steps[{}] and not written since)", what,
                     index_of(b.placed)));
  }

  void allocate(const PlanStep& s) {
    const PlanRef& r = s.block;
    if (r.offset > plan_.header.arena_size.value || r.size.value > plan_.header.arena_size.value - r.offset) {
      fail(fmt::format("block {} is outside the arena of {} bytes", range(r), plan_.header.arena_size.value));
    }
    auto next = live_.lower_bound(r.offset);
    if (next != live_.end() && next->first < r.offset + r.size.value) overlap(r, next->first, next->second);
    if (next != live_.begin()) {
      const auto prev = std::prev(next);
      if (prev->first + prev->second.size.value > r.offset) overlap(r, prev->first, prev->second);
    }
    if (live_bytes_ + r.size.value > plan_.header.budget.value) {
      fail(fmt::format("live blocks would hold {} bytes, over the budget of {}", live_bytes_ + r.size.value,
                       plan_.header.budget.value));
    }
    live_bytes_ += r.size.value;
    Block b;
    b.tensor = r.tensor;
    b.size = r.size;
    if (s.fill) b.content = 0;
    b.placed = id_;
    live_.emplace(r.offset, b);
  }
  [[noreturn]] void overlap(const PlanRef& r, std::uint64_t at, const Block& other) const {
    fail(fmt::format("block {} of {} overlaps the live block [{}, {}) of {} (allocated at steps[{}])", range(r),
                     tensor_name(r.tensor), at, at + other.size.value, tensor_name(other.tensor),
                     index_of(other.placed)));
  }

  void check_contents(const PlanStep& s) {
    switch (s.kind) {
      case StepKind::Alloc: allocate(s); return;
      case StepKind::Free: {
        const Block& b = block_of(s.block, "frees");
        exits_[s.block.tensor] = b.swapped_out != kNoStep && !b.content ? Exit{b.swapped_out, true} : Exit{id_, false};
        live_bytes_ -= b.size.value;
        live_.erase(s.block.offset);
        return;
      }
      case StepKind::Evict: {
        expect_content(s.block, "evicts");
        Block& b = block_of(s.block, "evicts");
        b.content.reset();
        b.emptied = id_;
        return;
      }
      case StepKind::Access: expect_content(s.block, "accesses"); return;
      case StepKind::Op:
      case StepKind::Recompute:
        for (const auto& r : s.reads) expect_content(r, "reads");
        for (const auto& r : s.writes) {
          Block& b = block_of(r, "writes");
          b.content = r.version;
          b.emptied = kNoStep;
          b.swapped_out = kNoStep;
        }
        return;
      case StepKind::SwapOut: {
        expect_content(s.block, "swaps out");
        Block& b = block_of(s.block, "swaps out");
        host_[s.block.tensor] = s.block.version;
        b.swapped_out = id_;
        b.content.reset();  // the block is freed next: its content no longer counts
        return;
      }
      case StepKind::SwapIn: {
        Block& b = block_of(s.block, "swaps in");
        const auto h = host_.find(s.block.tensor);
        if (h == host_.end()) {
          fail(fmt::format("swaps in {} version {}, but no swap-out of it precedes this step",
                           tensor_name(s.block.tensor), s.block.version));
        }
        if (h->second != s.block.version) {
          fail(fmt::format("swaps in {} version {}, but the host copy holds version {}", tensor_name(s.block.tensor),
                           s.block.version, h->second));
        }
        b.content = s.block.version;
        b.emptied = kNoStep;
        exits_.erase(s.block.tensor);
        return;
      }
    }
  }

  void check_order(const PlanStep& s) {
    order_.add(s.stream, s.after);
    const auto accesses = detail::accesses_of(s);
    for (const auto& a : accesses) {
      auto& history = a.space == detail::Space::Arena ? arena_ : host_history_;
      conflicts_.clear();
      history.conflicts(a.lo, a.hi, a.write, conflicts_);
      for (const StepId c : conflicts_) {
        if (c == id_ || order_.before(c, id_)) continue;
        const std::string what = a.space == detail::Space::Arena
                                     ? fmt::format("arena bytes [{}, {})", a.lo, a.hi)
                                     : "the host copy of " + tensor_name(TensorId{static_cast<std::uint32_t>(a.lo)});
        fail(fmt::format(
            "{} {} that {} on stream {} also uses, but nothing orders this step after it (it needs {} "
            "in its after list)",
            a.write ? "writes" : "reads", what, describe_step(plan_, c), to_string(plan_.step(c).stream), index_of(c)));
      }
    }
    for (const auto& a : accesses) {
      (a.space == detail::Space::Arena ? arena_ : host_history_).record(a.lo, a.hi, a.write, id_, s.stream);
    }
  }

  const Plan& plan_;
  const std::string& file_;
  StepId id_{0};
  std::map<std::uint64_t, Block> live_;  // by offset
  std::uint64_t live_bytes_ = 0;
  std::map<TensorId, std::uint32_t> host_;  // tensor -> version of its host copy
  std::map<TensorId, Exit> exits_;
  detail::RangeHistory arena_, host_history_;
  detail::StepOrder order_;
  std::vector<StepId> conflicts_;
};

}  // namespace

void check_plan(const Plan& plan, const std::string& file) { Checker(plan, file).run(); }

}  // namespace coopsim::gpu
