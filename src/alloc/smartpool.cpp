// `smartpool`: SINGA's SmartPool, lifetime-aware offline pool.
// Source: apache/singa PR #412 (never merged; refs/pull/412/head) @0f3722d3 :
// src/core/memory/memory.cc (SmartMemPool), include/singa/core/memory.h;
// docs/models/smartpool.md. Modelled rules:
//  * Blocks (PoolOptInfoToBlockLifeTime): each alloc of the planned iteration paired with the
//    next free of the same tensor in it: lifetime [r, d) in event order. An alloc without a free
//    inside the iteration is a cross-iteration block with d = end of the iteration. A free of a
//    tensor allocated earlier has no block.
//  * Order: size descending, ties by r ascending. Conflict: max(r_i, r_j) < min(d_i, d_j).
//  * Offsets (AssignColorToVertices): the ranges of placed conflicting blocks, sorted and merged
//    when touching or overlapping (prev.last + 2 > next.first); best fit "BF" (the default):
//    none -> local_offset; one range -> local_offset if it fits below, else on top of it;
//    >= 2 -> the smallest interior gap that fits (the first on ties), else on top; the gap below
//    the lowest range is not considered with >= 2 ranges (the quirk; bf_quirk=false considers
//    it, i.e. textbook best fit). First fit "FF": below the lowest range, else the first interior
//    gap, else on top. Pool size = max end.
//  * Plan(): cross-iteration blocks are placed alone from 0 (height X), the pool is doubled
//    (a primary copy in [0, X), a backup copy X above it), normal blocks are placed alone from
//    local_offset = 2X. Pool = 2X + normal height.
//  * Malloc: before the switch point every request is a cudaMalloc of the exact size. At the
//    switch, one cudaMalloc(pool). After it, a request with the planned size whose slot is free
//    gets the slot (a cross block whose primary is taken gets its backup); otherwise cudaMalloc.
//    Free: a pool block frees its slot; anything else is a cudaFree. The pool is kept to the end.
// Departures:
//  * Iteration detection (s.5.1: repeated-pattern search over the Malloc/Free log every 300
//    events) is replaced by the trace's `iteration` events, which coopsim traces carry.
//  * The planned iteration is a parameter (plan_iteration); the default is the second one when
//    the trace has >= 2 (SINGA also plans from a repetition, not from the first iteration: the
//    first one holds warm-up allocations, e.g. optimizer state created by the first step, so
//    its pattern is not the one that repeats), else the only one. Offline, the plan is known in
//    advance, so the switch point is the start of the planned iteration itself (SINGA switches
//    at the start of the next whole iteration after its detection ran).
//  * Matching (match=tensor, default): a request takes a slot planned for the same tensor id
//    (AllocRequest::tensor) and size. coopsim traces re-use a tensor's id in every iteration,
//    and the id still identifies the allocation when an eviction or recompute policy inserts
//    extra allocations; counting allocations, as SINGA does, shifts every later index by one
//    per extra allocation and then compares all the rest of the run against the wrong slots.
//    match=index keeps SINGA's rule: slot (n - first planned index) mod slots per iteration,
//    n counting successful allocations (SINGA counts Mallocs and Frees together, which names
//    the same slot in a repeating sequence).
//  * A slot is handed out only when its address range is free in the pool; SINGA checks only
//    the slot's own flag, so a drifting sequence could get overlapping memory. A normal slot
//    that is taken falls back to the device (SINGA returns a null pointer there).
//  * When the pool does not fit the capacity at the switch point, it is not created and every
//    later request falls back (SINGA does not check that cudaMalloc).
//  * Not reproduced: MergeColoredSegments stores merged ranges as int (wrong for pools over
//    2 GiB), and a placed block [0, 0] (1 byte at offset 0) is not seen as a neighbour.
//  * Sizes are exact, as in SINGA; device addresses are 512-aligned (DeviceMemory). No seeding.
#include "smartpool.hpp"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "coopsim/base/error.hpp"
#include "coopsim/alloc/registry.hpp"
#include "coopsim/model/trace.hpp"

