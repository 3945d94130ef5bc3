// Reading a snapshot dict (torch.cuda.memory._snapshot(); its entries are the TraceEntry and
// SegmentInfo of pytorch/pytorch @001074d2 c10/cuda/CUDACachingAllocator.h) into the importer's
// Snapshot, for one device. Every field the importer relies on is checked here, so the later
// stages work on plain, valid data.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "coopsim/base/error.hpp"
#include "coopsim/base/text.hpp"
#include "torch_snapshot_detail.hpp"

namespace coopsim::torch_snapshot::detail {
namespace {

using Kind = pickle::Value::Kind;

class Reader {
 public:
  Reader(const std::string& path, int device, MemoryCap& memory, EntryReader& entries, EntrySink* sink)
      : path_(path), device_(device), memory_(memory), entries_(entries), sink_(sink) {}

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    throw Error(fmt::format("{}: {}: {}", path_, key, problem));
  }

  const pickle::Value& field(const pickle::Value& dict, std::string_view name, const std::string& key) const {
    const pickle::Value* v = dict.get(name);
    if (v == nullptr) fail(key, fmt::format("missing field '{}'", name));
    return *v;
  }
  std::uint64_t uint(const pickle::Value& v, const std::string& key) const {
    if (v.kind == Kind::Bool || v.kind != Kind::Int || v.integer < 0) {
      fail(key, fmt::format("expected a non-negative int (got {})", describe(v)));
    }
    return static_cast<std::uint64_t>(v.integer);
  }
  std::uint64_t uint_field(const pickle::Value& dict, std::string_view name, const std::string& key) const {
    return uint(field(dict, name, key), key + "." + std::string(name));
  }
  // A size in bytes: trace v1 holds at most 2^53 bytes per tensor (so do real GPUs per segment).
  std::uint64_t bytes(const pickle::Value& v, const std::string& key) const {
    const std::uint64_t b = uint(v, key);
    if (b > kMaxBytes) fail(key, fmt::format("{} bytes is more than 2^53", b));
    return b;
  }
  std::uint64_t bytes_field(const pickle::Value& dict, std::string_view name, const std::string& key) const {
    return bytes(field(dict, name, key), key + "." + std::string(name));
  }
  // A wall-clock time in microseconds, small enough to be converted to int64 nanoseconds.
  std::int64_t time_us(const pickle::Value& v, const std::string& key) const {
    if (v.kind != Kind::Int || v.integer < 0 || v.integer > kMaxTimeUs) {
      fail(key, fmt::format("expected a non-negative int of at most {} (got {})", kMaxTimeUs, describe(v)));
    }
    return v.integer;
  }
  static constexpr std::uint64_t kMaxBytes = std::uint64_t{1} << 53;
  static constexpr std::int64_t kMaxTimeUs = std::numeric_limits<std::int64_t>::max() / 1000;
  const std::string& text_field(const pickle::Value& dict, std::string_view name, const std::string& key) const {
    const pickle::Value& v = field(dict, name, key);
    if (v.kind != Kind::String)
      fail(key + "." + std::string(name), fmt::format("expected a str (got {})", describe(v)));
    return v.text;
  }
  const pickle::Value& list(const pickle::Value& v, const std::string& key) const {
    if (v.kind != Kind::List && v.kind != Kind::Tuple) fail(key, fmt::format("expected a list (got {})", describe(v)));
    return v;
  }

  // Counts `bytes` more in limits.max_memory, or fails naming `key`.
  void hold(std::uint64_t bytes, const std::string& key) {
    if (!memory_.add(bytes)) fail(key, memory_.problem());
  }
  template <class T>
  void room_to_append(const std::vector<T>& v, const std::string& key) {
    if (!memory_.fits_append(v)) fail(key, memory_.problem());
  }

