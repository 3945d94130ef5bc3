// The simrd profile's memory and storage pool (include/coopsim/engine/simrd.hpp): the budget
// check, eviction until an op fits, locks and the pool order (runtime/v2.py RuntimeV2._free,
// _lock, _unlock, _make_evictable, _make_unevictable, _evict at uwsampl/dtr-prototype@eff53cc4
// simrd/simrd/; rules R5-R7 in runtime.cpp).
#include <algorithm>
#include <stdexcept>

#include "detail.hpp"

namespace coopsim::simrd::detail {

bool State::fits(std::int64_t size) const {
  // Compared without forming memory_ + size (65 536 outputs of 2^53 bytes pass 2^63); budgets
  // of 2^63 bytes or more count as 2^63 - 1, more than any op's outputs can take here.
  const std::int64_t budget = static_cast<std::int64_t>(std::min<std::uint64_t>(config_.budget.value, kMaxBytes));
  return memory_ <= budget && size <= budget - memory_;
}

void State::free_until(std::int64_t size) {
  while (!fits(size)) {
    if (pool_head_ == kNone) {
      requested_ = size;
      throw RunStop{Outcome::OutOfMemory};  // R7
    }
    evict(choose());
    ++result_.evictions;
  }
}

void State::lock(std::uint32_t s) {
  if (storages_[s].locks == 0) make_unevictable(s);
  ++storages_[s].locks;
}

void State::unlock(std::uint32_t s) {
  if (storages_[s].locks == 0) throw std::logic_error("simrd profile: unlock of an unlocked storage");
  if (--storages_[s].locks == 0) make_evictable(s);
}

void State::make_evictable(std::uint32_t s) {
  SStorage& st = storages_[s];
  if (st.pooled) return;
  st.pool_prev = pool_tail_;
  st.pool_next = kNone;
  (pool_tail_ == kNone ? pool_head_ : storages_[pool_tail_].pool_next) = s;
  pool_tail_ = s;
  st.pooled = true;
}

void State::make_unevictable(std::uint32_t s) {
  SStorage& st = storages_[s];
  if (!st.pooled) return;
  (st.pool_prev == kNone ? pool_head_ : storages_[st.pool_prev].pool_next) = st.pool_next;
  (st.pool_next == kNone ? pool_tail_ : storages_[st.pool_next].pool_prev) = st.pool_prev;
  st.pool_prev = st.pool_next = kNone;
  st.pooled = false;
}

void State::evict(std::uint32_t s) {
  flush_rebuilds();  // requested while s was material
  SStorage& st = storages_[s];
  material_[s] = kEvicted;
  memory_ -= st.size;
  make_unevictable(s);
  for (std::uint32_t t : st.tensors) tensors_[t].defined = false;  // views are destroyed too
  after_evict(s);
}

}  // namespace coopsim::simrd::detail
