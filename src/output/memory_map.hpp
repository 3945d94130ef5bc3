// Private to src/output: what the memory map draws, taken from the event log
// (memory_map_layout.cpp), and the axes that place it (the SVG itself: memory_map_svg.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coopsim/output/export.hpp"

namespace coopsim::memory_map {

// One block lifetime: from its Alloc to its Free (or the end of the run).
struct Interval {
  std::uint64_t addr = 0, size = 0;
  SimTime t0{0}, t1{0};
  std::uint32_t storage = kNoIndex;  // the storage it was placed for
  std::uint32_t record = 0;          // its Alloc record
  std::uint32_t free_record = kNoRecord;
  SimTime cost{0};           // duration of the op that last wrote it (0: none did)
  bool evicted = false;      // its content was evicted and the block freed
  bool swapped_out = false;  // its content was swapped out and the block freed
  bool swapped_in = false;   // filled by a swap-in
};

// A transfer window over a block: [t0, t1) while the copy is in flight.
struct Transfer {
  std::uint64_t addr = 0, size = 0;
  SimTime t0{0}, t1{0};
  bool out = false;  // device-to-host
};

struct Data {
  std::vector<Interval> intervals;
  std::vector<Transfer> transfers;
  SimTime end{1};  // the time axis runs over [0, end)
};
Data collect(const Trace& trace, const RunLog& log, const Report& report);

// The address axis: the ranges blocks ever used, in address order, with wide unused gaps
// collapsed to a thin band so that distant segments do not squeeze the picture.
class AddressAxis {
 public:
  explicit AddressAxis(const std::vector<Interval>& intervals);
  [[nodiscard]] double at(std::uint64_t addr) const;  // display offset, in [0, total()]
  [[nodiscard]] double total() const { return total_; }
  [[nodiscard]] std::uint64_t base() const { return pieces_.empty() ? 0 : pieces_.front().lo; }
  struct Piece {
    std::uint64_t lo = 0, hi = 0;
    double d0 = 0.0;  // display offset of lo
  };
  struct Gap {
    double d0 = 0.0, d1 = 0.0;  // display band
    std::uint64_t bytes = 0;    // collapsed unused bytes
  };
  [[nodiscard]] const std::vector<Piece>& pieces() const { return pieces_; }
  [[nodiscard]] const std::vector<Gap>& gaps() const { return gaps_; }

 private:
  std::vector<Piece> pieces_;
  std::vector<Gap> gaps_;
  double total_ = 1.0;
};

// A "nice" step (1, 2 or 5 times a power of ten) close to `span / target_ticks`.
double nice_step(double span, int target_ticks);
// A tick label with as many decimals as `step` needs.
std::string tick_label(double value, double step);
// Text for XML character data and attribute values.
std::string xml_escape(std::string_view s);

}  // namespace coopsim::memory_map
