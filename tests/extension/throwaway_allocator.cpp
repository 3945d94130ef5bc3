// A throwaway allocator that exists only to show that the registry is all a new allocator needs
// (issue 30): this file plus its one line in src/alloc/registry.cpp (enabled here by
// COOPSIM_EXTENSION_ALLOCATOR) and no test edit. tests/meson.build builds the CLI and the
// contract suite with it; the CLI tests, `list --json` and the contract suite then pick it up by
// name from the registry.
//
// The model: a bump counter. Every block gets the next 256-byte-aligned address and is never
// reused; an allocation fits while the live bytes (rounded to 256) stay within the capacity. It
// is address-blind, like `fungible`, whose rules it otherwise mirrors without its parameter.
#include <fmt/format.h>

#include <map>
#include <memory>
#include <string_view>
#include <vector>

#include "coopsim/alloc/registry.hpp"
#include "coopsim/base/error.hpp"

namespace coopsim {
namespace {

class ThrowawayAllocator final : public Allocator {
 public:
  static constexpr std::string_view kName = "throwaway";
  static constexpr std::string_view kHelp = "test-only bump counter (256 B rounding, addresses never reused)";
  static std::vector<ParamDoc> param_docs() { return {}; }
  static std::unique_ptr<Allocator> create(const Params&, Bytes capacity) {
    return std::make_unique<ThrowawayAllocator>(capacity);
  }
  explicit ThrowawayAllocator(Bytes capacity) : capacity_(capacity) {}

  [[nodiscard]] std::optional<Block> allocate(const AllocRequest& request) override {
    if (request.size.value == 0) throw InvariantError("throwaway: allocate of 0 bytes");
    const std::uint64_t size = round_up(request.size.value, kRound);
    if (size > capacity_.value - allocated_) return std::nullopt;
    const Block b{next_, Bytes{size}, request.size, request.stream};
    live_.emplace(next_, b);
    next_ += size;
    allocated_ += size;
    requested_ += request.size.value;
    return b;
  }
  void deallocate(const Block& block) override {
    const auto it = live_.find(block.addr);
    if (it == live_.end() || it->second.size != block.size || it->second.requested != block.requested)
      throw InvariantError(fmt::format("throwaway: deallocate of unknown block at {:#x}", block.addr));
    allocated_ -= block.size.value;
    requested_ -= block.requested.value;
    live_.erase(it);
  }
  [[nodiscard]] bool address_aware() const override { return false; }
  [[nodiscard]] Bytes placement_size(const AllocRequest& r) const override { return Bytes{round_up(r.size.value, kRound)}; }
  [[nodiscard]] AllocatorStats stats() const override {
    AllocatorStats s;
    s.capacity = capacity_;
    s.allocated = s.active = s.reserved = s.footprint = Bytes{allocated_};
    s.requested = Bytes{requested_};
    s.largest_free = capacity_ - s.allocated;
    s.free_ranges = allocated_ < capacity_.value ? 1 : 0;
    return s;
  }
  [[nodiscard]] std::vector<Range> ranges() const override {
    std::vector<Range> out;
    for (const auto& [addr, b] : live_) out.push_back(Range{addr, b.size, false, 0});
    return out;
  }
  void check_invariants() const override {
    std::uint64_t sum = 0;
    for (const auto& [addr, b] : live_) sum += b.size.value;
    if (sum != allocated_ || allocated_ > capacity_.value)
      throw InvariantError(fmt::format("throwaway: live blocks sum to {}, counter {}", sum, allocated_));
  }

 private:
  static constexpr std::uint64_t kRound = 256;
  Bytes capacity_;
  std::uint64_t allocated_ = 0, requested_ = 0, next_ = 0;
  std::map<std::uint64_t, Block> live_;
};

}  // namespace

AllocatorRegistry::Entry throwaway_allocator_entry() { return AllocatorRegistry::entry_for<ThrowawayAllocator>(); }

}  // namespace coopsim
