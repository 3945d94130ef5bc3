// `bestfit`: Coop's fixed arena (OneFlow RematEpAllocator) without eviction. One arena of the
// whole budget, cut into address-ordered pieces; best-fit placement on (size, address) with
// low-end placement and coalescing on free. Block.addr is the offset inside the arena. With
// `small_area`, the arena's top bytes are OneFlow's small-piece area: small requests are placed
// there only, everything else below it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "coopsim/alloc/allocator.hpp"
#include "coopsim/base/params.hpp"
#include "detail/piece_list.hpp"

namespace coopsim {

struct BestFitOptions {
  std::uint64_t alignment = 512;  // every request is rounded up to a multiple of this (> 0)
  // OneFlow's small-piece area: the top `small_area` bytes of the arena (0: none) take every
  // request whose rounded size is <= small_threshold, and only those.
  std::uint64_t small_area = 0;
  std::uint64_t small_threshold = 10240;
};

class BestFitAllocator final : public Allocator {
 public:
  static constexpr std::string_view kName = "bestfit";
  static constexpr std::string_view kHelp =
      "Coop's arena (OneFlow RematEpAllocator): one fixed arena of the budget, best fit on "
      "(size, address), low-end split, coalescing; addresses are arena offsets";
  static std::vector<ParamDoc> param_docs();
  // Reads `alignment`; throws ConfigError("<component>.alignment") when it is 0.
  static std::unique_ptr<Allocator> create(const Params& p, Bytes capacity);

  // The arena is `capacity` rounded down to a multiple of the alignment (reserved from the
  // start). Throws ConfigError when opts.alignment is 0.
  explicit BestFitAllocator(Bytes capacity, BestFitOptions opts = {});

  [[nodiscard]] std::optional<Block> allocate(const AllocRequest& request) override;
  void deallocate(const Block& block) override;
  [[nodiscard]] Bytes placement_size(const AllocRequest& r) const override {
    return Bytes{round_up(r.size.value, opts_.alignment)};
  }
  [[nodiscard]] AllocatorStats stats() const override;
  [[nodiscard]] std::vector<Range> ranges() const override;
  bool free_ranges_by_address(std::vector<Range>& out) const override;
  void segment_starts(std::vector<std::uint64_t>& out) const override;
  [[nodiscard]] std::uint64_t ranges_end() const override { return small_.empty() ? pieces_.end(0) : small_.end(0); }
  [[nodiscard]] std::uint64_t reclaimable_end() const override {
    return opts_.small_area > 0 ? normal_end_ : kEveryAddress;
  }
  void check_invariants() const override;

  [[nodiscard]] Bytes arena_size() const { return Bytes{arena_}; }
  [[nodiscard]] std::uint64_t alignment() const { return opts_.alignment; }
  // Address-ordered pieces below the small-piece area, for layout-aware policies: first(),
  // at(i).next, ...
  [[nodiscard]] const detail::PieceList& pieces() const { return pieces_; }
  // The small-piece area's start (the arena's end without one).
  [[nodiscard]] std::uint64_t small_area_start() const { return normal_end_; }

 private:
  // Turns part of free piece `piece` into a used block of `size` bytes: at the piece's low end,
  // or at piece_end - size when `align_right` (Coop's cheap-tensor placement).
  Block place(detail::PieceList& list, std::uint32_t piece, std::uint64_t size, const AllocRequest& request,
              bool align_right);
  [[nodiscard]] bool is_small(std::uint64_t rounded) const;

  Bytes capacity_;
  BestFitOptions opts_;
  std::uint64_t arena_ = 0;
  std::uint64_t normal_end_ = 0;  // [0, normal_end_): pieces_; [normal_end_, arena_): small_
  detail::PieceList pieces_;
  detail::PieceList small_;
};

}  // namespace coopsim
