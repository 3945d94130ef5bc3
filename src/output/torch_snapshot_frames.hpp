// Private to src/output: the stack frames of the PyTorch snapshot export (torch_snapshot_writer.cpp).
// A recorded snapshot's `frames` are the Python / C++ stack of each allocation; a simulated run has
// no stack, so each block gets one frame that says what it holds instead: the tensor, its role and
// the op that produced it (or reads it), and how the block was filled (the trace's allocation, a
// swap-in, a recomputation, a copy-on-write copy). memory_viz prints a frame as
// `filename:line:name`: filename is the trace's file name, line the tensor's id in it.
//
// Blocks of the same tensor filled the same way share one frames list, written once into the
// pickle and referred to afterwards (pickle::Writer::shared), so a long run costs one list per
// tensor rather than one per entry.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "coopsim/formats/pickle_writer.hpp"
#include "coopsim/model/runlog.hpp"
#include "coopsim/model/trace.hpp"

namespace coopsim::snapshot_detail {

inline constexpr std::uint32_t kNoFrames = 0xffffffffU;  // the empty frames list

class SnapshotFrames {
 public:
  SnapshotFrames(const Trace& trace, const RunLog& log);

  // The frames of the block placed by Alloc record `record`.
  [[nodiscard]] std::uint32_t of_alloc(std::uint32_t record) const { return alloc_frames_[record]; }
  // The frames of a segment change: those of the allocation it was made for (the next Alloc
  // record of the same trace event), else none (a cache flush before an OOM).
  [[nodiscard]] std::uint32_t of_segment(const LogSegment& s) const;
  // The frames of the trace's allocation of the tensor with file id `file_id` (an OOM's request).
  [[nodiscard]] std::uint32_t of_request(std::uint64_t file_id);
  // The text of frames list `id`'s frame (for tests).
  [[nodiscard]] const std::string& name(std::uint32_t id) const { return lists_[id].name; }
  // Writes frames list `id` (kNoFrames: the empty list) as the next value: in full the first time,
  // as a reference to that copy afterwards.
  void write(pickle::Writer& w, std::uint32_t id);

 private:
  enum class Filled : std::uint8_t { Trace, SwapIn, Recompute, Copy, Unfilled };
  struct List {
    std::string name;
    std::uint64_t line = 0;
    std::uint32_t memo = kNoFrames;  // memo index once written
  };
  std::uint32_t intern(std::uint32_t storage, Filled how, std::uint32_t op);
  [[nodiscard]] std::string op_label(std::uint32_t op) const;

  const Trace& trace_;
  const RunLog& log_;
  std::string filename_;
  std::vector<std::uint32_t> producer_, consumer_;  // per storage: first op writing / reading it
  std::vector<std::uint32_t> alloc_frames_;         // per record (Alloc records only)
  std::vector<std::uint32_t> next_alloc_;           // per record: first Alloc record at or after it
  std::map<std::tuple<std::uint32_t, Filled, std::uint32_t>, std::uint32_t> ids_;
  std::vector<List> lists_;
  std::uint32_t empty_memo_ = kNoFrames;
};

}  // namespace coopsim::snapshot_detail
