// Ground truth for the snapshot importer: recordings made by the `pytorch` model itself (random
// allocations and frees on two streams, the entries PyTorch records, the model's end state),
// cut as a late start cuts them, must replay at every recorded address with the model's end
// state; near the capacity also through release-and-retry and the final OOM.
#include <fmt/format.h>

#include <iterator>
#include <map>
#include <set>

#include "snapshot_cases_support.hpp"

using namespace coopsim;
using namespace snapshot_test;
using namespace snapshot_cases;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace snapshot_recordings_test {

namespace {

// A recording made by the model itself: random allocations and frees on two streams, with the
// entries PyTorch would record (segment_alloc for a new cudaMalloc segment, segment_map for newly
// mapped pages of an expandable segment) and the model's own end state as `segments`. The
// history's first `cut` entries are then dropped, as a late start of _record_memory_history
// (or a ring buffer) drops them, so the importer has to rebuild the state in between.
struct Recording {
  Snap snap;
  std::size_t allocs = 0;
  bool oom = false;  // the recording ends with an allocation that failed
};

using Intervals = std::map<std::uint64_t, std::uint64_t>;
Intervals mapped_of(const std::vector<SeedSegment>& segs) {
  Intervals out;
  for (const SeedSegment& g : segs) out.emplace(g.addr, g.addr + g.size().value);
  return out;
}

// With a small `capacity` the model's release path runs (release_cached_blocks before a retry:
// segment_free entries) and the recording ends at its first failed allocation (an oom entry
// with device_free = capacity - reserved), as a program that does not catch it does.
Recording record(const PyTorchOptions& o, ValuePtr settings, std::uint64_t seed, std::size_t steps, std::size_t cut,
                 std::uint64_t capacity = 64 * GiB, std::uint64_t live_limit = GiB) {
  constexpr std::uint64_t kStreamValue[2] = {0, 7};  // cudaStream_t values; dense 0 and 1
  PyTorchCachingAllocator m(Bytes{capacity}, o);
  std::map<std::uint64_t, std::uint64_t> segment_stream;  // cudaMalloc segment -> stream value
  std::uint64_t state = seed;
  auto next = [&]() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 33;
  };
  // Sizes clustered around a few values, so cached blocks are often reused by slightly smaller
  // requests (unsplit remainders, oversize reuse).
  const std::uint64_t bases[] = {1000, 300 * KiB, 900 * KiB, 3 * MiB, 7 * MiB, 12 * MiB, 19 * MiB, 25 * MiB, 60 * MiB};
  std::vector<std::pair<Block, std::uint64_t>> live;  // block, stream value
  std::vector<ValuePtr> entries;
  Recording rec;
  auto entry = [&](const std::string& action, std::uint64_t addr, std::uint64_t size, std::uint64_t stream) {
    entries.push_back(D({{"action", S(action)},
                         {"addr", U(addr)},
                         {"size", U(size)},
                         {"stream", U(stream)},
                         {"time_us", I(static_cast<std::int64_t>(entries.size()))},
                         {"frames", L({})}}));
  };
  Intervals mapped;
  std::uint64_t live_bytes = 0;
  std::set<std::size_t> boundaries;  // entry index where each malloc / free call starts
  for (std::size_t i = 0; i < steps; ++i) {
    boundaries.insert(entries.size());
    if (live.empty() || (next() % 100 < 55 && live_bytes < live_limit)) {
      const std::uint64_t base = bases[next() % std::size(bases)];
      const std::uint64_t size = base - std::min(base - 1, next() % (base / 8 + 1));
      const std::uint32_t stream = next() % 5 == 0 ? 1 : 0;
      const std::uint64_t mallocs = m.stats().device_mallocs, frees = m.stats().device_frees;
      const auto b = m.allocate(AllocRequest{Bytes{size}, stream});
      if (m.stats().device_mallocs != mallocs || m.stats().device_frees != frees) {
        const std::vector<SeedSegment> segs = *m.snapshot();
        const Intervals now = mapped_of(segs);
        if (o.expandable_segments) {
          REQUIRE(m.stats().device_frees == frees);  // no unmapping in these recordings
          // Newly mapped pages: what `now` covers and `mapped` did not (ranges only grow here).
          for (const auto& [lo, hi] : now) {
            std::uint64_t at = lo;
            auto it = mapped.upper_bound(lo);
            if (it != mapped.begin() && std::prev(it)->second > lo) at = std::prev(it)->second;
            for (it = mapped.lower_bound(at); at < hi; ++it) {
              const std::uint64_t stop = it == mapped.end() ? hi : std::min(hi, it->first);
              if (stop > at) entry("segment_map", at, stop - at, kStreamValue[stream]);
              if (it == mapped.end()) break;
              at = std::max(at, it->second);
            }
          }
        } else {
          for (const auto& [lo, hi] : mapped) {
            const auto it = now.find(lo);
            if (it == now.end() || it->second != hi) entry("segment_free", lo, hi - lo, segment_stream.at(lo));
          }
          for (const auto& [lo, hi] : now) {
            if (!mapped.count(lo)) entry("segment_alloc", lo, hi - lo, kStreamValue[stream]);
          }
          segment_stream.clear();
          for (const SeedSegment& g : segs) segment_stream[g.addr] = kStreamValue[g.stream];
        }
        mapped = now;
      }
      if (!b) {
        const std::uint64_t rounded = PyTorchCachingAllocator::round_size(size, o);
        entries.push_back(D({{"action", S("oom")},
                             {"device_free", U(capacity - m.stats().reserved.value)},
                             {"size", U(rounded)},
                             {"stream", U(kStreamValue[stream])},
                             {"time_us", I(static_cast<std::int64_t>(entries.size()))},
                             {"frames", L({})}}));
        rec.oom = true;
        break;
      }
      entry("alloc", b->addr, size, kStreamValue[stream]);
      live.emplace_back(*b, kStreamValue[stream]);
      live_bytes += size;
      ++rec.allocs;
    } else {
      const std::size_t k = next() % live.size();
      const auto [b, stream] = live[k];
      live[k] = live.back();
      live.pop_back();
      m.deallocate(b);
      live_bytes -= b.requested.value;
      entry("free_requested", b.addr, b.requested.value, stream);
      entry("free_completed", b.addr, b.requested.value, stream);
    }
  }
  // The late start: drop the first `cut` entries, at the start of a call (recording is switched
  // on between calls; a cut inside one, e.g. within a release-and-retry, is a ring buffer's).
  cut = *boundaries.lower_bound(std::min(cut, entries.size() / 2));
  for (std::size_t i = 0; i < cut; ++i) {
    if (entries[i]->get("action")->text == "alloc") --rec.allocs;
  }
  rec.snap.traces[0].assign(entries.begin() + static_cast<std::ptrdiff_t>(cut), entries.end());
  rec.snap.settings = std::move(settings);
  const std::vector<SeedSegment> end = *m.snapshot();
  for (const SeedSegment& g : end) {
    std::vector<Snap::Blk> blocks;
    for (const SeedBlock& b : g.blocks) blocks.push_back({b.size.value, b.allocated ? b.requested.value : 0});
    rec.snap.segment(g.addr, kStreamValue[g.stream], g.pool == SegmentPool::Small ? "small" : "large", blocks, 0,
                     g.expandable);
  }
  return rec;
}

}  // namespace

