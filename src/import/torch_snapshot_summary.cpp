// Snapshot summaries as PyTorch's viewer prints them (coopsim/import/torch_snapshot_summary.hpp).
// Layout and arithmetic of segsum from torch 2.x torch/cuda/_memory_viz.py (segsum,
// _report_free, _format_size, _block_extra: PAGE_SIZE 20 MiB; segments sorted by total size,
// then active bytes; a page shows the letter of the one active block filling it, a digit for the
// tenths filled by several, ' ' when empty, '*' when full). stats: torch 1.13's stats().
#include "coopsim/import/torch_snapshot_summary.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string_view>
#include <vector>

#include "coopsim/base/error.hpp"
#include "coopsim/formats/pickle_stream.hpp"

namespace coopsim::torch_snapshot {
namespace {

using pickle::Value;
using Kind = Value::Kind;

constexpr std::uint64_t kPage = std::uint64_t{20} << 20;

// Counts the history's entries by action and lets them go.
class ActionCounter : public pickle::ItemSink {
 public:
  bool take(const pickle::ValuePtr& /*list*/, const Value& item) override {
    const Value* action = item.get("action");
    if (action == nullptr || action->kind != Kind::String) return false;
    ++actions[action->text];
    return true;
  }
  // The same for a batch of flat dicts, all or none: each needs an "action" that is a str.
  bool take_flat(const pickle::ValuePtr& /*list*/, std::span<const pickle::FlatValue> items,
                 std::span<const std::uint8_t> sizes) override {
    batch_.clear();
    std::size_t at = 0;
    for (const std::uint8_t pairs : sizes) {
      const Value* action = nullptr;
      for (std::size_t p = 0; p < pairs; ++p, at += 2) {
        if (action == nullptr && (*items[at].ref)->text == "action") {
          const pickle::FlatValue& v = items[at + 1];
          if (v.ref == nullptr || (*v.ref)->kind != Kind::String) return false;
          action = v.ref->get();
        }
      }
      if (action == nullptr) return false;
      batch_.push_back(action);
    }
    // Most entries share their action's str object (the memo): counted by object first.
    const Value* last = nullptr;
    std::uint64_t* count = nullptr;
    for (const Value* action : batch_) {
      if (action != last) {
        count = &actions[action->text];
        last = action;
      }
      ++*count;
    }
    return true;
  }
  std::map<std::string, std::uint64_t> actions;

