// The independent auditor (include/coopsim/audit/audit.hpp): the record loop, the device
// model (live blocks and their contents), allocation, frees, transfers and evictions. Ops are in
// audit_ops.cpp. It uses nothing but the trace and the log; the rules are the contract of
// include/coopsim/model/runlog.hpp.
#include <fmt/format.h>

#include <algorithm>

#include "auditor.hpp"

namespace coopsim {
namespace check_detail {

std::vector<std::uint32_t> sorted_unique(std::vector<std::uint32_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

AuditResult Auditor::run() {
  for (std::uint32_t i = 0; i < log_.records.size(); ++i) {
    const LogRecord& rec = log_.records[i];
    ++result_.records;
    current_ = i;
    const std::size_t refs = rec.kind == LogKind::Compute || rec.kind == LogKind::Recompute
                                 ? std::size_t{rec.reads} + rec.writes
                                 : (rec.kind == LogKind::Stall || rec.kind == LogKind::Memory ? 0 : 1);
    if (std::size_t{rec.first} + refs > log_.refs.size()) {
      fail(kNoIndex,
           fmt::format("names refs {} to {}, but the log has {}", rec.first, rec.first + refs, log_.refs.size()));
      continue;
    }
    if (refs > 0 && rec.kind != LogKind::Compute && rec.kind != LogKind::Recompute &&
        index_of(log_.ref(rec).storage) >= trace_.tensors.size()) {
      fail(kNoIndex,
           fmt::format("names storage index {}, which the trace does not define", index_of(log_.ref(rec).storage)));
      continue;
    }
    switch (rec.kind) {
      case LogKind::Alloc: alloc(rec); break;
      case LogKind::Free: free(rec); break;
      case LogKind::Compute: compute(rec); break;
      case LogKind::Recompute: recompute(rec); break;
      case LogKind::Access: access(rec); break;
      case LogKind::SwapOut: swap_out(rec); break;
      case LogKind::SwapIn: swap_in(rec); break;
      case LogKind::Evict: evict(rec); break;
      case LogKind::Stall: on_compute_stream(rec, "stall"); break;
      case LogKind::Memory: memory(rec); break;
    }
  }
  return std::move(result_);
}

// --- messages ------------------------------------------------------------------------------
void Auditor::fail(std::uint32_t storage, const std::string& problem) {
  ++result_.violation_count;
  if (result_.violations.size() >= kMaxViolationMessages) return;
  const LogRecord& rec = log_.records[current_];
  const std::string event = index_of(rec.event) == kNoRecord ? std::string("-") : std::to_string(index_of(rec.event));
  if (storage == kNoIndex) {
    result_.violations.push_back(fmt::format("record {}, event {}: {}", current_, event, problem));
  } else {
    result_.violations.push_back(
        fmt::format("record {}, event {}, tensor {}: {}", current_, event, label(storage), problem));
  }
}
std::string Auditor::label(std::uint32_t storage) const {
  return storage < trace_.tensors.size() ? std::to_string(trace_.tensors[storage].file_id)
                                         : fmt::format("#{} (not in the trace)", storage);
}
std::string Auditor::tensor_list(const std::vector<std::uint32_t>& storages) const {
  std::string s;
  for (const std::uint32_t x : storages) s += (s.empty() ? "" : ", ") + label(x);
  return "[" + s + "]";
}

// --- the device ----------------------------------------------------------------------------
// The live block `r` names, or nullptr with the reason in `problem`.
LiveBlock* Auditor::block_of(const LogRef& r, std::string& problem) {
  const auto it = live_.find(r.addr);
  if (it == live_.end()) {
    const auto f = freed_.find(r.addr);
    problem = f != freed_.end() ? fmt::format("the block was freed by record {}", f->second)
                                : std::string("no block is live there");
    return nullptr;
  }
  if (it->second.size != r.size.value) {
    problem = fmt::format("the block there has {} bytes, not {}", it->second.size, r.size.value);
    return nullptr;
  }
  return &it->second;
}
// Why `b` does not hold `want` ("" when it does). `any_life`: only storage and version count.
std::string Auditor::content_problem(const LiveBlock& b, const Content& want, bool any_life) const {
  if (!b.content.defined()) {
    return b.evicted_by != kNoRecord ? fmt::format("the block was evicted by record {}", b.evicted_by)
                                     : fmt::format("the block (placed by record {}) holds nothing yet", b.placed_by);
  }
  const Content& c = b.content;
  if (c.storage != want.storage)
    return fmt::format("the block holds tensor {} version {}", label(c.storage), c.version);
  if (!any_life && c.life != want.life) return "the block holds an earlier allocation of the tensor";
  if (c.version != want.version) return fmt::format("the block holds version {}", c.version);
  return {};
}
// Checks that the block of `r` holds `want`; `what` names the step for the message.
void Auditor::check_read(const LogRef& r, const Content& want, const std::string& what) {
  ++result_.reads;
  std::string problem;
  if (const LiveBlock* b = block_of(r, problem); b != nullptr) problem = content_problem(*b, want);
  if (!problem.empty())
    fail(index_of(r.storage), fmt::format("{} reads version {} at {:#x}: {}", what, r.version, r.addr, problem));
}
// Gives the block of `r` the content `c`.
void Auditor::write(const LogRef& r, const Content& c, const std::string& what) {
  std::string problem;
  LiveBlock* b = block_of(r, problem);
  if (b == nullptr) {
    fail(index_of(r.storage), fmt::format("{} writes version {} at {:#x}: {}", what, r.version, r.addr, problem));
    return;
  }
  if (b->size < trace_.tensors[index_of(r.storage)].size.value) {
    fail(index_of(r.storage),
         fmt::format("{} writes version {} at {:#x}: the block has {} bytes, less than the tensor's {}", what,
                     r.version, r.addr, b->size, trace_.tensors[index_of(r.storage)].size.value));
  }
  b->content = c;
  b->evicted_by = kNoRecord;
}

void Auditor::alloc(const LogRecord& rec) {
  const LogRef& r = log_.ref(rec);
  const std::uint32_t s = index_of(r.storage);
  if (r.size.value < trace_.tensors[s].size.value) {
    fail(s, fmt::format("block of {} bytes at {:#x} is smaller than the tensor's {} bytes", r.size.value, r.addr,
                        trace_.tensors[s].size.value));
  }
  const std::uint64_t end = r.addr + r.size.value;
  auto next = live_.lower_bound(r.addr);
  if (next != live_.end() && next->first == r.addr) {
    fail(s,
         fmt::format("block at {:#x} is placed where the block of tensor {} (record {}) is still live", r.addr,
                     label(index_of(log_.ref(log_.records[next->second.placed_by]).storage)), next->second.placed_by));
    return;
  }
  if (log_.address_aware) {
    if (next != live_.end() && next->first < end) overlap(r, *next);
    if (next != live_.begin()) {
      const auto prev = std::prev(next);
      if (prev->first + prev->second.size > r.addr) overlap(r, *prev);
    }
  }
  LiveBlock b;
  b.size = r.size.value;
  b.placed_by = current_;
  b.fresh = rec.fresh;
  if (rec.fresh) {
    ++life_[s];
    version_[s] = 0;
    state_[s] = lifetime_state_[s];
    b.content = Content{s, life_[s], 0};
  }
  live_.emplace(r.addr, b);
  freed_.erase(r.addr);
  live_bytes_ += b.size;
  if (live_bytes_ > log_.budget.value && !over_budget_) {
    fail(s, fmt::format("live blocks hold {} bytes after this allocation, over the budget of {}", live_bytes_,
                        log_.budget.value));
  }
  over_budget_ = live_bytes_ > log_.budget.value;
}
void Auditor::overlap(const LogRef& r, const std::pair<const std::uint64_t, LiveBlock>& other) {
  const std::uint32_t owner = index_of(log_.ref(log_.records[other.second.placed_by]).storage);
  fail(index_of(r.storage),
       fmt::format("block [{:#x}, {:#x}) overlaps the live block [{:#x}, {:#x}) of tensor {} (record {})", r.addr,
                   r.addr + r.size.value, other.first, other.first + other.second.size, label(owner),
                   other.second.placed_by));
}

void Auditor::free(const LogRecord& rec) {
  const LogRef& r = log_.ref(rec);
  const auto it = live_.find(r.addr);
  if (it == live_.end()) {
    const auto f = freed_.find(r.addr);
    fail(index_of(r.storage),
         f != freed_.end() ? fmt::format("frees the block at {:#x} twice (first freed by record {})", r.addr, f->second)
                           : fmt::format("frees {:#x}, where no block is live", r.addr));
    return;
  }
  if (it->second.size != r.size.value) {
    fail(index_of(r.storage),
         fmt::format("frees {} bytes at {:#x}, but the block there has {}", r.size.value, r.addr, it->second.size));
  }
  live_bytes_ -= it->second.size;
  over_budget_ = live_bytes_ > log_.budget.value;
  live_.erase(it);
  freed_[r.addr] = current_;
}

// --- transfers and eviction ----------------------------------------------------------------
void Auditor::swap_out(const LogRecord& rec) {
  const LogRef& r = log_.ref(rec);
  ++result_.reads;
  if (rec.end < rec.start)
    fail(index_of(r.storage),
         fmt::format("swap-out ends at {} ns, before it starts at {} ns", rec.end.count(), rec.start.count()));
  std::string problem;
  const LiveBlock* b = block_of(r, problem);
  if (b != nullptr) problem = content_problem(*b, Content{index_of(r.storage), 0, r.version}, /*any_life=*/true);
  if (!problem.empty()) {
    fail(index_of(r.storage), fmt::format("swap-out of version {} at {:#x}: {}", r.version, r.addr, problem));
    return;
  }
  auto& copies = host_[index_of(r.storage)];
  std::erase_if(copies, [&](const Content& c) { return c.life == b->content.life && c.version == b->content.version; });
  copies.push_back(b->content);
}

void Auditor::swap_in(const LogRecord& rec) {
  const LogRef& r = log_.ref(rec);
  const std::uint32_t s = index_of(r.storage);
  if (rec.end < rec.start)
    fail(s, fmt::format("swap-in ends at {} ns, before it starts at {} ns", rec.end.count(), rec.start.count()));
  std::string problem;
  LiveBlock* b = block_of(r, problem);
  if (b == nullptr) {
    fail(s, fmt::format("swap-in of version {} into {:#x}: {}", r.version, r.addr, problem));
    return;
  }
  if (b->fresh) {
    fail(s, fmt::format("swap-in of version {} into {:#x}: the block was placed by the trace's allocation (record {})",
                        r.version, r.addr, b->placed_by));
    return;
  }
  const auto& copies = host_[s];
  if (copies.empty()) {
    fail(s, fmt::format("swap-in of version {}: no swap-out of the tensor came before it", r.version));
    return;
  }
  // The current lifetime's copy of that version, else the latest older one.
  const Content* h = nullptr;
  for (auto it = copies.rbegin(); it != copies.rend(); ++it) {
    if (it->version != r.version) continue;
    if (h == nullptr || it->life == life_[s]) h = &*it;
    if (it->life == life_[s]) break;
  }
  if (h == nullptr) {
    fail(s,
         fmt::format("swap-in of version {}, but the host copies hold version {}", r.version, copies.back().version));
    return;
  }
  b->content = *h;
  b->evicted_by = kNoRecord;
}

void Auditor::evict(const LogRecord& rec) {
  const LogRef& r = log_.ref(rec);
  std::string problem;
  LiveBlock* b = block_of(r, problem);
  if (b != nullptr) problem = content_problem(*b, Content{index_of(r.storage), 0, r.version}, /*any_life=*/true);
  if (!problem.empty()) {
    fail(index_of(r.storage), fmt::format("eviction of version {} at {:#x}: {}", r.version, r.addr, problem));
    return;
  }
  b->content = Content{};
  b->evicted_by = current_;
}

void Auditor::memory(const LogRecord& rec) {
  if (rec.allocated > rec.reserved) {
    fail(kNoIndex, fmt::format("allocated {} bytes exceed reserved {}", rec.allocated.value, rec.reserved.value));
  }
  if (rec.reserved > log_.budget)
    fail(kNoIndex, fmt::format("reserved {} bytes exceed the budget of {}", rec.reserved.value, log_.budget.value));
}

}  // namespace check_detail

AuditResult audit_runlog(const Trace& trace, const RunLog& log) { return check_detail::Auditor(trace, log).run(); }

}  // namespace coopsim
