// The run as a PyTorch memory snapshot (the dict torch.cuda.memory._snapshot() returns; schema
// in docs/import-torch-snapshot.md), pickled by src/output/pickle_writer.
//
// Mapping from the event log: each Alloc record (trace allocations, swap-in targets, recompute
// outputs alike: every block the device held) is an `alloc` of the tensor's requested bytes at
// the block's address, on the allocation's stream; each Free a `free_requested` and a
// `free_completed` of the same size. The log has no segment records, so segments are derived:
// every maximal address range that blocks ever covered is one segment, `segment_alloc`ed just
// before the first allocation inside it and never freed; the final `segments` list shows those
// ranges with the blocks still live at the end (active_allocated) and the free gaps (inactive).
// An OOM run ends with an `oom` entry. Times: `time_us` = simulated ns / 1000. Frames are empty.
#include <algorithm>
#include <map>

#include "coopsim/alloc/allocator.hpp"
#include "coopsim/output/export.hpp"
#include "coopsim/formats/pickle_writer.hpp"

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

namespace {

struct Entry {
  std::string_view action;
  std::uint64_t addr = 0, size = 0;
  std::uint16_t stream = 0;
  std::int64_t time_us = 0;
  std::uint64_t device_free = 0;  // oom only
};

struct Segment {
  std::uint64_t lo = 0, hi = 0;
  std::uint32_t first_alloc = kNoRecord;
  std::uint16_t stream = 0;
};

struct Live {
  std::uint64_t addr = 0, size = 0, requested = 0;
};

std::int64_t micros(SimTime t) { return t.count() / 1000; }

}  // namespace

