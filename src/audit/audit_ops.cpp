// The auditor's op steps (see auditor.hpp): the compute stream's order and timing,
// trace compute events, recomputes and accesses.
#include <fmt/format.h>

#include <algorithm>

#include "auditor.hpp"

namespace coopsim::check_detail {

// --- the compute stream --------------------------------------------------------------------
void Auditor::on_compute_stream(const LogRecord& rec, const std::string& what) {
  if (rec.end < rec.start) {
    fail(kNoIndex,
         fmt::format("{} ends at {} ns, before it starts at {} ns", what, rec.end.count(), rec.start.count()));
  }
  if (rec.start < stream_end_) {
    fail(kNoIndex, fmt::format("{} starts at {} ns, before the compute stream's previous step ends at {} ns", what,
                               rec.start.count(), stream_end_.count()));
  }
  stream_end_ = std::max(stream_end_, rec.end);
}
// Trace compute events run once each, in trace order.
void Auditor::follow_trace(const LogRecord& rec, const OpInfo& op) {
  const std::uint32_t e = index_of(rec.event);
  if (e >= trace_.events.size() || trace_.events[e].kind != EventKind::Compute ||
      trace_.events[e].compute_op() != rec.op) {
    fail(kNoIndex, fmt::format("compute of op '{}' does not match the trace event", op.name));
    return;
  }
  while (next_compute_ < compute_events_.size() && compute_events_[next_compute_] < e) {
    const std::uint32_t skipped = compute_events_[next_compute_++];
    fail(kNoIndex, fmt::format("trace event {} (compute of op '{}') never ran", skipped,
                               trace_.op(trace_.events[skipped].compute_op()).name));
  }
  if (next_compute_ < compute_events_.size() && compute_events_[next_compute_] == e) {
    ++next_compute_;
  } else {
    fail(kNoIndex, fmt::format("compute of op '{}' runs trace event {} a second time", op.name, e));
  }
}
std::vector<std::uint32_t> Auditor::storages(const LogRecord& rec, std::uint32_t from, std::uint32_t n) const {
  std::vector<std::uint32_t> out;
  for (std::uint32_t k = 0; k < n; ++k) out.push_back(index_of(log_.refs[rec.first + from + k].storage));
  return sorted_unique(std::move(out));
}
bool Auditor::refs_known(const LogRecord& rec) {
  for (std::uint32_t k = 0; k < std::uint32_t{rec.reads} + rec.writes; ++k) {
    if (index_of(log_.refs[rec.first + k].storage) >= trace_.tensors.size()) {
      fail(kNoIndex, fmt::format("names storage index {}, which the trace does not define",
                                 index_of(log_.refs[rec.first + k].storage)));
      return false;
    }
  }
  return true;
}

void Auditor::compute(const LogRecord& rec) {
  if (index_of(rec.op) >= trace_.ops.size()) {
    fail(kNoIndex, fmt::format("compute of op index {}, which the trace does not define", index_of(rec.op)));
    return;
  }
  if (!refs_known(rec)) return;
  const OpInfo& op = trace_.op(rec.op);
  const std::string what = fmt::format("compute of op '{}'", op.name);
  follow_trace(rec, op);
  on_compute_stream(rec, what);
  std::vector<std::uint32_t> inputs, written;
  for (const TensorId x : op.inputs) inputs.push_back(trace_.storage_of(index_of(x)));
  for (const TensorId x : op.outputs) {
    if (!trace_.tensors[index_of(x)].is_view()) written.push_back(index_of(x));
  }
  for (const TensorId x : op.mutated) written.push_back(trace_.storage_of(index_of(x)));
  inputs = sorted_unique(std::move(inputs));
  written = sorted_unique(std::move(written));
  if (const auto read = storages(rec, 0, rec.reads); read != inputs) {
    fail(kNoIndex,
         fmt::format("{} reads tensors {}, but its inputs are {}", what, tensor_list(read), tensor_list(inputs)));
  }
  if (const auto wrote = storages(rec, rec.reads, rec.writes); wrote != written) {
    fail(kNoIndex,
         fmt::format("{} writes tensors {}, but it writes {}", what, tensor_list(wrote), tensor_list(written)));
  }
  for (std::uint32_t k = 0; k < rec.reads; ++k) {
    const LogRef& r = log_.refs[rec.first + k];
    const std::uint32_t s = index_of(r.storage);
    ref_life_[rec.first + k] = life_[s];
    if (r.version != version_[s]) {
      ++result_.reads;
      fail(s, fmt::format("{} reads version {}, but the current version is {}", what, r.version, version_[s]));
      continue;
    }
    check_read(r, Content{s, life_[s], version_[s]}, what);
  }
  for (std::uint32_t k = rec.reads; k < std::uint32_t{rec.reads} + rec.writes; ++k) {
    const LogRef& r = log_.refs[rec.first + k];
    const std::uint32_t s = index_of(r.storage);
    ref_life_[rec.first + k] = life_[s];
    const bool expected = std::binary_search(written.begin(), written.end(), s);
    const std::uint32_t next = expected ? version_[s] + 1 : r.version;
    if (r.version != next) fail(s, fmt::format("{} writes version {}, expected version {}", what, r.version, next));
    write(r, Content{s, life_[s], next}, what);
  }
  for (const std::uint32_t s : written) ++version_[s];
  for (const std::uint32_t s : state_from(op)) state_[s] = true;
}

std::vector<bool> Auditor::find_state(const Trace& trace) {
  std::vector<bool> state(trace.tensors.size(), false);
  auto role = [&](TensorId x) { return trace.tensors[trace.storage_of(index_of(x))].role; };
  for (std::uint32_t s = 0; s < trace.tensors.size(); ++s) {
    const TensorRole r = trace.tensors[s].role;
    state[s] = r == TensorRole::Parameter || r == TensorRole::Input || r == TensorRole::OptimizerState;
  }
  for (const OpInfo& op : trace.ops) {
    const bool updates_state = std::any_of(op.mutated.begin(), op.mutated.end(), [&](TensorId m) {
      return role(m) == TensorRole::Parameter || role(m) == TensorRole::OptimizerState;
    });
    for (const TensorId x : op.inputs) {  // accumulated gradients
      if (updates_state && role(x) == TensorRole::Gradient) state[trace.storage_of(index_of(x))] = true;
    }
  }
  return state;
}

// Inputs an op with outputs of its own updates in place (e.g. BN statistics) are state from that
// op on: before it they are ordinary values, which a recompute of their producer may restore (the
// engine makes them unevictable when the op runs).
std::vector<std::uint32_t> Auditor::state_from(const OpInfo& op) const {
  std::vector<std::uint32_t> out;
  const bool has_outputs = std::any_of(op.outputs.begin(), op.outputs.end(),
                                       [&](TensorId x) { return !trace_.tensors[index_of(x)].is_view(); });
  if (!has_outputs) return out;
  for (const TensorId x : op.mutated) {
    if (std::find(op.outputs.begin(), op.outputs.end(), x) == op.outputs.end()) {
      out.push_back(trace_.storage_of(index_of(x)));
    }
  }
  return out;
}

void Auditor::recompute(const LogRecord& rec) {
  const std::string name =
      index_of(rec.op) < trace_.ops.size() ? trace_.op(rec.op).name : fmt::format("#{}", index_of(rec.op));
  const std::string what = fmt::format("recompute of op '{}'", name);
  const std::uint32_t o = index_of(rec.origin);
  if (o >= current_ || log_.records[o].kind != LogKind::Compute || log_.records[o].op != rec.op) {
    fail(kNoIndex, fmt::format("{} names origin record {}, which is not an earlier compute of the op", what,
                               o == kNoRecord ? std::string("-") : std::to_string(o)));
    return;
  }
  if (!refs_known(rec)) return;
  on_compute_stream(rec, what);
  const LogRecord& origin = log_.records[o];
  // The content the origin read (k < reads) or wrote of storage s, by ref position.
  auto find = [&](std::uint32_t from, std::uint32_t n, std::uint32_t s) -> std::uint32_t {
    for (std::uint32_t k = 0; k < n; ++k) {
      if (index_of(log_.refs[origin.first + from + k].storage) == s) return origin.first + from + k;
    }
    return kNoRecord;
  };
  // State keeps no history: a recompute reads its current version and never writes it.
  auto is_state = [&](std::uint32_t s) { return static_cast<bool>(state_[s]); };
  auto missing = [&](std::uint32_t from, std::uint32_t n, std::uint32_t own_from, std::uint32_t own_n,
                     const char* verb) {
    for (std::uint32_t k = 0; k < n; ++k) {
      const LogRef& x = log_.refs[origin.first + from + k];
      if (verb[0] == 'w' && is_state(index_of(x.storage))) continue;
      // An input the op overwrote before it was ever computed was no value: not read again.
      if (verb[0] == 'r' && x.version == 0 && find(origin.reads, origin.writes, index_of(x.storage)) != kNoRecord)
        continue;
      bool there = false;
      for (std::uint32_t j = 0; j < own_n; ++j)
        there = there || index_of(log_.refs[rec.first + own_from + j].storage) == index_of(x.storage);
      if (!there) {
        fail(index_of(x.storage), fmt::format("{} does not {} version {}, which its origin (record {}) {}", what, verb,
                                              x.version, o, verb[0] == 'r' ? "read" : "wrote"));
      }
    }
  };
  missing(0, origin.reads, 0, rec.reads, "read");
  missing(origin.reads, origin.writes, rec.reads, rec.writes, "write");
  for (std::uint32_t k = 0; k < rec.reads; ++k) {
    const LogRef& r = log_.refs[rec.first + k];
    const std::uint32_t at = find(0, origin.reads, index_of(r.storage));
    if (at != kNoRecord && is_state(index_of(r.storage))) {
      if (r.version != version_[index_of(r.storage)]) {
        ++result_.reads;
        fail(index_of(r.storage), fmt::format("{} reads state version {}, but the current version is {}", what,
                                              r.version, version_[index_of(r.storage)]));
      } else {
        check_read(r, Content{index_of(r.storage), life_[index_of(r.storage)], version_[index_of(r.storage)]}, what);
      }
    } else if (at == kNoRecord) {
      fail(index_of(r.storage),
           fmt::format("{} reads this tensor, which its origin (record {}) did not read", what, o));
    } else if (log_.refs[at].version != r.version) {
      ++result_.reads;
      fail(index_of(r.storage), fmt::format("{} reads version {}, but its origin (record {}) read version {}", what,
                                            r.version, o, log_.refs[at].version));
    } else {
      check_read(r, Content{index_of(r.storage), ref_life_[at], r.version}, what);
    }
  }
  for (std::uint32_t k = rec.reads; k < std::uint32_t{rec.reads} + rec.writes; ++k) {
    const LogRef& r = log_.refs[rec.first + k];
    const std::uint32_t at = find(origin.reads, origin.writes, index_of(r.storage));
    if (is_state(index_of(r.storage))) {
      fail(index_of(r.storage),
           fmt::format("{} writes state (a parameter, input, optimizer state, accumulated gradient or "
                       "statistics), which only trace ops may update",
                       what));
      continue;
    }
    if (at == kNoRecord) {
      fail(index_of(r.storage),
           fmt::format("{} writes this tensor, which its origin (record {}) did not write", what, o));
      continue;
    }
    if (log_.refs[at].version != r.version) {
      fail(index_of(r.storage), fmt::format("{} writes version {}, but its origin (record {}) wrote version {}", what,
                                            r.version, o, log_.refs[at].version));
    }
    write(r, Content{index_of(r.storage), ref_life_[at], log_.refs[at].version}, what);
  }
}

void Auditor::access(const LogRecord& rec) {
  const LogRef& r = log_.ref(rec);
  const std::uint32_t s = index_of(r.storage);
  const std::uint32_t e = index_of(rec.event);
  if (e >= trace_.events.size() || trace_.events[e].kind != EventKind::Access ||
      trace_.storage_of(index_of(trace_.events[e].tensor())) != s) {
    fail(s, "access does not match the trace event");
  }
  on_compute_stream(rec, "access");
  if (r.version != version_[s]) {
    ++result_.reads;
    fail(s, fmt::format("access reads version {}, but the current version is {}", r.version, version_[s]));
    return;
  }
  check_read(r, Content{s, life_[s], version_[s]}, "access");
}

}  // namespace coopsim::check_detail
