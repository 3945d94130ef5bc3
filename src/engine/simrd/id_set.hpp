// Private to src/engine/simrd/: a set of 32-bit ids for membership tests, hashed with open
// addressing (linear probing, at most half full). Only insert, lookup and clear: a region's
// interior grows by absorbs and is emptied by rebuilds, never shrinks one id at a time.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

namespace coopsim::simrd::detail {

class IdSet {
 public:
  // true when `id` was absent (it is now present).
  bool insert(std::uint32_t id) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    std::uint32_t& slot = *probe(id);
    if (slot == id) return false;
    slot = id;
    ++size_;
    return true;
  }
  [[nodiscard]] bool contains(std::uint32_t id) const {
    return !slots_.empty() && *const_cast<IdSet*>(this)->probe(id) == id;  // NOLINT: probe changes nothing
  }
  void clear() {
    if (size_ == 0) return;
    std::fill(slots_.begin(), slots_.end(), kEmpty);
    size_ = 0;
  }

 private:
  static constexpr std::uint32_t kEmpty = 0xffffffffU;  // never an id (ids index vectors)

  // The slot holding `id`, or the empty slot where it would go. Fibonacci hashing: the product's
  // high bits depend on all of the id's bits.
  std::uint32_t* probe(std::uint32_t id) {
    for (std::size_t i = static_cast<std::size_t>((id * 0x9e3779b97f4a7c15ULL) >> shift_);; i = (i + 1) & mask_) {
      if (slots_[i] == id || slots_[i] == kEmpty) return &slots_[i];
    }
  }
  void grow() {
    std::vector<std::uint32_t> old(std::max<std::size_t>(16, slots_.size() * 2), kEmpty);
    old.swap(slots_);
    mask_ = slots_.size() - 1;
    shift_ = 64 - std::countr_zero(slots_.size());
    size_ = 0;
    for (std::uint32_t id : old) {
      if (id != kEmpty) insert(id);
    }
  }

  std::vector<std::uint32_t> slots_;
  std::size_t mask_ = 0;
  int shift_ = 64;  // 64 - log2(slot count)
  std::size_t size_ = 0;
};

}  // namespace coopsim::simrd::detail