 private:
  std::vector<const Value*> batch_;
};

struct SummaryReader {
  const std::string& path;
  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    throw Error(fmt::format("{}: {}: {}", path, key, problem));
  }
  const Value& field(const Value& dict, std::string_view name, const std::string& key) const {
    const Value* v = dict.get(name);
    if (v == nullptr) fail(key, fmt::format("missing field '{}'", name));
    return *v;
  }
  std::uint64_t uint(const Value& dict, std::string_view name, const std::string& key) const {
    const Value& v = field(dict, name, key);
    if (v.kind != Kind::Int || v.integer < 0) fail(key + "." + std::string(name), "expected a non-negative int");
    return static_cast<std::uint64_t>(v.integer);
  }
  const std::string& text(const Value& dict, std::string_view name, const std::string& key) const {
    const Value& v = field(dict, name, key);
    if (v.kind != Kind::String) fail(key + "." + std::string(name), "expected a str");
    return v.text;
  }
  const Value& list(const Value& v, const std::string& key) const {
    if (v.kind != Kind::List && v.kind != Kind::Tuple) fail(key, "expected a list");
    return v;
  }
  // The snapshot's segments: the dict's "segments", or the whole list of a torch 1.13 snapshot.
  const Value& segments(const Value& root) const {
    if (root.kind == Kind::List) return root;
    if (root.kind != Kind::Dict) fail("top level", "expected the snapshot dict or a list of segments");
    return list(field(root, "segments", "top level"), "segments");
  }
};

pickle::ValuePtr read(const std::string& path, const Limits& limits, pickle::ItemSink& sink) {
  MemoryCap memory(limits.max_memory);
  return pickle::stream_file(path, limits.max_input_bytes, memory, sink);
}

// Python's _format_size: "%3.1f" of the value in the largest unit under 1024.
std::string format_size(double num) {
  for (const char* unit : {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi"}) {
    if (std::fabs(num) < 1024.0) return fmt::format("{:3.1f}{}B", num, unit);
    num /= 1024.0;
  }
  return fmt::format("{:.1f}YiB", num);
}

std::string report_free(std::uint64_t external, std::uint64_t internal) {
  const std::uint64_t total = external + internal;
  std::string suffix;
  if (total != 0) {
    suffix = fmt::format(" ({:.1f}% internal)", static_cast<double>(internal) / static_cast<double>(total) * 100);
  }
  return format_size(static_cast<double>(total)) + suffix;
}

struct Segment {
  const Value* value = nullptr;
  std::size_t index = 0;  // in the file
  std::uint64_t total = 0, active = 0;
};

}  // namespace

std::string segsum_text(const std::string& path, const Limits& limits) {
  ActionCounter sink;
  const pickle::ValuePtr root = read(path, limits, sink);
  const SummaryReader r{path};
  const Value& segs = r.segments(*root);
  std::vector<Segment> order;
  for (std::size_t i = 0; i < segs.items.size(); ++i) {
    const std::string key = fmt::format("segments[{}]", i);
    const Value& g = *segs.items[i];
    if (g.kind != Kind::Dict) r.fail(key, "expected a dict");
    Segment s{&g, i, r.uint(g, "total_size", key), 0};
    for (const auto& b : r.list(r.field(g, "blocks", key), key + ".blocks").items) {
      if (b->kind != Kind::Dict) r.fail(key + ".blocks", "expected dicts");
      if (r.text(*b, "state", key + ".blocks") == "active_allocated") s.active += r.uint(*b, "size", key + ".blocks");
    }
    order.push_back(s);
  }
  std::stable_sort(order.begin(), order.end(), [](const Segment& a, const Segment& b) {
    return a.total != b.total ? a.total < b.total : a.active < b.active;
  });
  std::string out = fmt::format("Summary of segments >= {} in size\n", format_size(static_cast<double>(kPage)));
  std::uint64_t reserved = 0, allocated = 0, free_external = 0, free_internal = 0;
  for (const Segment& s : order) {
    const Value& g = *s.value;
    const std::string key = fmt::format("segments[{}]", s.index);
    reserved += s.total;
    std::uint64_t seg_external = 0, seg_internal = 0, seg_allocated = 0, offset = 0;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;  // active blocks: offset, requested
    for (const auto& b : r.field(g, "blocks", key).items) {
      const std::uint64_t size = r.uint(*b, "size", key + ".blocks");
      if (r.text(*b, "state", key + ".blocks") == "active_allocated") {
        // _block_extra: requested_size when the block has frames, else the first history
        // entry's real_size, else requested_size, else the block size.
        std::uint64_t requested = size;
        if (b->get("frames") != nullptr) {
          requested = r.uint(*b, "requested_size", key + ".blocks");
        } else if (const Value* h = b->get("history"); h != nullptr && !h->items.empty()) {
          requested = r.uint(*h->items[0], "real_size", key + ".blocks.history[0]");
        } else if (b->get("requested_size") != nullptr) {
          requested = r.uint(*b, "requested_size", key + ".blocks");
        }
        if (requested > size) r.fail(key + ".blocks", "requested_size exceeds the block size");
        ranges.emplace_back(offset, requested);
        seg_allocated += requested;
        seg_internal += size - requested;
      } else {
        seg_external += size;
      }
      offset += size;
    }
    if (seg_external + seg_internal + seg_allocated != s.total) {
      r.fail(key, fmt::format("segment size mismatch: {} + {} + {} != {}", seg_external, seg_internal, seg_allocated,
                              s.total));
    }
    allocated += seg_allocated;
    free_external += seg_external;
    free_internal += seg_internal;
    const std::uint64_t pages = (s.total - 1) / kPage + 1;
    std::string body(pages, ' ');
    std::vector<double> filled(pages, 0.0);
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      const auto [start, size] = ranges[i];
      const std::uint64_t finish = start + size;
      const char letter = static_cast<char>('a' + i % 26);
      for (std::uint64_t j = start / kPage; j < (finish + kPage - 1) / kPage && j < pages; ++j) {
        const std::uint64_t from = std::max(start, j * kPage), to = std::min(finish, (j + 1) * kPage);
        filled[j] += static_cast<double>(to - from) / static_cast<double>(kPage);
        body[j] = body[j] != ' ' ? "0123456789*"[std::min(10, static_cast<int>(filled[j] * 10))] : letter;
      }
    }
    const std::uint64_t stream = r.uint(g, "stream", key);
    if (s.total >= kPage) {
      out += fmt::format("[{}] {} allocated, {} free{}\n", body, format_size(static_cast<double>(s.total)),
                         report_free(seg_external, seg_internal),
                         stream != 0 ? fmt::format(" stream_{}", stream) : std::string());
    }
  }
  out += fmt::format("segments: {}\n", segs.items.size());
  out += fmt::format("total_reserved: {}\n", format_size(static_cast<double>(reserved)));
  out += fmt::format("total_allocated: {}\n", format_size(static_cast<double>(allocated)));
  out += fmt::format("total_free: {}\n", report_free(free_external, free_internal));
  out +=
      "\nLegend:\n"
      "    [a     ] - a segment in the allocator\n"
      "     ^-- a page 20.0MiB of memory in the segment\n"
      "    a-z: pages filled with a single block's content\n"
      "    ' ': page is completely free\n"
      "    *: page if completely full with multiple blocks\n"
      "    0-9: page is partially full with tensors of multiple blocks (9 == 90% full)\n"
      "    (X% internal) - of the free memory, X% is free because we rounded the size of the allocation.\n";
  return out;
}

