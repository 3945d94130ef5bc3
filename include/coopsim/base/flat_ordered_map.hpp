// An ordered map from unique 64-bit keys to small values, stored as a list of sorted blocks of
// at most kBlock entries (a one-level B+-tree). Insert and erase cost a binary search and a
// move of at most kBlock entries; an in-order walk reads contiguous memory, which is what the
// eviction searches do thousands of times per run (a std::map walk chases a pointer per entry).
//
// Optionally each block carries a summary S of the entries inserted into it (S::absorb(const S&)
// combines two; S{} is the summary of nothing): a search can then tell from the summary alone that
// no entry of a block can matter to it and skip the block. A summary only ever grows by absorbing:
// an erased entry stays in its block's summary, so a summary describes a superset of the block
// (what a bound needs) until a walker that has read the whole block replaces it (refine()).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace coopsim {

// The default: no summary kept.
struct NoBlockSummary {
  void absorb(const NoBlockSummary& /*other*/) {}
};

template <class V, class S = NoBlockSummary>
class FlatOrderedMap {
 public:
  struct Entry {
    std::uint64_t key;
    V value;
  };

  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] bool empty() const { return size_ == 0; }

  // Returns false (and changes nothing) when `key` is already present. `summary` describes the
  // new entry; its block's summary absorbs it.
  bool insert(std::uint64_t key, V value, const S& summary = S{}) {
    if (blocks_.empty()) {
      blocks_.emplace_back().push_back(Entry{key, value});
      firsts_.push_back(key);
      if constexpr (kSummaries) summaries_.push_back(summary);
      size_ = 1;
      return true;
    }
    const std::size_t b = block_of(key);
    std::vector<Entry>& blk = blocks_[b];
    auto it = std::lower_bound(blk.begin(), blk.end(), key, [](const Entry& e, std::uint64_t k) { return e.key < k; });
    if (it != blk.end() && it->key == key) return false;
    blk.insert(it, Entry{key, value});
    firsts_[b] = blk.front().key;
    if constexpr (kSummaries) summaries_[b].absorb(summary);
    ++size_;
    if (blk.size() > kBlock) split(b);
    return true;
  }

  // Returns false when `key` is absent.
  bool erase(std::uint64_t key) {
    if (blocks_.empty()) return false;
    const std::size_t b = block_of(key);
    std::vector<Entry>& blk = blocks_[b];
    auto it = std::lower_bound(blk.begin(), blk.end(), key, [](const Entry& e, std::uint64_t k) { return e.key < k; });
    if (it == blk.end() || it->key != key) return false;
    blk.erase(it);
    --size_;
    if (blk.empty()) {
      blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(b));
      firsts_.erase(firsts_.begin() + static_cast<std::ptrdiff_t>(b));
      if constexpr (kSummaries) summaries_.erase(summaries_.begin() + static_cast<std::ptrdiff_t>(b));
    } else {
      firsts_[b] = blk.front().key;
      // Keep blocks from thinning out: merge a small block into its successor when both fit.
      if (b + 1 < blocks_.size() && blk.size() + blocks_[b + 1].size() <= kBlock / 2) merge_next(b);
    }
    return true;
  }

  // Calls f(key, value) for every entry in key order.
  template <class F>
  void for_each(F&& f) const {
    for (const auto& blk : blocks_) {
      for (const Entry& e : blk) f(e.key, e.value);
    }
  }

  // The blocks themselves, in key order (each sorted, none empty).
  [[nodiscard]] const std::vector<std::vector<Entry>>& blocks() const { return blocks_; }

  // Block b's summary (blocks()[b]), and its replacement by one a walker made from every entry
  // the block holds now (a cache: it changes no entry, hence const).
  [[nodiscard]] const S& summary(std::size_t b) const { return summaries_[b]; }
  void refine(std::size_t b, const S& exact) const { summaries_[b] = exact; }
  // The entry at `key` (present) changed in a way its block's summary must take in.
  void absorb_at(std::uint64_t key, const S& summary) const {
    if constexpr (kSummaries) {
      if (!blocks_.empty()) summaries_[block_of(key)].absorb(summary);
    }
  }

 private:
  static constexpr std::size_t kBlock = 256;
  static constexpr bool kSummaries = !std::is_same_v<S, NoBlockSummary>;

  // The block whose range holds `key`: the last one whose first key is <= key (or the first).
  [[nodiscard]] std::size_t block_of(std::uint64_t key) const {
    const auto it = std::upper_bound(firsts_.begin(), firsts_.end(), key);
    return it == firsts_.begin() ? 0 : static_cast<std::size_t>(it - firsts_.begin()) - 1;
  }
  void split(std::size_t b) {
    std::vector<Entry> upper(blocks_[b].begin() + static_cast<std::ptrdiff_t>(kBlock / 2), blocks_[b].end());
    blocks_[b].resize(kBlock / 2);
    const std::uint64_t first = upper.front().key;
    blocks_.insert(blocks_.begin() + static_cast<std::ptrdiff_t>(b) + 1, std::move(upper));
    firsts_.insert(firsts_.begin() + static_cast<std::ptrdiff_t>(b) + 1, first);
    // Both halves keep the whole block's summary: a bound on more entries than each holds.
    if constexpr (kSummaries) summaries_.insert(summaries_.begin() + static_cast<std::ptrdiff_t>(b) + 1, summaries_[b]);
  }
  void merge_next(std::size_t b) {
    std::vector<Entry>& next = blocks_[b + 1];
    blocks_[b].insert(blocks_[b].end(), next.begin(), next.end());
    blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(b) + 1);
    firsts_.erase(firsts_.begin() + static_cast<std::ptrdiff_t>(b) + 1);
    if constexpr (kSummaries) {
      summaries_[b].absorb(summaries_[b + 1]);
      summaries_.erase(summaries_.begin() + static_cast<std::ptrdiff_t>(b) + 1);
    }
  }

  std::vector<std::vector<Entry>> blocks_;
  std::vector<std::uint64_t> firsts_;  // first key of each block
  mutable std::vector<S> summaries_;   // one per block when kSummaries, else empty
  std::size_t size_ = 0;
};

}  // namespace coopsim
