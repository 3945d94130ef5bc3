// `fungible`: DTR's address-blind memory assumption.
// Source: uwsampl/dtr-prototype @eff53cc4 : simrd/simrd/runtime/v2.py (make-room loop) and
// dtr_code/dtr-implementation.patch (CheckpointTensorImpl.cpp); docs/models/bestfit-fungible.md.
// Modelled rules:
//  * Memory is one number: an allocation fits iff memory_usage + size <= budget; otherwise the
//    runtime must evict (policy, not modelled here).
//  * Freeing returns the bytes to the counter at once; which bytes were freed does not matter,
//    so there is no fragmentation and no placement.
//  * simrd counts exact bytes (param `alignment` = 1, the default); the PyTorch prototype checks
//    the caching allocator's allocated bytes, i.e. sizes rounded to 512 (`alignment` = 512).
// coopsim additions: blocks get fake addresses from a counter (advanced by each block's size,
// never reused) so live blocks are distinct and never overlap; stats in PyTorch vocabulary with
// reserved = allocated, largest_free = capacity - allocated, free_ranges = 1 if any byte is free.
#include "fungible.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "coopsim/base/error.hpp"
#include "coopsim/alloc/registry.hpp"

namespace coopsim {

std::vector<ParamDoc> FungibleAllocator::param_docs() {
  return {
      ParamDoc{"alignment",
               ParamType::Bytes,
               "1",
               "sizes are rounded up to a multiple of this before being counted; 1 = exact bytes "
               "(DTR), 512 = what CUDA allocators charge",
               {}},
  };
}

std::unique_ptr<Allocator> FungibleAllocator::create(const Params& p, Bytes capacity) {
  FungibleOptions o;
  o.alignment = p.get_bytes("alignment").value;
  if (o.alignment == 0) throw ConfigError(p.component() + ".alignment", "must be > 0");
  return std::make_unique<FungibleAllocator>(capacity, o);
}

FungibleAllocator::FungibleAllocator(Bytes capacity, FungibleOptions opts) : capacity_(capacity), opts_(opts) {
  if (opts_.alignment == 0) throw ConfigError("fungible.alignment", "must be > 0");
}

std::optional<Block> FungibleAllocator::allocate(const AllocRequest& request) {
  if (request.size.value == 0) throw InvariantError("fungible: allocate of 0 bytes");
  const std::uint64_t size = round_up(request.size.value, opts_.alignment);
  if (size > capacity_.value - allocated_) return std::nullopt;
  const std::uint64_t addr = next_addr_;
  next_addr_ += size;
  live_.insert(addr, Live{size, request.size.value});
  allocated_ += size;
  requested_ += request.size.value;
  return Block{addr, Bytes{size}, request.size, request.stream};
}

void FungibleAllocator::deallocate(const Block& block) {
  const Live* l = live_.find(block.addr);
  if (l == nullptr) {
    throw InvariantError(
        fmt::format("fungible: deallocate of unknown block at {:#x} ({} bytes)", block.addr, block.size.value));
  }
  if (l->size != block.size.value || l->requested != block.requested.value) {
    throw InvariantError(
        fmt::format("fungible: deallocate of block at {:#x} with size {} (requested {}), but the live block "
                    "has size {} (requested {})",
                    block.addr, block.size.value, block.requested.value, l->size, l->requested));
  }
  allocated_ -= l->size;
  requested_ -= l->requested;
  live_.erase(block.addr);
}

AllocatorStats FungibleAllocator::stats() const {
  AllocatorStats s;
  s.capacity = capacity_;
  s.allocated = Bytes{allocated_};
  s.requested = Bytes{requested_};
  s.active = s.allocated;
  s.reserved = s.allocated;
  s.footprint = s.reserved;
  s.largest_free = capacity_ - s.allocated;
  s.free_ranges = allocated_ < capacity_.value ? 1 : 0;
  return s;
}

std::vector<Range> FungibleAllocator::ranges() const {
  std::vector<Range> out;
  out.reserve(live_.size());
  live_.for_each([&](std::uint64_t addr, const Live& l) { out.push_back(Range{addr, Bytes{l.size}, false, 0}); });
  std::sort(out.begin(), out.end(), [](const Range& a, const Range& b) { return a.addr < b.addr; });
  return out;
}

void FungibleAllocator::check_invariants() const {
  auto fail = [](const std::string& what) { throw InvariantError("fungible: " + what); };
  std::uint64_t sum = 0;
  std::uint64_t req = 0;
  live_.for_each([&](std::uint64_t addr, const Live& l) {
    if (l.size == 0 || l.size % opts_.alignment != 0 || l.requested == 0 || l.requested > l.size) {
      fail(fmt::format("block at {:#x} has size {} for request {} at alignment {}", addr, l.size, l.requested,
                       opts_.alignment));
    }
    if (addr + l.size > next_addr_) {
      fail(fmt::format("block at {:#x} lies beyond the address counter {:#x}", addr, next_addr_));
    }
    sum += l.size;
    req += l.requested;
  });
  if (sum != allocated_) fail(fmt::format("allocated {} != sum of live sizes {}", allocated_, sum));
  if (req != requested_) fail(fmt::format("requested {} != sum of live requests {}", requested_, req));
  if (allocated_ > capacity_.value) {
    fail(fmt::format("allocated {} exceeds the capacity {}", allocated_, capacity_.value));
  }
  const std::vector<Range> r = ranges();
  for (std::size_t k = 1; k < r.size(); ++k) {
    if (r[k - 1].addr + r[k - 1].size.value > r[k].addr) {
      fail(fmt::format("blocks at {:#x} and {:#x} overlap", r[k - 1].addr, r[k].addr));
    }
  }
}

// Its line in the registry (src/alloc/registry.cpp).
AllocatorRegistry::Entry fungible_allocator_entry() { return AllocatorRegistry::entry_for<FungibleAllocator>(); }

}  // namespace coopsim
