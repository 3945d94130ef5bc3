// The reconstruction of a snapshot's history (private to src/import): tensor identity, the
// allocator state when the recording began and the checks against the end state. The rules are
// in the comment of torch_snapshot_state.cpp; torch_snapshot_history.cpp walks the history
// forwards, torch_snapshot_state.cpp rebuilds the initial segments from it.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "coopsim/base/addr_map.hpp"
#include "torch_snapshot_detail.hpp"

namespace coopsim::torch_snapshot::detail {

inline constexpr std::uint64_t kSmallBuffer = 2ULL << 20;  // small-pool segment size
inline constexpr std::uint64_t kSmallSize = 1ULL << 20;    // largest small-pool request

// A block live when the recording began.
struct Preexisting {
  static constexpr std::size_t kNone = kNoEntry;
  std::uint64_t addr = 0;
  std::uint64_t requested = 0;
  std::uint64_t stream = 0;
  std::uint64_t size = 0;           // block size, once known
  std::size_t first_entry = kNone;  // its first free_requested / free_completed
  std::size_t free_entry = kNone;   // its free_completed, or kNone (still live at the end)
  bool requested_free = false;      // a free_requested came before its free_completed
  bool from_end_state = false;      // untouched by the history: size from `segments`
  std::string name;
  std::uint32_t tensor = ~std::uint32_t{0};
};

struct InitialSeg {
  std::uint64_t addr = 0, size = 0, stream = 0;
  SegmentPool pool = SegmentPool::Large;
  bool expandable = false;  // a mapped range of an expandable segment
};

class Reconstruction {
 public:
  Reconstruction(const Snapshot& s, const PyTorchOptions& o, const std::map<std::uint64_t, std::uint64_t>& sizes)
      : snap_(s), opts_(o), sizes_(sizes) {}
  History run();

 private:
  static constexpr std::size_t kNone = kNoEntry;
  static constexpr std::uint32_t kNoTensor = ~std::uint32_t{0};
  static constexpr std::uint32_t kPreFlag = 0x80000000U;  // tensor_of_entry: index into pre_

  // torch_snapshot_history.cpp
  void note(std::string text);  // the initial state is not exact, and why
  void collect_streams();
  const SnapSegment* end_segment_at(std::uint64_t addr) const;
  void walk_history();
  static SegmentPool pool_by_size(std::uint64_t size);
  void check_end_state();
  void number_tensors();
  void find_expandable_segments();  // mapped ranges at the start and the reservations

  // torch_snapshot_state.cpp
  void find_initial_segments();
  const InitialSeg* initial_at(std::uint64_t addr) const;
  void add_untouched_end_blocks();
  void size_preexisting_blocks();
  void build_initial_state();
  void orphan(std::size_t i);
  std::uint32_t new_initial_tensor(const Preexisting& b);

  struct SegmentEvent {
    bool alloc = false;
    std::uint64_t size = 0, stream = 0;
  };

  const Snapshot& snap_;
  const PyTorchOptions& opts_;
  const std::map<std::uint64_t, std::uint64_t>& sizes_;
  History h_;
  std::vector<Tensor> trace_tensors_;
  std::vector<std::size_t> trace_alloc_entry_;
  std::vector<Preexisting> pre_;
  std::map<std::uint64_t, std::size_t> pre_live_;                      // address -> pre-existing block not yet freed
  coopsim::detail::AddrMap<bool> touched_;                             // addresses of any alloc / free entry
  std::vector<std::pair<std::uint64_t, std::size_t>> allocs_by_addr_;  // (address, entry)
  std::map<std::uint64_t, std::uint32_t> live_at_end_;
  std::map<std::uint64_t, SegmentEvent> first_segment_event_;  // address -> its first segment event
  std::vector<InitialSeg> initial_;
  bool expandable_end_ = false, expandable_history_ = false;
};

}  // namespace coopsim::torch_snapshot::detail