SnapshotStats snapshot_stats(const std::string& path, const Limits& limits) {
  ActionCounter sink;
  const pickle::ValuePtr root = read(path, limits, sink);
  const SummaryReader r{path};
  const Value& segs = r.segments(*root);
  SnapshotStats s;
  s.segments = segs.items.size();
  for (std::size_t i = 0; i < segs.items.size(); ++i) {
    const std::string key = fmt::format("segments[{}]", i);
    const Value& g = *segs.items[i];
    if (g.kind != Kind::Dict) r.fail(key, "expected a dict");
    std::uint64_t total = 0;
    for (const auto& b : r.list(r.field(g, "blocks", key), key + ".blocks").items) {
      if (b->kind != Kind::Dict) r.fail(key + ".blocks", "expected dicts");
      const std::uint64_t size = r.uint(*b, "size", key + ".blocks");
      total += size;
      s.block_states[r.text(*b, "state", key + ".blocks")] += size;
    }
    if (total != r.uint(g, "total_size", key)) r.fail(key, "its blocks do not add up to total_size");
    s.total_size += total;
  }
  s.actions = sink.actions;
  for (const auto& [action, n] : s.actions) s.entries += n;
  if (root->kind == Kind::Dict) {
    if (const Value* traces = root->get("device_traces"); traces != nullptr)
      s.devices = r.list(*traces, "device_traces").items.size();
  }
  return s;
}

std::string stats_text(const SnapshotStats& s) {
  auto size = [](std::uint64_t b) { return fmt::format("{} ({} bytes)", format_size(static_cast<double>(b)), b); };
  std::string out = fmt::format("segments: {}\ntotal_size: {}\n", s.segments, size(s.total_size));
  for (const auto& [state, bytes] : s.block_states) out += fmt::format("{}: {}\n", state, size(bytes));
  out += fmt::format("devices with a history: {}\nentries: {}\n", s.devices, s.entries);
  for (const auto& [action, n] : s.actions) out += fmt::format("  {}: {}\n", action, n);
  return out;
}

}  // namespace coopsim::torch_snapshot
