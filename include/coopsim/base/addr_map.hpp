// A flat hash map from a 64-bit address to a small value, for the "which live block starts here"
// lookups of the allocator models and the snapshot importer's address tables (millions of
// allocations: no node per entry). Open addressing with linear probing and backward-shift
// deletion (no tombstones), so a long run of alloc/free pairs neither degrades nor allocates
// once the table has grown to the peak number of live entries.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace coopsim::detail {

template <class V>
class AddrMap {
 public:
  // Reserved key marking an empty slot; no model hands out this address.
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};

  AddrMap() { rebuild(16); }

  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] bool empty() const { return size_ == 0; }

  [[nodiscard]] V* find(std::uint64_t key) {
    for (std::size_t i = home(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i].value;
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }
  [[nodiscard]] const V* find(std::uint64_t key) const {
    return const_cast<AddrMap*>(this)->find(key);  // NOLINT: same lookup, no mutation
  }

  // false (and nothing changed) when the key is already present.
  bool insert(std::uint64_t key, const V& value) {
    if ((size_ + 1) * 2 > slots_.size()) rebuild(slots_.size() * 2);
    for (std::size_t i = home(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return false;
      if (slots_[i].key == kEmpty) {
        slots_[i].key = key;
        slots_[i].value = value;
        ++size_;
        return true;
      }
    }
  }

  // false when the key is absent.
  bool erase(std::uint64_t key) {
    std::size_t i = home(key);
    while (slots_[i].key != key) {
      if (slots_[i].key == kEmpty) return false;
      i = (i + 1) & mask_;
    }
    // Backward shift: pull later entries of the probe run into the hole when their home slot
    // does not lie in the cyclic range (hole, j].
    for (std::size_t j = (i + 1) & mask_; slots_[j].key != kEmpty; j = (j + 1) & mask_) {
      const std::size_t h = home(slots_[j].key);
      if (((j - h) & mask_) >= ((j - i) & mask_)) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i].key = kEmpty;
    --size_;
    return true;
  }

  // f(key, value) for every entry, in no particular order.
  template <class F>
  void for_each(F&& f) const {
    for (const auto& s : slots_) {
      if (s.key != kEmpty) f(s.key, s.value);
    }
  }

 private:
  struct Slot {
    std::uint64_t key = kEmpty;
    V value{};
  };

  [[nodiscard]] std::size_t home(std::uint64_t key) const {
    // splitmix64 finaliser: addresses are multiples of 512, so the low bits carry nothing.
    key ^= key >> 30;
    key *= 0xbf58476d1ce4e5b9ULL;
    key ^= key >> 27;
    key *= 0x94d049bb133111ebULL;
    key ^= key >> 31;
    return static_cast<std::size_t>(key) & mask_;
  }

  void rebuild(std::size_t capacity) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(std::bit_ceil(capacity), Slot{});
    mask_ = slots_.size() - 1;
    size_ = 0;
    for (const auto& s : old) {
      if (s.key != kEmpty) insert(s.key, s.value);
    }
  }

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
};

}  // namespace coopsim::detail