std::string torch_snapshot_pickle(const Trace& trace, const RunLog& log, const Report& report) {
  const SnapshotAddresses where(log);
  auto requested = [&](const LogRef& r) {
    const std::uint64_t want = r.storage < trace.tensors.size() ? trace.tensors[r.storage].size.value : r.size.value;
    return std::clamp<std::uint64_t>(want, 1, std::max<std::uint64_t>(r.size.value, 1));
  };

  // Segments: the maximal ranges the blocks ever covered.
  std::vector<std::pair<std::uint64_t, std::uint32_t>> starts;  // (address, Alloc record)
  for (std::uint32_t i = 0; i < log.records.size(); ++i) {
    if (log.records[i].kind == LogKind::Alloc) starts.emplace_back(where.of(i), i);
  }
  std::sort(starts.begin(), starts.end());
  std::vector<Segment> segments;
  for (const auto& [addr, i] : starts) {
    const std::uint64_t end = addr + std::max<std::uint64_t>(log.ref(log.records[i]).size.value, 1);
    if (segments.empty() || addr > segments.back().hi) segments.push_back({addr, end, i, log.records[i].stream});
    Segment& s = segments.back();
    s.hi = std::max(s.hi, end);
    if (i < s.first_alloc) {
      s.first_alloc = i;
      s.stream = log.records[i].stream;
    }
  }
  std::map<std::uint32_t, const Segment*> opens;  // first Alloc record -> its segment
  for (const Segment& s : segments) opens.emplace(s.first_alloc, &s);

  // The history.
  std::vector<Entry> entries;
  std::map<std::uint64_t, std::uint32_t> live_by_log_addr;  // log address -> Alloc record
  std::map<std::uint64_t, Live> live;                       // snapshot address -> block
  SimTime last{0};
  for (std::uint32_t i = 0; i < log.records.size(); ++i) {
    const LogRecord& r = log.records[i];
    last = std::max({last, r.start, r.end});
    if (r.kind == LogKind::Alloc) {
      const LogRef& ref = log.ref(r);
      if (const auto o = opens.find(i); o != opens.end()) {
        entries.push_back({"segment_alloc", o->second->lo, o->second->hi - o->second->lo, r.stream, micros(r.start)});
      }
      const std::uint64_t addr = where.of(i);
      entries.push_back({"alloc", addr, requested(ref), r.stream, micros(r.start)});
      live_by_log_addr[ref.addr] = i;
      live[addr] = Live{addr, ref.size.value, requested(ref)};
    } else if (r.kind == LogKind::Free) {
      const auto it = live_by_log_addr.find(log.ref(r).addr);
      if (it == live_by_log_addr.end()) continue;  // not a block of this log (the validator says so)
      const LogRecord& placed = log.records[it->second];
      const std::uint64_t addr = where.of(it->second);
      const std::uint64_t size = requested(log.ref(placed));
      entries.push_back({"free_requested", addr, size, placed.stream, micros(r.start)});
      entries.push_back({"free_completed", addr, size, placed.stream, micros(r.start)});
      live.erase(addr);
      live_by_log_addr.erase(it);
    }
  }
  if (report.status == RunStatus::OutOfMemory && report.oom) {
    const OomPoint& o = *report.oom;
    const std::uint64_t free = report.budget > o.reserved ? (report.budget - o.reserved).value : 0;
    entries.push_back({"oom", 0, o.requested.value, 0, micros(std::max(last, report.time.simulated)), free});
  }

  pickle::Writer w;
  w.begin_dict();
  w.text("segments");
  w.begin_list();
  for (const Segment& s : segments) {
    std::vector<Live> blocks;
    for (auto it = live.lower_bound(s.lo); it != live.end() && it->first < s.hi; ++it) blocks.push_back(it->second);
    std::uint64_t allocated = 0, req = 0;
    for (const Live& b : blocks) {
      allocated += b.size;
      req += b.requested;
    }
    w.begin_dict();
    for (const auto& [key, value] : {std::pair<const char*, std::uint64_t>{"device", 0},
                                     {"address", s.lo},
                                     {"total_size", s.hi - s.lo},
                                     {"stream", s.stream},
                                     {"allocated_size", allocated},
                                     {"active_size", allocated},
                                     {"requested_size", req}}) {
      w.text(key);
      w.integer(static_cast<std::int64_t>(value));
    }
    w.text("segment_type");
    w.text("large");
    w.text("segment_pool_id");
    w.int_pair(0, 0);
    w.text("is_expandable");
    w.boolean(false);
    w.text("frames");
    w.begin_list();
    w.end();
    w.text("blocks");
    w.begin_list();
    std::uint64_t at = s.lo;
    auto block = [&](std::uint64_t addr, std::uint64_t size, std::uint64_t requested_size, bool active) {
      w.begin_dict();
      w.text("address");
      w.integer(static_cast<std::int64_t>(addr));
      w.text("size");
      w.integer(static_cast<std::int64_t>(size));
      w.text("requested_size");
      w.integer(static_cast<std::int64_t>(requested_size));
      w.text("state");
      w.text(active ? "active_allocated" : "inactive");
      w.text("frames");
      w.begin_list();
      w.end();
      w.end();
    };
    for (const Live& b : blocks) {
      if (b.addr > at) block(at, b.addr - at, 0, false);
      block(b.addr, b.size, b.requested, true);
      at = b.addr + b.size;
    }
    if (at < s.hi) block(at, s.hi - at, 0, false);
    w.end();
    w.end();
  }
  w.end();
  w.text("device_traces");
  w.begin_list();
  w.begin_list();
  for (const Entry& e : entries) {
    w.begin_dict();
    w.text("action");
    w.text(e.action);
    if (e.action == "oom") {
      w.text("device_free");
      w.integer(static_cast<std::int64_t>(e.device_free));
    } else {
      w.text("addr");
      w.integer(static_cast<std::int64_t>(e.addr));
    }
    w.text("size");
    w.integer(static_cast<std::int64_t>(e.size));
    w.text("stream");
    w.integer(e.stream);
    w.text("time_us");
    w.integer(e.time_us);
    w.text("frames");
    w.begin_list();
    w.end();
    w.end();
  }
  w.end();
  w.end();
  w.end();
  return w.finish();
}

}  // namespace coopsim
