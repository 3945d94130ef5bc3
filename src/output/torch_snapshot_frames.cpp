// The stack frames of the PyTorch snapshot export (torch_snapshot_frames.hpp).
#include "torch_snapshot_frames.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <unordered_map>

namespace coopsim::snapshot_detail {

SnapshotFrames::SnapshotFrames(const Trace& trace, const RunLog& log) : trace_(trace), log_(log) {
  const std::size_t slash = trace.path.find_last_of('/');
  filename_ = slash == std::string::npos ? trace.path : trace.path.substr(slash + 1);
  if (filename_.empty()) filename_ = "trace";

  // The op that made a storage (first op listing it, or a view of it, as an output) and, for
  // storages no op makes (parameters, inputs), the first op that reads it.
  producer_.assign(trace.tensors.size(), kNoIndex);
  consumer_.assign(trace.tensors.size(), kNoIndex);
  for (std::uint32_t o = 0; o < trace.ops.size(); ++o) {
    for (const TensorId x : trace.ops[o].outputs) {
      auto& p = producer_[index_of(trace.storage_of(x))];
      if (p == kNoIndex) p = o;
    }
    for (const TensorId x : trace.ops[o].inputs) {
      auto& c = consumer_[index_of(trace.storage_of(x))];
      if (c == kNoIndex) c = o;
    }
  }

  // How each block was filled: a fresh Alloc is the trace's allocation; any other one waits for
  // the record that fills it (a swap-in's arrival, a recompute or a copy-on-write op writing it).
  const auto n = static_cast<std::uint32_t>(log.records.size());
  alloc_frames_.assign(n, kNoFrames);
  std::unordered_map<std::uint64_t, std::uint32_t> waiting;  // log address -> non-fresh Alloc record
  auto fill = [&](std::uint64_t addr, Filled how, std::uint32_t op) {
    const auto it = waiting.find(addr);
    if (it == waiting.end()) return;
    alloc_frames_[it->second] = intern(index_of(log.ref(log.records[it->second]).storage), how, op);
    waiting.erase(it);
  };
  for (std::uint32_t i = 0; i < n; ++i) {
    const LogRecord& r = log.records[i];
    switch (r.kind) {
      case LogKind::Alloc:
        if (r.fresh) {
          alloc_frames_[i] = intern(index_of(log.ref(r).storage), Filled::Trace, kNoRecord);
        } else {
          alloc_frames_[i] = intern(index_of(log.ref(r).storage), Filled::Unfilled, kNoRecord);
          waiting[log.ref(r).addr] = i;
        }
        break;
      case LogKind::SwapIn: fill(log.ref(r).addr, Filled::SwapIn, kNoRecord); break;
      case LogKind::Compute:
      case LogKind::Recompute:
        for (std::uint32_t k = 0; k < r.writes; ++k) {
          fill(log.ref(r, r.reads + k).addr, r.kind == LogKind::Recompute ? Filled::Recompute : Filled::Copy,
               index_of(r.op));
        }
        break;
      case LogKind::Free: waiting.erase(log.ref(r).addr); break;
      default: break;
    }
  }
  next_alloc_.assign(std::size_t{n} + 1, kNoRecord);
  for (std::uint32_t i = n; i-- > 0;) next_alloc_[i] = log.records[i].kind == LogKind::Alloc ? i : next_alloc_[i + 1];
}

std::uint32_t SnapshotFrames::of_segment(const LogSegment& s) const {
  const std::uint32_t j = next_alloc_[std::min<std::size_t>(s.before, next_alloc_.size() - 1)];
  return j != kNoRecord && log_.records[j].event == s.event ? alloc_frames_[j] : kNoFrames;
}

std::uint32_t SnapshotFrames::of_request(std::uint64_t file_id) {
  for (std::uint32_t i = 0; i < trace_.tensors.size(); ++i) {
    if (trace_.tensors[i].file_id == file_id) return intern(i, Filled::Trace, kNoRecord);
  }
  return kNoFrames;
}

std::string SnapshotFrames::op_label(std::uint32_t op) const {
  if (op >= trace_.ops.size()) return fmt::format("op #{}", op);
  const OpInfo& o = trace_.ops[op];
  return o.name.empty() ? fmt::format("op {}", o.file_id) : fmt::format("{} (op {})", o.name, o.file_id);
}

std::uint32_t SnapshotFrames::intern(std::uint32_t storage, Filled how, std::uint32_t op) {
  const auto key = std::make_tuple(storage, how, op);
  if (const auto it = ids_.find(key); it != ids_.end()) return it->second;
  List list;
  std::string text;
  if (storage < trace_.tensors.size()) {
    const TensorInfo& t = trace_.tensors[storage];
    list.line = t.file_id;
    text = fmt::format("{} [{}]", t.name.empty() ? fmt::format("tensor {}", t.file_id) : t.name, to_string(t.role));
  } else {
    text = fmt::format("tensor #{} (not in the trace)", storage);
  }
  const std::uint32_t made = storage < producer_.size() ? producer_[storage] : kNoIndex;
  const std::uint32_t read = storage < consumer_.size() ? consumer_[storage] : kNoIndex;
  switch (how) {
    case Filled::Trace:
      if (made != kNoIndex) {
        text += " output of " + op_label(made);
      } else if (read != kNoIndex) {
        text += " input of " + op_label(read);
      }
      break;
    case Filled::SwapIn:
      text += " swap-in";
      if (made != kNoIndex) text += " (output of " + op_label(made) + ")";
      break;
    case Filled::Recompute: text += " recompute of " + op_label(op); break;
    case Filled::Copy: text += " copy-on-write for " + op_label(op); break;
    case Filled::Unfilled: text += " placed for a swap-in or recompute the run did not finish"; break;
  }
  list.name = std::move(text);
  const auto id = static_cast<std::uint32_t>(lists_.size());
  lists_.push_back(std::move(list));
  ids_.emplace(key, id);
  return id;
}

void SnapshotFrames::write(pickle::Writer& w, std::uint32_t id) {
  if (id == kNoFrames) {
    if (empty_memo_ != kNoFrames) {
      w.shared(empty_memo_);
    } else {
      empty_memo_ = w.begin_shared_list();
      w.end();
    }
    return;
  }
  List& l = lists_[id];
  if (l.memo != kNoFrames) {
    w.shared(l.memo);
    return;
  }
  l.memo = w.begin_shared_list();
  w.begin_dict();
  w.text("filename");
  w.text(filename_);
  w.text("line");
  w.integer(static_cast<std::int64_t>(std::min<std::uint64_t>(l.line, std::numeric_limits<std::int64_t>::max())));
  w.text("name");
  w.text(l.name);
  w.end();
  w.end();
}

}  // namespace coopsim::snapshot_detail
