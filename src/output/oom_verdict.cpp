// Capacity or fragmentation: include/coopsim/output/oom_verdict.hpp.
#include "coopsim/output/oom_verdict.hpp"

#include <fmt/format.h>

namespace coopsim {

std::string_view to_string(OomVerdict::Kind k) {
  return k == OomVerdict::Kind::Capacity ? "capacity" : "fragmentation";
}

OomVerdict oom_verdict(const OomPoint& o, Bytes budget) {
  OomVerdict v;
  v.free = budget > o.allocated ? budget - o.allocated : Bytes{0};
  if (o.requested > v.free) {
    v.kind = OomVerdict::Kind::Capacity;
    v.short_by = o.requested - v.free;
    v.line = fmt::format("capacity OOM: {} short ({} live + {} requested > budget {})", format_bytes(v.short_by),
                         format_bytes(o.allocated), format_bytes(o.requested), format_bytes(budget));
    return v;
  }
  v.kind = OomVerdict::Kind::Fragmentation;
  const Bytes cached = o.reserved > o.allocated ? o.reserved - o.allocated : Bytes{0};
  const Bytes unreserved = budget > o.reserved ? budget - o.reserved : Bytes{0};
  v.line = fmt::format("fragmentation OOM: {} free ({} cached in segments, {} not reserved), but no free block of {} "
                       "(largest {})",
                       format_bytes(v.free), format_bytes(cached), format_bytes(unreserved), format_bytes(o.requested),
                       format_bytes(o.largest_free));
  return v;
}

}  // namespace coopsim
