// Step accesses, byte-range conflict history and happens-before for plans (plan_order.hpp).
#include "replay_plan_order.hpp"

#include <algorithm>

namespace coopsim::gpu::detail {

namespace {
Access arena(const PlanRef& r, bool write) { return Access{Space::Arena, r.offset, r.offset + r.size.value, write}; }
Access host(TensorId tensor, bool write) {
  return Access{Space::Host, index_of(tensor), std::uint64_t{index_of(tensor)} + 1, write};
}
}  // namespace

std::vector<Access> accesses_of(const PlanStep& s) {
  switch (s.kind) {
    case StepKind::Alloc: return {arena(s.block, true)};
    case StepKind::Free:
    case StepKind::Evict: return {};
    case StepKind::Access: return {arena(s.block, false)};
    case StepKind::Op:
    case StepKind::Recompute: {
      std::vector<Access> out;
      for (const auto& r : s.reads) out.push_back(arena(r, false));
      for (const auto& r : s.writes) out.push_back(arena(r, true));
      return out;
    }
    case StepKind::SwapOut: return {arena(s.block, false), host(s.block.tensor, true)};
    case StepKind::SwapIn: return {host(s.block.tensor, false), arena(s.block, true)};
  }
  return {};
}

void RangeHistory::split_at(std::uint64_t at) {
  auto it = segments_.upper_bound(at);
  if (it == segments_.begin()) return;
  --it;
  if (it->first == at || it->second.end <= at) return;
  Segment right = it->second;
  it->second.end = at;
  segments_.emplace(at, right);
}

void RangeHistory::conflicts(std::uint64_t lo, std::uint64_t hi, bool write, std::vector<StepId>& out) const {
  if (lo >= hi) return;
  auto it = segments_.upper_bound(lo);
  if (it != segments_.begin() && std::prev(it)->second.end > lo) --it;
  for (; it != segments_.end() && it->first < hi; ++it) {
    if (it->second.writer != kNoStep) out.push_back(it->second.writer);
    if (!write) continue;
    for (const StepId r : it->second.readers) {
      if (r != kNoStep) out.push_back(r);
    }
  }
}

void RangeHistory::record(std::uint64_t lo, std::uint64_t hi, bool write, StepId step, Stream stream) {
  if (lo >= hi) return;
  split_at(lo);
  split_at(hi);
  if (write) {
    segments_.erase(segments_.lower_bound(lo), segments_.lower_bound(hi));
    Segment s;
    s.end = hi;
    s.writer = step;
    segments_.emplace(lo, s);
    return;
  }
  // Reads: mark the covered segments and fill the gaps with reader-only segments.
  std::uint64_t at = lo;
  auto it = segments_.lower_bound(lo);
  while (at < hi) {
    if (it == segments_.end() || it->first > at) {
      Segment gap;
      gap.end = it == segments_.end() ? hi : std::min(hi, it->first);
      gap.readers[static_cast<std::size_t>(stream)] = step;
      it = std::next(segments_.emplace(at, gap).first);
      at = gap.end;
      continue;
    }
    it->second.readers[static_cast<std::size_t>(stream)] = step;
    at = it->second.end;
    ++it;
  }
}

StepOrder::Clock StepOrder::clock_for(Stream stream, const std::vector<StepId>& after) const {
  Clock c{};
  const StepId prev = last_[static_cast<std::size_t>(stream)];
  if (prev != kNoStep) c = clock_[index_of(prev)];
  for (const StepId a : after) {
    for (std::size_t k = 0; k < kStreams; ++k) c[k] = std::max(c[k], clock_[index_of(a)][k]);
  }
  return c;
}

void StepOrder::add(Stream stream, const std::vector<StepId>& after) {
  const auto s = static_cast<std::size_t>(stream);
  Clock c = clock_for(stream, after);
  const StepId id{size()};
  c[s] = count_[s] + 1;
  stream_.push_back(stream);
  position_.push_back(count_[s]);
  clock_.push_back(c);
  last_[s] = id;
  ++count_[s];
}

bool StepOrder::before(StepId earlier, StepId later) const {
  if (earlier >= later) return false;
  const std::uint32_t e = index_of(earlier);
  return clock_[index_of(later)][static_cast<std::size_t>(stream_[e])] > position_[e];
}

bool StepOrder::implied(Stream stream, const std::vector<StepId>& after, StepId earlier) const {
  const Clock c = clock_for(stream, after);
  const std::uint32_t e = index_of(earlier);
  return c[static_cast<std::size_t>(stream_[e])] > position_[e] || stream_[e] == stream;
}

}  // namespace coopsim::gpu::detail