  Snapshot run(const pickle::Value& root) {
    if (root.kind != Kind::Dict) fail("top level", fmt::format("expected the snapshot dict (got {})", describe(root)));
    Snapshot s;
    s.path = path_;
    s.device = device_;
    if (device_ < 0) fail("--device", fmt::format("must be a device index >= 0 (got {})", device_));
    read_segments(root, s);
    read_trace(root, s);
    if (const pickle::Value* settings = root.get("allocator_settings"); settings != nullptr) {
      if (settings->kind != Kind::Dict)
        fail("allocator_settings", fmt::format("expected a dict (got {})", describe(*settings)));
      // The header keeps a tree: a pickle's shared references would be copied at every use.
      const std::uint64_t values = expanded_values(*settings);
      if (values > kMaxSettingsValues) {
        fail("allocator_settings", fmt::format("more than {} values once its shared references are expanded "
                                               "(the trace header copies them); refusing",
                                               kMaxSettingsValues));
      }
      // Kept twice in the header (source and extra).
      hold(2 * values * (memory_cost::kJsonMember + memory_cost::kJsonValue), "allocator_settings");
      s.allocator_settings = to_json(*settings);
    }
    if (const pickle::Value* ann = root.get("external_annotations"); ann != nullptr) read_annotations(*ann, s);
    s.names = entries_.take_names();  // after the entries and blocks: their numbers
    return s;
  }

 private:
  void read_segments(const pickle::Value& root, Snapshot& s) {
    const pickle::Value& segs = list(field(root, "segments", "top level"), "segments");
    for (std::size_t i = 0; i < segs.items.size(); ++i) {
      const std::string key = fmt::format("segments[{}]", i);
      const pickle::Value& g = *segs.items[i];
      if (g.kind != Kind::Dict) fail(key, fmt::format("expected a dict (got {})", describe(g)));
      // Files written for one device only may leave out `device`.
      const pickle::Value* dev = g.get("device");
      if (dev != nullptr && uint(*dev, key + ".device") != static_cast<std::uint64_t>(device_)) continue;
      room_to_append(s.segments, key);
      hold(sizeof(SnapSegment), key);
      SnapSegment seg;
      seg.addr = uint_field(g, "address", key);
      seg.size = bytes_field(g, "total_size", key);
      seg.stream = uint_field(g, "stream", key);
      const std::string& type = text_field(g, "segment_type", key);
      if (type == "small") {
        seg.pool = SegmentPool::Small;
      } else if (type == "large") {
        seg.pool = SegmentPool::Large;
      } else {
        fail(key + ".segment_type", fmt::format("expected 'small' or 'large' (got {})", quote_excerpt(type)));
      }
      if (const pickle::Value* e = g.get("is_expandable"); e != nullptr) {
        if (e->kind != Kind::Bool) fail(key + ".is_expandable", fmt::format("expected a bool (got {})", describe(*e)));
        seg.expandable = e->boolean;
      }
      if (seg.size == 0) fail(key + ".total_size", "a segment cannot be empty");
      if (seg.addr > ~std::uint64_t{0} - seg.size) fail(key, "extends past the end of the 64-bit address space");
      const pickle::Value& blocks = list(field(g, "blocks", key), key + ".blocks");
      std::uint64_t at = seg.addr;
      for (std::size_t j = 0; j < blocks.items.size(); ++j) {
        room_to_append(seg.blocks, key);
        seg.blocks.push_back(read_block(*blocks.items[j], fmt::format("{}.blocks[{}]", key, j)));
        const SnapBlock& b = seg.blocks.back();
        if (b.addr != at) {
          fail(fmt::format("{}.blocks[{}]", key, j),
               fmt::format("starts at {:#x}, where the previous block ends at {:#x}", b.addr, at));
        }
        if (b.size > seg.addr + seg.size - at) {
          fail(fmt::format("{}.blocks[{}]", key, j),
               fmt::format("runs past the end of its segment at {:#x}", seg.addr + seg.size));
        }
        at += b.size;
      }
      if (at != seg.addr + seg.size) {
        fail(key, fmt::format("blocks cover {} of its {} bytes", at - seg.addr, seg.size));
      }
      s.segments.push_back(std::move(seg));
    }
    std::sort(s.segments.begin(), s.segments.end(),
              [](const SnapSegment& a, const SnapSegment& b) { return a.addr < b.addr; });
    for (std::size_t i = 1; i < s.segments.size(); ++i) {
      const SnapSegment& a = s.segments[i - 1];
      if (a.addr + a.size > s.segments[i].addr) {
        fail("segments", fmt::format("segment {:#x} overlaps segment {:#x}", a.addr, s.segments[i].addr));
      }
    }
  }

