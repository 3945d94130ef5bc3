// The memory cap of a reader (include/coopsim/model/memory_cap.hpp); the memory this process
// may use, which sets its default, is machine_memory() (src/base/machine_memory.cpp).
#include "coopsim/model/memory_cap.hpp"


#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <string>

#include "coopsim/base/limits.hpp"

namespace coopsim {

std::string MemoryCap::problem() const { return limit_problem(limit_, "bytes of memory", "max_memory"); }

Error out_of_memory(const std::string& file, std::uint64_t limit) {
  return Error(
      fmt::format("{}: out of memory before the {} bytes of limits.max_memory were used (the machine has "
                  "less free memory than that); lower limits.max_memory",
                  file, limit));
}

namespace memory_cost {

std::uint64_t tensor(const TensorInfo& t) { return sizeof(TensorInfo) + text(t.name.size()); }

std::uint64_t op(const OpInfo& o) {
  return sizeof(OpInfo) + text(o.name.size()) +
         sizeof(TensorId) * (o.inputs.size() + o.outputs.size() + o.mutated.size()) +
         sizeof(std::pair<TensorId, TensorId>) * o.views.size();
}

std::uint64_t segment(const InitialSegment& s) {
  return sizeof(InitialSegment) + sizeof(InitialBlock) * s.blocks.size();
}

std::uint64_t trace(const Trace& t) {
  std::uint64_t sum = 0;
  const auto add = [&sum](std::uint64_t n) {
    if (__builtin_add_overflow(sum, n, &sum)) sum = std::numeric_limits<std::uint64_t>::max();
  };
  if (__builtin_mul_overflow(kEvent, t.events.size(), &sum)) sum = std::numeric_limits<std::uint64_t>::max();
  for (const TensorInfo& x : t.tensors) add(tensor(x));
  for (const OpInfo& o : t.ops) add(op(o));
  for (const std::string& l : t.labels) add(label(l));
  for (const InitialSegment& g : t.initial_segments) add(segment(g));
  return sum;
}

}  // namespace memory_cost

}  // namespace coopsim
