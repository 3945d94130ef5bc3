// The one-line verdict on an out-of-memory run, first in the reports' OOM section: was the budget
// too small for what was live (capacity), or was there enough free memory but no block large enough
// (fragmentation)? From the OOM point's figures alone.
#pragma once

#include <string>

#include "coopsim/base/units.hpp"
#include "coopsim/model/report.hpp"

namespace coopsim {

struct OomVerdict {
  enum class Kind { Capacity, Fragmentation } kind = Kind::Capacity;
  Bytes free;      // budget - allocated: bytes not held by live blocks (cached in segments or never reserved)
  Bytes short_by;  // capacity: requested - free
  std::string line;
};

OomVerdict oom_verdict(const OomPoint& oom, Bytes budget);
std::string_view to_string(OomVerdict::Kind k);

}  // namespace coopsim