namespace coopsim {

namespace {
constexpr std::uint32_t kNoSlot = 0xffffffffU;
}

std::vector<ParamDoc> SmartPoolAllocator::param_docs() {
  return {
      ParamDoc{"fit",
               ParamType::String,
               "bf",
               "placement of each block: bf = best fit (SINGA's default), ff = first fit",
               {"bf", "ff"}},
      ParamDoc{"bf_quirk",
               ParamType::Bool,
               "true",
               "bf: with >= 2 occupied ranges ignore the gap below the lowest one, as SINGA does; "
               "false = textbook best fit",
               {}},
      ParamDoc{"plan_iteration",
               ParamType::Int,
               "-1",
               "iteration planned and switched to the pool at; -1 = the second if the trace has "
               ">= 2 (the first holds warm-up allocations), else the first",
               {}},
      ParamDoc{"match",
               ParamType::String,
               "tensor",
               "how requests find their planned slot: tensor = same tensor id and size (robust to "
               "extra allocations by policies), index = SINGA's allocation index modulo the "
               "iteration's allocations, same size",
               {"tensor", "index"}},
  };
}

std::unique_ptr<Allocator> SmartPoolAllocator::create(const Params& p, Bytes capacity) {
  SmartPoolOptions o;
  o.fit = p.get_string("fit") == "ff" ? SmartPoolFit::FirstFit : SmartPoolFit::BestFit;
  o.bf_quirk = p.get_bool("bf_quirk");
  o.plan_iteration = p.get_int("plan_iteration");
  if (o.plan_iteration < -1) {
    throw ConfigError(p.component() + ".plan_iteration",
                      fmt::format("must be -1 (automatic) or an iteration index >= 0 (got {})", o.plan_iteration));
  }
  o.match = p.get_string("match") == "index" ? SmartPoolMatch::Index : SmartPoolMatch::Tensor;
  return std::make_unique<SmartPoolAllocator>(capacity, o);
}

SmartPoolAllocator::SmartPoolAllocator(Bytes capacity, SmartPoolOptions opts)
    : capacity_(capacity), opts_(opts), device_(capacity, kDeviceAlignment) {}

void SmartPoolAllocator::prepare(const Trace& trace) {
  if (prepared_ || allocations_ > 0 || !device_live_.empty()) {
    throw InvariantError("smartpool: prepare() must be called once, before any allocation");
  }
  prepared_ = true;
  SmartPoolPlan p = plan_smartpool(trace, opts_);
  if (p.slots.empty()) return;  // nothing to plan: pure device allocation
  const auto n = static_cast<std::uint32_t>(p.slots.size());
  first_slot_of_tensor_.assign(trace.tensors.size(), kNoSlot);
  next_slot_same_tensor_.assign(n, kNoSlot);
  for (std::uint32_t k = n; k-- > 0;) {  // chains in slot order
    next_slot_same_tensor_[k] = first_slot_of_tensor_[p.slots[k].tensor];
    first_slot_of_tensor_[p.slots[k].tensor] = k;
  }
  primary_live_.assign(n, 0);
  backup_live_.assign(n, 0);
  figures_.planned = true;
  figures_.pool_size = p.pool_size;
  figures_.cross_size = p.cross_size;
  plan_ = std::move(p);
}

std::uint64_t SmartPoolAllocator::slot_offset(std::uint32_t slot, bool backup) const {
  return plan_->slots[slot].offset + (backup ? plan_->cross_size.value : 0);
}

bool SmartPoolAllocator::pool_range_free(std::uint64_t offset, std::uint64_t size) const {
  auto next = pool_live_.lower_bound(offset);
  if (next != pool_live_.end() && next->first < offset + size) return false;
  return next == pool_live_.begin() || std::prev(next)->first + std::prev(next)->second.size <= offset;
}

std::optional<std::pair<std::uint32_t, bool>> SmartPoolAllocator::find_slot(const AllocRequest& request) const {
  auto usable = [&](std::uint32_t k) -> std::optional<std::pair<std::uint32_t, bool>> {
    const SmartPoolSlot& s = plan_->slots[k];
    if (s.size != request.size) return std::nullopt;
    if (!primary_live_[k] && pool_range_free(slot_offset(k, false), s.size.value)) {
      return std::make_pair(k, false);
    }
    if (s.cross_iteration && !backup_live_[k] && pool_range_free(slot_offset(k, true), s.size.value)) {
      return std::make_pair(k, true);
    }
    return std::nullopt;
  };
  if (opts_.match == SmartPoolMatch::Index) {
    const std::uint64_t n = plan_->slots.size();
    return usable(static_cast<std::uint32_t>((allocations_ - plan_->first_alloc) % n));
  }
  const std::uint32_t t = index_of(request.tensor);
  if (t >= first_slot_of_tensor_.size()) return std::nullopt;
  for (std::uint32_t k = first_slot_of_tensor_[t]; k != kNoSlot; k = next_slot_same_tensor_[k]) {
    if (auto found = usable(k)) return found;
  }
  return std::nullopt;
}

void SmartPoolAllocator::switch_to_pool() {
  switched_ = true;
  if (plan_->oversized) {
    figures_.pool_refused = true;
    return;
  }
  if (const auto addr = device_.malloc(plan_->pool_size)) {
    pool_addr_ = *addr;
    pool_segment_ = device_.mallocs() - 1;
    pool_free_ranges_ = 1;
    figures_.pool_created = true;
  } else {
    figures_.pool_refused = true;
  }
}

void SmartPoolAllocator::adjust_free_ranges(std::uint64_t begin, std::uint64_t end, bool inserting) {
  // The free gap around [begin, end) between its live neighbours (the range itself excluded).
  auto next = pool_live_.lower_bound(end);
  const std::uint64_t gap_end = next == pool_live_.end() ? plan_->pool_size.value : next->first;
  auto prev = pool_live_.lower_bound(begin);
  const std::uint64_t gap_begin =
      prev == pool_live_.begin() ? 0 : std::prev(prev)->first + std::prev(prev)->second.size;
  const std::uint64_t merged = gap_end > gap_begin ? 1 : 0;
  const std::uint64_t split = (begin > gap_begin ? 1 : 0) + (gap_end > end ? 1 : 0);
  if (inserting) {
    pool_free_ranges_ = pool_free_ranges_ - merged + split;
  } else {
    pool_free_ranges_ = pool_free_ranges_ - split + merged;
  }
}

Block SmartPoolAllocator::take_slot(std::uint32_t slot, bool backup, const AllocRequest& request) {
  const std::uint64_t offset = slot_offset(slot, backup);
  const std::uint64_t size = plan_->slots[slot].size.value;
  adjust_free_ranges(offset, offset + size, true);
  pool_live_.emplace(offset, PoolUse{size, slot, backup});
  (backup ? backup_live_ : primary_live_)[slot] = 1;
  pool_live_bytes_ += size;
  ++figures_.pool_allocs;
  return Block{*pool_addr_ + offset, Bytes{size}, request.size, request.stream};
}

std::optional<Block> SmartPoolAllocator::device_alloc(const AllocRequest& request) {
  const auto addr = device_.malloc(request.size);
  if (!addr) return std::nullopt;
  device_live_.emplace(*addr, DeviceUse{request.size.value, device_.mallocs() - 1});
  ++figures_.fallback_allocs;
  figures_.fallback_bytes += request.size;
  if (switched_) {
    ++figures_.mismatched_allocs;
    figures_.mismatched_bytes += request.size;
  }
  figures_.fallback_live += request.size;
  figures_.peak_fallback_live = std::max(figures_.peak_fallback_live, figures_.fallback_live);
  return Block{*addr, request.size, request.size, request.stream};
}

std::optional<Block> SmartPoolAllocator::allocate(const AllocRequest& request) {
  if (request.size.value == 0) throw InvariantError("smartpool: allocate of 0 bytes");
  if (plan_ && !switched_ && allocations_ >= plan_->first_alloc) switch_to_pool();
  std::optional<Block> b;
  if (pool_addr_) {
    if (const auto slot = find_slot(request)) b = take_slot(slot->first, slot->second, request);
  }
  if (!b) b = device_alloc(request);
  if (b) ++allocations_;
  return b;
}

void SmartPoolAllocator::deallocate(const Block& block) {
  if (pool_addr_ && block.addr >= *pool_addr_ && block.addr < *pool_addr_ + plan_->pool_size.value) {
    const std::uint64_t offset = block.addr - *pool_addr_;
    auto it = pool_live_.find(offset);
    if (it == pool_live_.end() || it->second.size != block.size.value || block.requested != block.size) {
      throw InvariantError(
          fmt::format("smartpool: deallocate of a block at pool offset {} ({} bytes) that is not live there", offset,
                      block.size.value));
    }
    const PoolUse use = it->second;
    pool_live_.erase(it);
    adjust_free_ranges(offset, offset + use.size, false);
    (use.backup ? backup_live_ : primary_live_)[use.slot] = 0;
    pool_live_bytes_ -= use.size;
    return;
  }
  auto it = device_live_.find(block.addr);
  if (it == device_live_.end() || it->second.size != block.size.value || block.requested != block.size) {
    throw InvariantError(
        fmt::format("smartpool: deallocate of unknown block at {:#x} ({} bytes)", block.addr, block.size.value));
  }
  device_.free(block.addr, block.size);
  figures_.fallback_live -= block.size;
  device_live_.erase(it);
}

AllocatorStats SmartPoolAllocator::stats() const {
  AllocatorStats s;
  s.capacity = capacity_;
  s.reserved = device_.used();
  s.allocated = Bytes{pool_live_bytes_} + figures_.fallback_live;
  s.requested = s.allocated;  // sizes are exact
  s.active = s.allocated;
  // The pool serves planned slots only and everything else is a new device allocation, so no
  // cached range can take an arbitrary request.
  s.largest_free = Bytes{0};
  s.footprint = s.reserved;
  s.free_ranges = pool_free_ranges_;
  s.segments = device_live_.size() + (pool_addr_ ? 1 : 0);
  s.device_mallocs = device_.mallocs();
  s.device_frees = device_.frees();
  return s;
}

std::vector<Range> SmartPoolAllocator::ranges() const {
  std::vector<Range> out;
  out.reserve(device_live_.size() + 2 * pool_live_.size() + 1);
  auto device_it = device_live_.begin();
  auto emit_devices_below = [&](std::uint64_t addr) {
    for (; device_it != device_live_.end() && device_it->first < addr; ++device_it) {
      out.push_back(Range{device_it->first, Bytes{device_it->second.size}, false, device_it->second.segment});
    }
  };
  if (pool_addr_) {
    emit_devices_below(*pool_addr_);
    std::uint64_t cursor = 0;
    for (const auto& [offset, use] : pool_live_) {
      if (offset > cursor) out.push_back(Range{*pool_addr_ + cursor, Bytes{offset - cursor}, true, pool_segment_});
      out.push_back(Range{*pool_addr_ + offset, Bytes{use.size}, false, pool_segment_});
      cursor = offset + use.size;
    }
    if (plan_->pool_size.value > cursor) {
      out.push_back(Range{*pool_addr_ + cursor, Bytes{plan_->pool_size.value - cursor}, true, pool_segment_});
    }
  }
  emit_devices_below(~std::uint64_t{0});
  return out;
}

void SmartPoolAllocator::check_invariants() const {
  auto fail = [](const std::string& what) { throw InvariantError("smartpool: " + what); };
  if (switched_ != (pool_addr_.has_value() || figures_.pool_refused)) fail("switch state and pool disagree");
  if (switched_ && !plan_) fail("switched to a pool without a plan");
  // Pool blocks: inside the pool, disjoint, each the live copy of its slot at its planned place.
  std::uint64_t bytes = 0, primaries = 0, backups = 0, free_ranges = 0, cursor = 0;
  for (const auto& [offset, use] : pool_live_) {
    if (!pool_addr_) fail("pool blocks without a pool");
    if (offset < cursor) fail(fmt::format("pool blocks overlap at offset {}", offset));
    if (offset > cursor) ++free_ranges;
    if (use.slot >= plan_->slots.size() || offset != slot_offset(use.slot, use.backup) ||
        use.size != plan_->slots[use.slot].size.value || offset + use.size > plan_->pool_size.value) {
      fail(fmt::format("pool block at offset {} ({} bytes) does not match slot {}", offset, use.size, use.slot));
    }
    if (use.backup && !plan_->slots[use.slot].cross_iteration) {
      fail(fmt::format("normal slot {} uses a backup copy", use.slot));
    }
    if (!(use.backup ? backup_live_ : primary_live_)[use.slot]) {
      fail(fmt::format("slot {} is live at offset {} but not marked", use.slot, offset));
    }
    (use.backup ? backups : primaries) += 1;
    bytes += use.size;
    cursor = offset + use.size;
  }
  if (pool_addr_ && plan_->pool_size.value > cursor) ++free_ranges;
  std::uint64_t marked_primaries = 0, marked_backups = 0;
  for (std::size_t k = 0; k < primary_live_.size(); ++k) {
    marked_primaries += primary_live_[k];
    marked_backups += backup_live_[k];
  }
  if (marked_primaries != primaries || marked_backups != backups) {
    fail(fmt::format("{} + {} slots marked live but {} + {} pool blocks", marked_primaries, marked_backups, primaries,
                     backups));
  }
  if (bytes != pool_live_bytes_) fail(fmt::format("pool live bytes {} != sum {}", pool_live_bytes_, bytes));
  if (free_ranges != pool_free_ranges_) {
    fail(fmt::format("free range count {} != {}", pool_free_ranges_, free_ranges));
  }
  // Device blocks: disjoint, apart from the pool, summing with it to the device's use.
  std::uint64_t device_bytes = 0, end = 0;
  for (const auto& [addr, use] : device_live_) {
    if (addr < end) fail(fmt::format("device blocks overlap at {:#x}", addr));
    if (pool_addr_ && addr < *pool_addr_ + plan_->pool_size.value && *pool_addr_ < addr + use.size) {
      fail(fmt::format("device block at {:#x} overlaps the pool", addr));
    }
    device_bytes += use.size;
    end = addr + use.size;
  }
  if (device_bytes != figures_.fallback_live.value) {
    fail(fmt::format("fallback live bytes {} != sum {}", figures_.fallback_live.value, device_bytes));
  }
  const std::uint64_t pool = pool_addr_ ? plan_->pool_size.value : 0;
  if (device_.used().value != pool + device_bytes) {
    fail(fmt::format("the device holds {} B, pool {} + fallback {}", device_.used().value, pool, device_bytes));
  }
  if (device_.used() > capacity_) fail("the device holds more than the capacity");
  if (figures_.peak_fallback_live < figures_.fallback_live) fail("peak fallback below the current");
}

// Its line in the registry (src/alloc/registry.cpp).
AllocatorRegistry::Entry smartpool_allocator_entry() { return AllocatorRegistry::entry_for<SmartPoolAllocator>(); }

}  // namespace coopsim
