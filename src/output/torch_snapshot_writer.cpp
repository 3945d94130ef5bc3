// The run as a PyTorch memory snapshot (the dict torch.cuda.memory._snapshot() returns; schema
// in docs/import-torch-snapshot.md), pickled by src/output/pickle_writer.
//
// Mapping from the event log: each Alloc record (trace allocations, swap-in targets, recompute
// outputs alike: every block the device held) is an `alloc` of the tensor's requested bytes at
// the block's address, on the allocation's stream; each Free a `free_requested` and a
// `free_completed` of the same size. Segments:
//  * Models that report their segments (RunLog::segments_logged: the pytorch model) give the
//    real ones: each logged change is a `segment_alloc` / `segment_free` / `segment_map` /
//    `segment_unmap` entry where it happened among the records, and the final `segments` list is
//    the model's own snapshot at the end (pool, stream, expandable flag, block layout).
//  * For the others segments are derived: every maximal address range that blocks ever covered
//    is one segment, `segment_alloc`ed just before the first allocation inside it and never freed;
//    the final `segments` list shows those ranges with the blocks still live at the end
//    (active_allocated) and the free gaps (inactive).
// An OOM run ends with an `oom` entry. Times: `time_us` = simulated ns / 1000. Frames: one per
// entry and block saying what it holds (torch_snapshot_frames.hpp).
//
// Format "1.13" (TorchSnapshotFormat::Torch113) writes the same end segments in the layout of
// torch 1.13, whose torch.cuda.memory_snapshot() returned a list of segments and no entries.
// Layout taken from: torch 1.13.1's torch/cuda/_memory_viz.py (Debian python3-torch
// 1.13.1+dfsg-4; its stats, segments, memory and compare take the unpickled object as that list
// and read segment `stream`, `address`, `total_size`, `blocks`, block `state`, `size` and, when
// present, `history` entries' `real_size` and `frames`: [{filename, line, name}]); the other keys
// are those torch 1.13's C++ snapshot (torch/csrc/cuda/Module.cpp THCPModule_memorySnapshot,
// torch/csrc/cuda/memory_snapshot.cpp) wrote: segment `device`, `allocated_size`, `active_size`,
// `segment_type` (large | small), history `addr`. torch 2.x's _memory_viz (checked with 2.15.0)
// still reads such a list as {"segments": list}, taking a block's frames and requested bytes from
// history[0]. Here each active block has one history entry (its address, requested bytes and the
// frames the 2.x export gives it); inactive blocks have none.
#include <algorithm>
#include <map>

#include "coopsim/alloc/allocator.hpp"
#include "coopsim/formats/pickle_writer.hpp"
#include "coopsim/output/export.hpp"
#include "torch_snapshot_frames.hpp"

