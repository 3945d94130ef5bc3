// Private to src/engine/simrd/: sets of 32-bit ids as bitmaps in pages of 512 ids (one cache
// line), drawn from a pool the sets share. A region's interior is such a set: ids near each other
// (storages made by neighbouring ops) share a page, a membership test is two loads, and emptying a
// set gives its pages back, zeroed, in time proportional to their number. Memory is at most one
// page per id held, over the sets alive at once (regions of evicted storages are emptied).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace coopsim::simrd::detail {

// The first position of `id` in [first, last), or last: std::find, eight ids a step with SSE2
// where there is SSE2 (every x86-64), for the long frontiers of hubs.
inline const std::uint32_t* find_id(const std::uint32_t* first, const std::uint32_t* last, std::uint32_t id) {
#if defined(__SSE2__)
  const __m128i wanted = _mm_set1_epi32(static_cast<int>(id));
  while (last - first >= 8) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(first));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(first + 4));
    const __m128i hits = _mm_or_si128(_mm_cmpeq_epi32(a, wanted), _mm_cmpeq_epi32(b, wanted));
    if (_mm_movemask_epi8(hits) != 0) break;
    first += 8;
  }
#endif
  while (first != last && *first != id) ++first;
  return first;
}

class BitPages {
 public:
  static constexpr std::uint32_t kWords = 8;  // 512 bits

  // A zeroed page.
  std::uint32_t acquire() {
    if (!free_.empty()) {
      const std::uint32_t p = free_.back();
      free_.pop_back();
      return p;
    }
    const auto p = static_cast<std::uint32_t>(words_.size() / kWords);
    words_.resize(words_.size() + kWords, 0);
    return p;
  }
  void release(std::uint32_t page) {
    std::fill_n(words(page), kWords, 0);
    free_.push_back(page);
  }
  std::uint64_t* words(std::uint32_t page) { return words_.data() + static_cast<std::size_t>(page) * kWords; }
  [[nodiscard]] const std::uint64_t* words(std::uint32_t page) const {
    return words_.data() + static_cast<std::size_t>(page) * kWords;
  }

 private:
  std::vector<std::uint64_t> words_;
  std::vector<std::uint32_t> free_;
};

class PagedIdSet {
 public:
  // true when `id` was absent (it is now present).
  [[gnu::always_inline]] bool insert(std::uint32_t id, BitPages& pool) {
    const std::uint32_t slot = id >> 9;
    if (slot >= table_.size() || table_[slot] == kNoPage) [[unlikely]]
      add_page(slot, pool);
    std::uint64_t& word = pool.words(table_[slot])[(id >> 6) & (BitPages::kWords - 1)];
    const std::uint64_t bit = std::uint64_t{1} << (id & 63);
    if ((word & bit) != 0) return false;
    word |= bit;
    return true;
  }
  // Adds every id of `ids`. Neighbouring ids share a page, so the page is looked up again only
  // when an id's page differs from the one before.
  void insert_many(const std::vector<std::uint32_t>& ids, BitPages& pool) {
    std::uint32_t last_slot = kNoPage;
    std::uint64_t* page = nullptr;
    for (const std::uint32_t id : ids) {
      const std::uint32_t slot = id >> 9;
      if (slot != last_slot) {
        if (slot >= table_.size() || table_[slot] == kNoPage) add_page(slot, pool);
        page = pool.words(table_[slot]);  // after add_page, which may move the pool
        last_slot = slot;
      }
      page[(id >> 6) & (BitPages::kWords - 1)] |= std::uint64_t{1} << (id & 63);
    }
  }
  [[nodiscard]] bool contains(std::uint32_t id, const BitPages& pool) const {
    const std::uint32_t slot = id >> 9;
    if (slot >= table_.size() || table_[slot] == kNoPage) return false;
    return (pool.words(table_[slot])[(id >> 6) & (BitPages::kWords - 1)] >> (id & 63) & 1) != 0;
  }
  // Adds every id of `other` (whose pages are in the same pool) and calls new_id(id) for each one
  // that was absent, page by page: a word at a time for ids both sets hold.
  template <class F>
  void insert_all(const PagedIdSet& other, BitPages& pool, F&& new_id) {
    for (std::uint32_t slot : other.used_) {
      if (slot >= table_.size() || table_[slot] == kNoPage) add_page(slot, pool);
      // add_page may grow the pool: both pages are looked up after it.
      const std::uint64_t* from = pool.words(other.table_[slot]);
      std::uint64_t* to = pool.words(table_[slot]);
      for (std::uint32_t w = 0; w < BitPages::kWords; ++w) {
        std::uint64_t fresh = from[w] & ~to[w];
        to[w] |= fresh;
        while (fresh != 0) {
          new_id(slot * 512 + w * 64 + static_cast<std::uint32_t>(std::countr_zero(fresh)));
          fresh &= fresh - 1;
        }
      }
    }
  }
  void clear(BitPages& pool) {
    for (std::uint32_t slot : used_) {
      pool.release(table_[slot]);
      table_[slot] = kNoPage;
    }
    used_.clear();
  }

 private:
  static constexpr std::uint32_t kNoPage = 0xffffffffU;

  [[gnu::noinline]] void add_page(std::uint32_t slot, BitPages& pool) {
    if (slot >= table_.size()) table_.resize(slot + 1, kNoPage);
    table_[slot] = pool.acquire();
    used_.push_back(slot);
  }
  std::vector<std::uint32_t> table_;  // id / 512 -> page in the pool, or kNoPage
  std::vector<std::uint32_t> used_;   // the slots of table_ holding a page
};

}  // namespace coopsim::simrd::detail
