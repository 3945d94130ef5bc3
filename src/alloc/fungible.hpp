// `fungible`: DTR's address-blind memory model. A byte counter against the budget; any free byte
// is as good as any other, so there is no fragmentation. Blocks get unique fake addresses from a
// counter (never reused, never overlapping) only so that they can be told apart.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "coopsim/alloc/allocator.hpp"
#include "coopsim/base/params.hpp"
#include "coopsim/base/addr_map.hpp"

namespace coopsim {

struct FungibleOptions {
  // Sizes are rounded up to a multiple of this (> 0); 1 = exact bytes, as DTR counts them.
  std::uint64_t alignment = 1;
};

class FungibleAllocator final : public Allocator {
 public:
  static constexpr std::string_view kName = "fungible";
  static constexpr std::string_view kHelp =
      "DTR's address-blind model: a byte counter against the budget (no addresses, no "
      "fragmentation); fails when allocated + size > capacity";
  static std::vector<ParamDoc> param_docs();
  // Reads `alignment`; throws ConfigError("<component>.alignment") when it is 0.
  static std::unique_ptr<Allocator> create(const Params& p, Bytes capacity);

  // Throws ConfigError when opts.alignment is 0.
  explicit FungibleAllocator(Bytes capacity, FungibleOptions opts = {});

  [[nodiscard]] std::optional<Block> allocate(const AllocRequest& request) override;
  void deallocate(const Block& block) override;
  [[nodiscard]] bool address_aware() const override { return false; }
  [[nodiscard]] Bytes placement_size(const AllocRequest& r) const override {
    return Bytes{round_up(r.size.value, opts_.alignment)};
  }
  [[nodiscard]] AllocatorStats stats() const override;
  // Live blocks only, by fake address (free bytes have no address in this model).
  [[nodiscard]] std::vector<Range> ranges() const override;
  void check_invariants() const override;

 private:
  struct Live {
    std::uint64_t size = 0;
    std::uint64_t requested = 0;
  };

  Bytes capacity_;
  FungibleOptions opts_;
  std::uint64_t allocated_ = 0;
  std::uint64_t requested_ = 0;
  std::uint64_t next_addr_ = 0;  // fake address counter, advances by each block's size
  detail::AddrMap<Live> live_;
};

}  // namespace coopsim