TEST_CASE("snapshot cases: recordings made by the model replay exactly after a late start", "[snapshot]") {
  // Ground truth is the model: whatever state it had when the kept history begins, the importer
  // must rebuild it well enough that every later allocation lands where the model put it and
  // the end state is the model's. Exercises the remainder rules (clustered sizes make cached
  // blocks serve slightly smaller requests), oversize reuse and expandable ranges.
  Fields div;
  for (int i = 0; i < 16; ++i) div.emplace_back(std::to_string(1 << i), I(0));
  struct Config {
    const char* name;
    PyTorchOptions opts;
    ValuePtr settings;
  };
  PyTorchOptions mss;
  mss.max_split_size = Bytes{20 * MiB};
  PyTorchOptions exp;
  exp.expandable_segments = true;
  const std::vector<Config> configs{
      {"default", PyTorchOptions{}, Snap::default_settings()},
      {"max_split_size 20 MiB", mss,
       D({{"max_split_size", U(20 * MiB)}, {"expandable_segments", B(false)}, {"roundup_power2_divisions", D(div)}})},
      {"expandable segments", exp, expandable_settings()},
  };
  for (const Config& c : configs) {
    for (std::uint64_t seed = 1; seed <= 40; ++seed) {
      INFO(c.name << ", seed " << seed);
      const Recording rec = record(c.opts, c.settings, seed, 1500, 1200);
      const Trace t = import(rec.snap);
      CHECK(t.header.source["initial_state"] == "exact");
      const Replay r = replay(t);
      CHECK(r.report.status == RunStatus::Completed);
      CHECK(r.report.addresses.checked == rec.allocs);
      CHECK(r.report.addresses.mismatches == 0);
      CHECK(end_difference(t, r) == "");
    }
  }
}

TEST_CASE("snapshot cases: recordings near the capacity replay exactly at it, releases and OOM included",
          "[snapshot]") {
  // 1 GiB device, up to 900 MiB live: cudaMalloc failures make the model release its cached
  // segments and retry (segment_free entries), and a recording ends at its first OOM. At the
  // recorded capacity the replay releases the same segments and fails at the same request.
  Fields div;
  for (int i = 0; i < 16; ++i) div.emplace_back(std::to_string(1 << i), I(0));
  PyTorchOptions mss;
  mss.max_split_size = Bytes{20 * MiB};
  const std::vector<std::pair<PyTorchOptions, ValuePtr>> configs{
      {PyTorchOptions{}, Snap::default_settings()},
      {mss,
       D({{"max_split_size", U(20 * MiB)}, {"expandable_segments", B(false)}, {"roundup_power2_divisions", D(div)}})},
  };
  std::size_t ooms = 0, releases = 0;
  for (std::size_t c = 0; c < configs.size(); ++c) {
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
      INFO("config " << c << ", seed " << seed);
      const Recording rec = record(configs[c].first, configs[c].second, seed, 1500, 1200, GiB, 900 * MiB);
      const Trace t = import(rec.snap);
      CHECK(t.header.source["initial_state"] == "exact");
      releases += t.header.source["actions"].value("segment_free", 0);
      const Replay r = replay(t, Bytes{GiB});
      CHECK(r.report.addresses.checked == rec.allocs);
      CHECK(r.report.addresses.mismatches == 0);
      CHECK(end_difference(t, r) == "");
      if (rec.oom) {
        ++ooms;
        REQUIRE(r.report.status == RunStatus::OutOfMemory);
        CHECK(t.header.source["ooms"][0]["capacity"] == GiB);
        CHECK(index_of(r.report.oom->event) == t.header.source["ooms"][0]["event"]);
      } else {
        CHECK(r.report.status == RunStatus::Completed);
      }
    }
  }
  CHECK(ooms > 0);  // the cases are exercised
  CHECK(releases > 0);
}

}  // namespace snapshot_recordings_test
