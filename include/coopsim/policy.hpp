// Policies decide; the engine acts. A policy sees the simulation only through MemoryView
// (read-only) and answers with Actions, which the engine validates and carries out on its
// streams. Contract: never name a tensor that is pinned or not resident; an empty answer to
// on_alloc_failure means "nothing more can be done" and the engine reports OOM (unless
// transfers already in flight will free memory, which the engine waits for first).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "coopsim/allocator.hpp"
#include "coopsim/params.hpp"
#include "coopsim/trace.hpp"

namespace coopsim {

enum class Residency : std::uint8_t {
  NotAllocated,  // before its first alloc, or after its free
  Resident,
  SwappingOut,   // D2H copy in flight; device memory still held
  SwappedOut,    // only the host copy exists
  SwappingIn,    // H2D copy in flight; device memory held
};
std::string_view to_string(Residency r);

class MemoryView {
 public:
  virtual ~MemoryView() = default;
  [[nodiscard]] virtual SimTime now() const = 0;
  [[nodiscard]] virtual const Trace& trace() const = 0;
  [[nodiscard]] virtual std::size_t event_index() const = 0;  // event being processed
  [[nodiscard]] virtual Residency residency(TensorId storage) const = 0;
  [[nodiscard]] virtual bool pinned(TensorId storage) const = 0;  // used by the current event
  [[nodiscard]] virtual std::optional<Block> block(TensorId storage) const = 0;
  [[nodiscard]] virtual AllocatorStats allocator_stats() const = 0;
  [[nodiscard]] virtual const Allocator& allocator() const = 0;
  [[nodiscard]] virtual Bytes budget() const = 0;
};

struct Action {
  enum class Kind : std::uint8_t { SwapOut, SwapIn } kind = Kind::SwapOut;
  TensorId tensor{};
};

class Policy {
 public:
  virtual ~Policy() = default;
  // Once, before the replay: offline policies plan here.
  virtual void prepare(const MemoryView&) {}
  // An allocation of `request` failed. Return what to do to make room (may be empty).
  [[nodiscard]] virtual std::vector<Action> on_alloc_failure(const AllocRequest& request,
                                                             const MemoryView& view) = 0;
  // After every trace event: proactive transfers (prefetch, early swap-out).
  [[nodiscard]] virtual std::vector<Action> after_event(const MemoryView&) { return {}; }
};

}  // namespace coopsim