  SnapBlock read_block(const pickle::Value& v, const std::string& key) {
    if (v.kind != Kind::Dict) fail(key, fmt::format("expected a dict (got {})", describe(v)));
    SnapBlock b;
    b.addr = uint_field(v, "address", key);
    b.size = bytes_field(v, "size", key);
    if (b.size == 0) fail(key + ".size", "a block cannot be empty");
    const std::string& state = text_field(v, "state", key);
    if (state == "active_allocated") {
      b.state = BlockState::Allocated;
    } else if (state == "active_awaiting_free") {
      b.state = BlockState::AwaitingFree;
    } else if (state == "inactive") {
      b.state = BlockState::Inactive;
    } else {
      fail(key + ".state", fmt::format("expected 'active_allocated', 'active_awaiting_free' or 'inactive' (got {})",
                                       quote_excerpt(state)));
    }
    // Files before torch 2.1 have no requested_size: the block size is the best one can say.
    const pickle::Value* req = v.get("requested_size");
    b.requested = req != nullptr ? bytes(*req, key + ".requested_size") : b.size;
    if (b.active() && (b.requested == 0 || b.requested > b.size)) {
      fail(key + ".requested_size", fmt::format("{} does not fit its block of {} bytes", b.requested, b.size));
    }
    if (!b.active()) b.requested = 0;
    b.name = entries_.names()[entries_.name_of(member(v, "frames"))];
    hold(kBlockBytes + 3 * memory_cost::text(b.name.size()), key);
    return b;
  }

  // The entries of a device's list: its items, and the taken ones it leaves out at its end.
  std::size_t entries_in(const pickle::Value& trace) const {
    if (trace.kind != Kind::List) return 0;
    const Entries* taken = sink_ != nullptr ? sink_->entries_of(&trace) : nullptr;
    if (taken == nullptr) return trace.items.size();
    const auto placeholders =
        static_cast<std::size_t>(std::count(trace.items.begin(), trace.items.end(), pickle::taken()));
    return trace.items.size() + taken->size() - placeholders;
  }

  void read_trace(const pickle::Value& root, Snapshot& s) {
    const pickle::Value& traces = list(field(root, "device_traces", "top level"), "device_traces");
    s.devices = traces.items.size();
    if (static_cast<std::size_t>(device_) >= s.devices) {
      if (s.devices == 0 && device_ == 0) return;  // a state-only snapshot
      std::string listing;
      for (std::size_t d = 0; d < s.devices; ++d) {
        const pickle::Value& tr = *traces.items[d];
        listing += fmt::format("{}{}: {} entries", d == 0 ? "" : ", ", d, entries_in(tr));
      }
      fail("device_traces", fmt::format("the snapshot records {} device(s) ({}); device {} is not one of them "
                                        "(--device N picks one)",
                                        s.devices, listing, device_));
    }
    const std::string base = fmt::format("device_traces[{}]", device_);
    const pickle::Value& entries = list(*traces.items[static_cast<std::size_t>(device_)], base);
    Entries* taken = sink_ != nullptr ? sink_->entries_of(&entries) : nullptr;
    if (taken != nullptr && entries.items.empty()) {
      // Every entry was taken while the pickle streamed (the usual case): already counted.
      s.entries = std::move(*taken);
      for (std::size_t i = 0; i < s.entries.size(); ++i) s.entries[i].index = static_cast<std::uint32_t>(i);
    } else {
      std::size_t next_taken = 0;
      for (std::size_t i = 0; i < entries.items.size(); ++i) {
        const pickle::ValuePtr& e = entries.items[i];
        if (e == pickle::taken() && taken != nullptr && next_taken < taken->size()) {
          Entry en = std::move((*taken)[next_taken++]);
          en.index = static_cast<std::uint32_t>(i);  // below 2^32: keep() counted as many
          s.entries.push_back(std::move(en));
          continue;
        }
        entries_.keep(s.entries, entries_.read(*e, base, i), base, i);
      }
      // The taken entries the list leaves out at its end.
      for (std::size_t i = entries.items.size(); taken != nullptr && next_taken < taken->size(); ++i) {
        Entry en = std::move((*taken)[next_taken++]);
        en.index = static_cast<std::uint32_t>(i);
        s.entries.push_back(std::move(en));
      }
    }
    s.has_time = !s.entries.empty();
    for (const Entry& en : s.entries) s.has_time = s.has_time && en.time_us >= 0;
  }

