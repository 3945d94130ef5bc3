// A set of memo indices. A pickler numbers its memo entries 0, 1, 2, ... (MEMOIZE), so real
// indices are dense and take one bit each; PUT may name any index, and those far past the bits
// in use go to an ordered set, so a crafted index costs one node, not a bitmap up to it. Once
// frozen, each member has a rank (its position among the members), which the streaming
// unpickler uses to keep the fetched memo entries in a plain vector.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace coopsim::pickle::detail {

class IndexSet {
 public:
  // True when `index` was not in the set yet.
  bool insert(std::uint64_t index) {
    if (contains(index)) return false;
    insert_new(index);
    return true;
  }
  // insert() of an index known not to be in the set.
  void insert_new(std::uint64_t index) {
    ++members_;
    // The bitmap grows only while it stays at least 1/64 full: 8 bytes per member at most.
    if (index >= bits() && index < 64 * members_ + kGrowth) {
      words_.resize(static_cast<std::size_t>(index / 64) + kGrowth / 64, 0);
    }
    if (index < bits()) {
      words_[static_cast<std::size_t>(index / 64)] |= std::uint64_t{1} << (index % 64);
    } else {
      sparse_.emplace(index, 0);
    }
  }
  [[nodiscard]] bool contains(std::uint64_t index) const {
    if (index < bits() && (words_[static_cast<std::size_t>(index / 64)] >> (index % 64) & 1) != 0) return true;
    return !sparse_.empty() && sparse_.count(index) != 0;
  }
  // Numbers the members 0, 1, ... (after the last insert).
  void freeze() {
    before_.resize(words_.size());
    std::uint64_t n = 0;
    for (std::size_t w = 0; w < words_.size(); ++w) {
      before_[w] = n;
      n += ones(words_[w]);
    }
    for (auto& [index, rank] : sparse_) rank = n++;
    size_ = n;
  }
  [[nodiscard]] std::uint64_t size() const { return size_; }  // after freeze()
  // The rank of a member (after freeze()); nullopt for a non-member.
  [[nodiscard]] std::optional<std::uint64_t> rank(std::uint64_t index) const {
    if (index < bits()) {
      const std::uint64_t word = words_[static_cast<std::size_t>(index / 64)];
      const std::uint64_t bit = std::uint64_t{1} << (index % 64);
      if ((word & bit) != 0) {
        return before_[static_cast<std::size_t>(index / 64)] + ones(word & (bit - 1));
      }
    }
    const auto it = sparse_.find(index);
    if (it == sparse_.end()) return std::nullopt;
    return it->second;
  }

 private:
  // std::popcount without a popcnt instruction (the build targets no particular CPU) is a
  // library call; this is the same count inline (bit-sliced sums).
  static std::uint64_t ones(std::uint64_t x) {
    x -= (x >> 1) & 0x5555555555555555ULL;
    x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
    return (x * 0x0101010101010101ULL) >> 56;
  }
  static constexpr std::uint64_t kGrowth = 1 << 16;  // bits added at a time
  [[nodiscard]] std::uint64_t bits() const { return std::uint64_t{words_.size()} * 64; }
  std::vector<std::uint64_t> words_;
  std::vector<std::uint64_t> before_;              // members in the words before each (freeze())
  std::map<std::uint64_t, std::uint64_t> sparse_;  // index -> rank (freeze())
  std::uint64_t size_ = 0;
  std::uint64_t members_ = 0;
};

}  // namespace coopsim::pickle::detail