namespace coopsim {

SnapshotAddresses::SnapshotAddresses(const RunLog& log) : log_(log) {
  if (!log.address_aware) {
    blind_.assign(log.records.size(), 0);
    std::uint64_t next = DeviceMemory::kBaseAddress;
    for (std::uint32_t i = 0; i < log.records.size(); ++i) {
      if (log.records[i].kind != LogKind::Alloc) continue;
      blind_[i] = next;
      next += std::max<std::uint64_t>(log.ref(log.records[i]).size.value, 1);
    }
    return;
  }
  std::uint64_t lowest = ~std::uint64_t{0};
  for (const LogRecord& r : log.records) {
    if (r.kind == LogKind::Alloc) lowest = std::min(lowest, log.ref(r).addr);
  }
  if (lowest < (std::uint64_t{1} << 32)) shift_ = DeviceMemory::kBaseAddress;
}

std::uint64_t SnapshotAddresses::of(std::uint32_t record) const {
  return blind_.empty() ? log_.ref(log_.records[record]).addr + shift_ : blind_[record];
}

std::uint64_t SnapshotAddresses::of_address(std::uint64_t addr) const { return addr + shift_; }

namespace {

using snapshot_detail::kNoFrames;
using snapshot_detail::SnapshotFrames;

struct Entry {
  std::string_view action;
  std::uint64_t addr = 0, size = 0;
  std::uint32_t stream = 0;
  std::int64_t time_us = 0;
  std::uint32_t frames = kNoFrames;
  std::uint64_t device_free = 0;  // oom only
};

// One block of the final `segments` list.
struct EndBlock {
  std::uint64_t addr = 0, size = 0, requested = 0;
  bool active = false;
  std::uint32_t frames = kNoFrames;
};

struct EndSegment {
  std::uint64_t addr = 0, size = 0;
  std::uint32_t stream = 0;
  SegmentPool pool = SegmentPool::Large;
  bool expandable = false;
  std::uint32_t frames = kNoFrames;
  std::vector<EndBlock> blocks;
};

struct Live {
  std::uint64_t addr = 0, size = 0, requested = 0;
  std::uint32_t frames = kNoFrames;
};

std::int64_t event_micros(SimTime t) { return t.count() / 1000; }

// Derived segments (models that do not report theirs): the maximal ranges the blocks ever
// covered, each opened by the Alloc record of its lowest record index.
struct DerivedSegment {
  std::uint64_t lo = 0, hi = 0;
  std::uint32_t first_alloc = kNoRecord;
  std::uint16_t stream = 0;
};
std::vector<DerivedSegment> derive_segments(const RunLog& log, const SnapshotAddresses& where) {
  std::vector<std::pair<std::uint64_t, std::uint32_t>> starts;  // (address, Alloc record)
  for (std::uint32_t i = 0; i < log.records.size(); ++i) {
    if (log.records[i].kind == LogKind::Alloc) starts.emplace_back(where.of(i), i);
  }
  std::sort(starts.begin(), starts.end());
  std::vector<DerivedSegment> segments;
  for (const auto& [addr, i] : starts) {
    const std::uint64_t end = addr + std::max<std::uint64_t>(log.ref(log.records[i]).size.value, 1);
    if (segments.empty() || addr > segments.back().hi) segments.push_back({addr, end, i, log.records[i].stream});
    DerivedSegment& s = segments.back();
    s.hi = std::max(s.hi, end);
    if (i < s.first_alloc) {
      s.first_alloc = i;
      s.stream = log.records[i].stream;
    }
  }
  return segments;
}

void write_int(pickle::Writer& w, std::string_view key, std::uint64_t value) {
  w.text(key);
  w.integer(static_cast<std::int64_t>(value));
}

void write_segments(pickle::Writer& w, const std::vector<EndSegment>& segments, SnapshotFrames& frames) {
  w.text("segments");
  w.begin_list();
  for (const EndSegment& s : segments) {
    std::uint64_t allocated = 0, requested = 0;
    for (const EndBlock& b : s.blocks) {
      if (!b.active) continue;
      allocated += b.size;
      requested += b.requested;
    }
    w.begin_dict();
    write_int(w, "device", 0);
    write_int(w, "address", s.addr);
    write_int(w, "total_size", s.size);
    write_int(w, "stream", s.stream);
    write_int(w, "allocated_size", allocated);
    write_int(w, "active_size", allocated);
    write_int(w, "requested_size", requested);
    w.text("segment_type");
    w.text(to_string(s.pool));
    w.text("segment_pool_id");
    w.int_pair(0, 0);
    w.text("is_expandable");
    w.boolean(s.expandable);
    w.text("frames");
    frames.write(w, s.frames);
    w.text("blocks");
    w.begin_list();
    for (const EndBlock& b : s.blocks) {
      w.begin_dict();
      write_int(w, "address", b.addr);
      write_int(w, "size", b.size);
      write_int(w, "requested_size", b.active ? b.requested : 0);
      w.text("state");
      w.text(b.active ? "active_allocated" : "inactive");
      w.text("frames");
      frames.write(w, b.active ? b.frames : kNoFrames);
      w.end();
    }
    w.end();
    w.end();
  }
  w.end();
}

// Format 1.13: the root list of segments.
void write_segments_113(pickle::Writer& w, const std::vector<EndSegment>& segments, SnapshotFrames& frames) {
  w.begin_list();
  for (const EndSegment& s : segments) {
    std::uint64_t allocated = 0;
    for (const EndBlock& b : s.blocks) allocated += b.active ? b.size : 0;
    w.begin_dict();
    write_int(w, "device", 0);
    write_int(w, "address", s.addr);
    write_int(w, "total_size", s.size);
    write_int(w, "allocated_size", allocated);
    write_int(w, "active_size", allocated);
    write_int(w, "stream", s.stream);
    w.text("segment_type");
    w.text(to_string(s.pool));
    w.text("blocks");
    w.begin_list();
    for (const EndBlock& b : s.blocks) {
      w.begin_dict();
      write_int(w, "size", b.size);
      w.text("state");
      w.text(b.active ? "active_allocated" : "inactive");
      if (b.active) {
        w.text("history");
        w.begin_list();
        w.begin_dict();
        write_int(w, "addr", b.addr);
        write_int(w, "real_size", b.requested);
        w.text("frames");
        frames.write(w, b.frames);
        w.end();
        w.end();
      }
      w.end();
    }
    w.end();
    w.end();
  }
  w.end();
}

void write_entries(pickle::Writer& w, const std::vector<Entry>& entries, SnapshotFrames& frames) {
  w.text("device_traces");
  w.begin_list();
  w.begin_list();
  for (const Entry& e : entries) {
    w.begin_dict();
    w.text("action");
    w.text(e.action);
    if (e.action == "oom") {
      write_int(w, "device_free", e.device_free);
    } else {
      write_int(w, "addr", e.addr);
    }
    write_int(w, "size", e.size);
    write_int(w, "stream", e.stream);
    w.text("time_us");
    w.integer(e.time_us);
    w.text("frames");
    frames.write(w, e.frames);
    w.end();
  }
  w.end();
  w.end();
}

}  // namespace

std::optional<TorchSnapshotFormat> parse_torch_snapshot_format(std::string_view name) {
  if (name == "2.x") return TorchSnapshotFormat::Torch2;
  if (name == "1.13") return TorchSnapshotFormat::Torch113;
  return std::nullopt;
}

std::string torch_snapshot_pickle(const Trace& trace, const RunLog& log, const Report& report,
                                  TorchSnapshotFormat format) {
  const SnapshotAddresses where(log);
  SnapshotFrames frames(trace, log);
  auto requested = [&](const LogRef& r) {
    const std::uint64_t want =
        index_of(r.storage) < trace.tensors.size() ? trace.tensors[index_of(r.storage)].size.value : r.size.value;
    return std::clamp<std::uint64_t>(want, 1, std::max<std::uint64_t>(r.size.value, 1));
  };
  const bool real = log.segments_logged && log.address_aware;

  std::vector<DerivedSegment> derived;
  std::map<std::uint32_t, const DerivedSegment*> opens;  // first Alloc record -> its segment
  if (!real) {
    derived = derive_segments(log, where);
    for (const DerivedSegment& s : derived) opens.emplace(s.first_alloc, &s);
  }

  // The history.
  std::vector<Entry> entries;
  std::map<std::uint64_t, std::uint32_t> live_by_log_addr;  // log address -> Alloc record
  std::map<std::uint64_t, Live> live;                       // snapshot address -> block
  std::map<std::uint64_t, std::uint32_t> segment_frames;    // snapshot address -> frames of its segment_alloc
  SimTime last{0};
  std::size_t next_change = 0;
  auto changes_before = [&](std::size_t record) {
    for (; real && next_change < log.segments.size() && log.segments[next_change].before <= record; ++next_change) {
      const LogSegment& s = log.segments[next_change];
      const std::uint64_t addr = where.of_address(s.change.addr);
      const std::uint32_t f = frames.of_segment(s);
      entries.push_back(
          {to_string(s.change.action), addr, s.change.size.value, s.change.stream, event_micros(s.time), f});
      if (s.change.action == SegmentAction::Alloc || s.change.action == SegmentAction::Map) segment_frames[addr] = f;
      last = std::max(last, s.time);
    }
  };
  for (std::uint32_t i = 0; i < log.records.size(); ++i) {
    changes_before(i);
    const LogRecord& r = log.records[i];
    last = std::max({last, r.start, r.end});
    if (r.kind == LogKind::Alloc) {
      const LogRef& ref = log.ref(r);
      if (const auto o = opens.find(i); o != opens.end()) {
        entries.push_back({"segment_alloc", o->second->lo, o->second->hi - o->second->lo, r.stream,
                           event_micros(r.start), frames.of_alloc(i)});
      }
      const std::uint64_t addr = where.of(i);
      entries.push_back({"alloc", addr, requested(ref), r.stream, event_micros(r.start), frames.of_alloc(i)});
      live_by_log_addr[ref.addr] = i;
      live[addr] = Live{addr, ref.size.value, requested(ref), frames.of_alloc(i)};
    } else if (r.kind == LogKind::Free) {
      const auto it = live_by_log_addr.find(log.ref(r).addr);
      if (it == live_by_log_addr.end()) continue;  // not a block of this log (the auditor says so)
      const LogRecord& placed = log.records[it->second];
      const std::uint64_t addr = where.of(it->second);
      const std::uint64_t size = requested(log.ref(placed));
      const std::uint32_t f = frames.of_alloc(it->second);
      entries.push_back({"free_requested", addr, size, placed.stream, event_micros(r.start), f});
      entries.push_back({"free_completed", addr, size, placed.stream, event_micros(r.start), f});
      live.erase(addr);
      live_by_log_addr.erase(it);
    }
  }
  changes_before(log.records.size());
  if (report.status == RunStatus::OutOfMemory && report.oom) {
    const OomPoint& o = *report.oom;
    const std::uint64_t free = report.budget > o.reserved ? (report.budget - o.reserved).value : 0;
    entries.push_back({"oom", 0, o.requested.value, 0, event_micros(std::max(last, report.time.simulated)),
                       frames.of_request(o.tensor_file_id), free});
  }

  // The end state: the model's segments, or the derived ranges with the blocks live in them.
  std::vector<EndSegment> end;
  if (real) {
    for (const SeedSegment& s : log.end_segments) {
      EndSegment& e = end.emplace_back();
      e.addr = where.of_address(s.addr);
      e.stream = s.stream;
      e.pool = s.pool;
      e.expandable = s.expandable;
      if (const auto f = segment_frames.find(e.addr); f != segment_frames.end()) e.frames = f->second;
      std::uint64_t at = e.addr;
      for (const SeedBlock& b : s.blocks) {
        const auto l = b.allocated ? live.find(at) : live.end();
        e.blocks.push_back(
            {at, b.size.value, b.requested.value, b.allocated, l != live.end() ? l->second.frames : kNoFrames});
        at += b.size.value;
      }
      e.size = at - e.addr;
    }
  } else {
    for (const DerivedSegment& s : derived) {
      EndSegment& e = end.emplace_back();
      e.addr = s.lo;
      e.size = s.hi - s.lo;
      e.stream = s.stream;
      e.frames = frames.of_alloc(s.first_alloc);
      std::uint64_t at = s.lo;
      for (auto it = live.lower_bound(s.lo); it != live.end() && it->first < s.hi; ++it) {
        const Live& b = it->second;
        if (b.addr > at) e.blocks.push_back({at, b.addr - at, 0, false, kNoFrames});
        e.blocks.push_back({b.addr, b.size, b.requested, true, b.frames});
        at = b.addr + b.size;
      }
      if (at < s.hi) e.blocks.push_back({at, s.hi - at, 0, false, kNoFrames});
    }
  }

  pickle::Writer w;
  if (format == TorchSnapshotFormat::Torch113) {
    write_segments_113(w, end, frames);
    return w.finish();
  }
  w.begin_dict();
  write_segments(w, end, frames);
  write_entries(w, entries, frames);
  w.end();
  return w.finish();
}

}  // namespace coopsim
