// Private to src/audit: the auditor's state and steps (audit_runlog.cpp: the record
// loop, the device model, allocation, transfers; audit_ops.cpp: the compute stream, ops,
// recomputes and accesses). The rules are listed in include/coopsim/audit/audit.hpp.
#pragma once

#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "coopsim/audit/audit.hpp"

namespace coopsim::check_detail {

// One content: a version of a storage in one of its lifetimes (the auditor counts the
// trace's allocations of each storage, so contents of different lifetimes never compare equal).
struct Content {
  std::uint32_t storage = kNoIndex;
  std::uint32_t life = 0;
  std::uint32_t version = 0;
  [[nodiscard]] bool defined() const { return storage != kNoIndex; }
};

struct LiveBlock {
  std::uint64_t size = 0;
  Content content;
  std::uint32_t placed_by = 0;           // its Alloc record
  std::uint32_t evicted_by = kNoRecord;  // the Evict record that emptied it, if any
  bool fresh = false;                    // placed by the trace's allocation
};

std::vector<std::uint32_t> sorted_unique(std::vector<std::uint32_t> v);

class Auditor {
 public:
  Auditor(const Trace& trace, const RunLog& log)
      : trace_(trace),
        log_(log),
        life_(trace.tensors.size(), 0),
        version_(trace.tensors.size(), 0),
        host_(trace.tensors.size()),
        ref_life_(log.refs.size(), 0),
        state_(find_state(trace)),
        lifetime_state_(state_) {
    for (std::uint32_t e = 0; e < trace.events.size(); ++e) {
      if (trace.events[e].kind == EventKind::Compute) compute_events_.push_back(e);
    }
  }

  AuditResult run();

 private:
  void fail(std::uint32_t storage, const std::string& problem);
  [[nodiscard]] std::string label(std::uint32_t storage) const;
  [[nodiscard]] std::string tensor_list(const std::vector<std::uint32_t>& storages) const;
  LiveBlock* block_of(const LogRef& r, std::string& problem);
  [[nodiscard]] std::string content_problem(const LiveBlock& b, const Content& want, bool any_life = false) const;
  void check_read(const LogRef& r, const Content& want, const std::string& what);
  void write(const LogRef& r, const Content& c, const std::string& what);
  void alloc(const LogRecord& rec);
  void overlap(const LogRef& r, const std::pair<const std::uint64_t, LiveBlock>& other);
  void free(const LogRecord& rec);
  void on_compute_stream(const LogRecord& rec, const std::string& what);
  void follow_trace(const LogRecord& rec, const OpInfo& op);
  [[nodiscard]] std::vector<std::uint32_t> storages(const LogRecord& rec, std::uint32_t from, std::uint32_t n) const;
  bool refs_known(const LogRecord& rec);
  void compute(const LogRecord& rec);
  // Per storage: state from the start, which keeps no history (see audit.hpp).
  static std::vector<bool> find_state(const Trace& trace);
  // Storages that become state once `op` has run.
  [[nodiscard]] std::vector<std::uint32_t> state_from(const OpInfo& op) const;
  void recompute(const LogRecord& rec);
  void access(const LogRecord& rec);
  void swap_out(const LogRecord& rec);
  void swap_in(const LogRecord& rec);
  void evict(const LogRecord& rec);
  void memory(const LogRecord& rec);

  const Trace& trace_;
  const RunLog& log_;
  AuditResult result_;
  std::uint32_t current_ = 0;
  std::map<std::uint64_t, LiveBlock> live_;                 // by address
  std::unordered_map<std::uint64_t, std::uint32_t> freed_;  // address -> Free record (lookups only)
  std::uint64_t live_bytes_ = 0;
  bool over_budget_ = false;
  std::vector<std::uint32_t> life_, version_;  // per storage: current lifetime and version
  // per storage: its host copies. A recompute policy may keep a value's host copy after the
  // trace has written or freed the storage (for evicted values that need it), so copies of
  // several versions and lifetimes can coexist; a swap-in names a version, and its lifetime is
  // checked when the value is read.
  std::vector<std::vector<Content>> host_;
  std::vector<std::uint32_t> ref_life_;        // per ref of a Compute record: the lifetime it saw
  std::vector<bool> state_;                    // per storage: state (no history)
  // per storage: state for a whole lifetime (roles, accumulated gradients). What state_from()
  // adds, an input updated in place by an op with outputs of its own, ends with the lifetime.
  std::vector<bool> lifetime_state_;
  std::vector<std::uint32_t> compute_events_;
  std::size_t next_compute_ = 0;
  SimTime stream_end_{0};
};

}  // namespace coopsim::check_detail
