// Pairing of Kineto [memory] events into tensor lifetimes (one device).
//
// Kineto reports every CUDA caching-allocator allocation and free as an instant event with
// "Bytes" > 0 (alloc) or < 0 (free) (docs/import-kineto.md, "Memory").
//  * Newer traces carry "Addr": a free releases the live allocation at that address; the
//    sizes must agree.
//  * 2021-era traces carry no address. Only the running sum of Bytes is exact; which tensor a
//    free ends is inferred: a free of B bytes releases the most recent still-live allocation of
//    exactly B bytes (LIFO per size). Training programs free in stack order (temporaries inside
//    an op, forward activations in reverse during backward), which this rule follows; whatever
//    the choice, live bytes at every point equal the recorded running sum.
//  * A free that matches nothing releases a block allocated before profiling began (a window
//    after warm-up steps, parameters, optimizer state): it becomes a tensor live from the start.
//  * When every event carries "Total Allocated" (the allocator's running total per device),
//    the bytes live before the first event are known exactly (total - Bytes of the first event);
//    what the trace never frees of them becomes one more tensor live from the start, so peak
//    live equals the recorded peak of Total Allocated.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "coopsim/base/error.hpp"
#include "kineto_detail.hpp"

namespace coopsim::kineto_detail {
namespace {

constexpr std::int64_t kMaxTensorBytes = std::int64_t{1} << 53;  // trace v1 limit

class Pairer {
 public:
  Pairer(const std::string& path, const Collected& c, const Nesting& n) : path_(path), c_(c), n_(n) {}

  PairedMemory run() {
    std::vector<std::uint32_t> order(c_.memory.size());
    std::iota(order.begin(), order.end(), 0U);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return c_.memory[a].ts < c_.memory[b].ts; });
    choose_pairing();
    for (const std::uint32_t i : order) {
      const MemoryEvent& e = c_.memory[i];
      if (e.oom) {
        out_.actions.push_back({MemoryAction::Kind::Oom, e.ts, static_cast<std::uint32_t>(out_.ooms.size())});
        out_.ooms.push_back(&e);
      } else if (e.bytes == 0) {
        ++out_.zero_byte_events;
      } else if (e.bytes > 0) {
        alloc(e, i);
      } else {
        free(e);
      }
    }
    check_totals(order);
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(const MemoryEvent& e, const std::string& problem) const {
    throw InputError(path_, e.line, fmt::format("traceEvents[{}]: {}", e.index, problem));
  }

  std::uint64_t size_of(const MemoryEvent& e) const {
    if (e.bytes > kMaxTensorBytes || e.bytes < -kMaxTensorBytes) {
      fail(e, fmt::format("field 'args.Bytes' is too large for a tensor (got {}; at most 2^53)", e.bytes));
    }
    return static_cast<std::uint64_t>(e.bytes < 0 ? -e.bytes : e.bytes);
  }

  // All events with Addr, or none (first event decides).
  void choose_pairing() {
    const MemoryEvent* first = nullptr;
    for (const MemoryEvent& e : c_.memory) {
      if (e.oom || e.bytes == 0) continue;
      if (first == nullptr) {
        first = &e;
        out_.pairing = e.addr ? Pairing::Address : Pairing::InferredLifoPerSize;
      } else if (e.addr.has_value() != first->addr.has_value()) {
        fail(e, fmt::format("[memory] event {} 'args.Addr', unlike traceEvents[{}] (pairing needs all or none)",
                            e.addr ? "with" : "without", first->index));
      }
    }
  }

  std::uint32_t new_tensor(const MemoryEvent& e) {
    TensorRecord t;
    t.bytes = size_of(e);
    t.addr = e.addr.value_or(0);
    out_.tensors.push_back(t);
    return static_cast<std::uint32_t>(out_.tensors.size() - 1);
  }