  void read_annotations(const pickle::Value& v, Snapshot& s) {
    const pickle::Value& anns = list(v, "external_annotations");
    for (std::size_t i = 0; i < anns.items.size(); ++i) {
      const std::string key = fmt::format("external_annotations[{}]", i);
      const pickle::Value& a = *anns.items[i];
      if (a.kind != Kind::Dict) fail(key, fmt::format("expected a dict (got {})", describe(a)));
      if (const pickle::Value* dev = a.get("device");
          dev != nullptr && dev->kind == Kind::Int && dev->integer != device_) {
        continue;
      }
      Annotation an;
      // Labels of mark events: UTF-8 in a trace (a Python str may hold lone surrogates).
      an.stage = to_utf8(text_field(a, "stage", key));
      an.name = to_utf8(text_field(a, "name", key));
      if (const pickle::Value* t = a.get("time_us"); t != nullptr) an.time_us = time_us(*t, key + ".time_us");
      // The annotation, its mark event and its label (twice: the trace and the builder's index).
      room_to_append(s.annotations, key);
      hold(sizeof(Annotation) + 2 * sizeof(TraceEvent) + 3 * memory_cost::label(an.stage + an.name), key);
      s.annotations.push_back(std::move(an));
    }
  }

  const std::string& path_;
  int device_;
  MemoryCap& memory_;
  EntryReader& entries_;
  EntrySink* sink_;
};

}  // namespace

Snapshot read_snapshot(const pickle::Value& root, const std::string& path, int device, MemoryCap& memory,
                       EntryReader& entries, EntrySink* sink) {
  return Reader(path, device, memory, entries, sink).run(root);
}

std::uint64_t expanded_values(const pickle::Value& root) {
  // Post-order over the distinct values with an explicit stack (nesting may reach
  // pickle::kMaxDepth): a container's count is 1 plus its children's, each child counted as
  // often as it is referenced.
  std::unordered_map<const pickle::Value*, std::uint64_t> count;
  std::vector<std::pair<const pickle::Value*, bool>> work{{&root, false}};
  auto add = [](std::uint64_t a, std::uint64_t b) { return a > ~std::uint64_t{0} - b ? ~std::uint64_t{0} : a + b; };
  while (!work.empty()) {
    const auto [v, children_done] = work.back();
    work.pop_back();
    if (count.contains(v)) continue;
    if (!children_done) {
      work.emplace_back(v, true);
      for (const auto& item : v->items) work.emplace_back(item.get(), false);
      for (const auto& [k, val] : v->entries) {
        work.emplace_back(k.get(), false);
        work.emplace_back(val.get(), false);
      }
      continue;
    }
    std::uint64_t n = 1;
    for (const auto& item : v->items) n = add(n, count.at(item.get()));
    for (const auto& [k, val] : v->entries) n = add(add(n, count.at(k.get())), count.at(val.get()));
    count.emplace(v, n);
  }
  return count.at(&root);
}

nlohmann::json to_json(const pickle::Value& v) {
  switch (v.kind) {
    case Kind::None: return nullptr;
    case Kind::Bool: return v.boolean;
    case Kind::Int: return v.integer;
    case Kind::Float: return std::isfinite(v.real) ? nlohmann::json(v.real) : nlohmann::json();  // JSON has no NaN/inf
    case Kind::String: return to_utf8(v.text);  // JSON text must be UTF-8
    case Kind::Bytes: {
      // Not expected in allocator settings; kept readable as hex.
      std::string hex;
      for (const unsigned char c : v.text) hex += fmt::format("{:02x}", c);
      return hex;
    }
    case Kind::List:
    case Kind::Tuple: {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& item : v.items) out.push_back(to_json(*item));
      return out;
    }
    case Kind::Dict: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& [k, val] : v.entries) {
        out[k->kind == Kind::String ? to_utf8(k->text) : to_json(*k).dump()] = to_json(*val);
      }
      return out;
    }
  }
  return nullptr;
}

}  // namespace coopsim::torch_snapshot::detail
