// `cnmem`: NVIDIA cnmem's root manager on the NULL stream (no named streams, no stealing).
// Address-ordered free blocks, best fit with lowest-address ties, low-end split, growth by one
// device allocation of exactly the rounded request, no coalescing across device allocations,
// memory never given back.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "coopsim/alloc/allocator.hpp"
#include "coopsim/base/params.hpp"
#include "detail/piece_list.hpp"

namespace coopsim {

struct CnMemOptions {
  // Reserved by one device allocation at construction (rounded up to 512 B); 0 = none.
  Bytes initial_reservation{0};
  // false = cnmem's CNMEM_FLAGS_CANNOT_GROW: only the initial reservation is ever used.
  bool can_grow = true;
};

class CnMemAllocator final : public Allocator {
 public:
  static constexpr std::string_view kName = "cnmem";
  static constexpr std::string_view kHelp =
      "NVIDIA cnmem (NULL stream, no stealing): 512 B granularity, best fit on an "
      "address-ordered free list, grows by exactly the rounded request, never merges across "
      "device allocations, never frees";
  static constexpr std::uint64_t kGranularity = 512;  // CNMEM_GRANULARITY

  static std::vector<ParamDoc> param_docs();
  static std::unique_ptr<Allocator> create(const Params& p, Bytes capacity);

  // Throws ConfigError when the initial reservation does not fit the capacity, or when
  // can_grow is false without an initial reservation.
  explicit CnMemAllocator(Bytes capacity, CnMemOptions opts = {});

  [[nodiscard]] std::optional<Block> allocate(const AllocRequest& request) override;
  void deallocate(const Block& block) override;
  [[nodiscard]] Bytes placement_size(const AllocRequest& r) const override {
    return Bytes{round_up(r.size.value, kGranularity)};
  }
  void release_cached() override {}  // cnmem returns memory only at cnmemFinalize
  [[nodiscard]] AllocatorStats stats() const override;
  [[nodiscard]] std::vector<Range> ranges() const override;
  bool free_ranges_by_address(std::vector<Range>& out) const override {
    pieces_.free_by_address(0, out);
    return true;
  }
  void segment_starts(std::vector<std::uint64_t>& out) const override;
  [[nodiscard]] std::uint64_t ranges_end() const override { return pieces_.end(0); }
  void check_invariants() const override;

  [[nodiscard]] const CnMemOptions& options() const { return opts_; }
  [[nodiscard]] const detail::PieceList& pieces() const { return pieces_; }

 private:
  struct Region {
    std::uint64_t size = 0;
    std::uint32_t head = detail::kNoPiece;  // piece starting the region
    std::uint32_t segment = 0;
  };

  // One device allocation of exactly `size` bytes, linked in as a free head piece.
  // kNoPiece when the device capacity would be exceeded.
  std::uint32_t grow(std::uint64_t size);

  CnMemOptions opts_;
  DeviceMemory device_;
  detail::PieceList pieces_;
  std::map<std::uint64_t, Region> regions_;  // by start address
};

}  // namespace coopsim