  void alloc(const MemoryEvent& e, std::uint32_t event) {
    const std::uint32_t t = new_tensor(e);
    TensorRecord& rec = out_.tensors[t];
    rec.innermost = n_.memory_innermost[event];
    if (rec.innermost == kNone) {
      ++out_.allocations_outside_ops;
    } else {
      rec.top_op = n_.root[rec.innermost];
    }
    if (out_.pairing == Pairing::Address) {
      const auto [it, fresh] = live_by_addr_.try_emplace(*e.addr, Live{t, &e});
      if (!fresh) {
        fail(e, fmt::format("allocation at address {}, which is still live (allocated by traceEvents[{}])", *e.addr,
                            it->second.event->index));
      }
    } else {
      live_by_size_[rec.bytes].push_back(t);
    }
    out_.actions.push_back({MemoryAction::Kind::Alloc, e.ts, t});
  }

  void free(const MemoryEvent& e) {
    const std::uint64_t bytes = size_of(e);
    std::uint32_t t = kNone;
    if (out_.pairing == Pairing::Address) {
      if (const auto it = live_by_addr_.find(*e.addr); it != live_by_addr_.end()) {
        const TensorRecord& rec = out_.tensors[it->second.tensor];
        if (rec.bytes != bytes) {
          fail(e, fmt::format("free of {} bytes at address {}, which holds an allocation of {} bytes (traceEvents[{}])",
                              bytes, *e.addr, rec.bytes, it->second.event->index));
        }
        t = it->second.tensor;
        live_by_addr_.erase(it);
      }
    } else if (const auto it = live_by_size_.find(bytes); it != live_by_size_.end() && !it->second.empty()) {
      t = it->second.back();
      it->second.pop_back();
    }
    if (t == kNone) {  // allocated before profiling began
      t = new_tensor(e);
      out_.tensors[t].before_profiling = true;
      out_.initially_live.push_back(t);
      ++out_.freed_before_allocated;
      out_.freed_before_allocated_bytes += bytes;
    }
    out_.actions.push_back({MemoryAction::Kind::Free, e.ts, t});
  }

  void check_totals(const std::vector<std::uint32_t>& order) {
    // Only when every event has the total is the state before the first one known exactly.
    const bool all_totals = std::all_of(c_.memory.begin(), c_.memory.end(),
                                        [](const MemoryEvent& e) { return e.oom || e.total_allocated.has_value(); });
    if (!all_totals) return;
    std::optional<std::int64_t> previous;
    for (const std::uint32_t i : order) {
      const MemoryEvent& e = c_.memory[i];
      if (e.oom) continue;
      if (!previous) {
        out_.live_before_profiling = *e.total_allocated - e.bytes;
      } else if (*previous + e.bytes != *e.total_allocated) {
        ++out_.total_allocated_mismatches;
      }
      previous = e.total_allocated;
      out_.peak_total_allocated = std::max(out_.peak_total_allocated.value_or(*e.total_allocated), *e.total_allocated);
      if (e.total_reserved) {
        out_.peak_total_reserved = std::max(out_.peak_total_reserved.value_or(*e.total_reserved), *e.total_reserved);
      }
    }
    if (!out_.live_before_profiling) return;
    const std::int64_t rest =
        *out_.live_before_profiling - static_cast<std::int64_t>(out_.freed_before_allocated_bytes);
    if (rest < 0) {
      out_.total_allocated_inconsistent = true;
    } else if (rest > 0) {
      if (rest > kMaxTensorBytes)
        fail(c_.memory[order.front()], "field 'args.Total Allocated' is too large (over 2^53 bytes)");
      TensorRecord t;
      t.bytes = static_cast<std::uint64_t>(rest);
      t.before_profiling = t.residual = true;
      out_.tensors.push_back(t);
      out_.initially_live.insert(out_.initially_live.begin(), static_cast<std::uint32_t>(out_.tensors.size() - 1));
    }
  }

  struct Live {
    std::uint32_t tensor;
    const MemoryEvent* event;
  };

  const std::string& path_;
  const Collected& c_;
  const Nesting& n_;
  PairedMemory out_;
  std::map<std::uint64_t, Live> live_by_addr_;
  std::map<std::uint64_t, std::vector<std::uint32_t>> live_by_size_;
};

}  // namespace

PairedMemory pair_memory(const std::string& path, const Collected& c, const Nesting& n) {
  return Pairer(path, c, n).run();
}

}  // namespace coopsim::kineto_detail
