// The six public PyTorch memory snapshots in ../shared/traces/pytorch_snapshots (see its
// README): each converts, its figures match those read off the pickle directly, and replaying it
// with the `pytorch` model from the rebuilt initial state puts every allocation at the recorded
// address and ends with exactly the recorded segments and reserved bytes. Skipped without
// ../shared.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "coopsim/alloc/pytorch.hpp"
#include "coopsim/engine/engine.hpp"
#include "coopsim/import/torch_snapshot.hpp"
#include "coopsim/policy/keep.hpp"
#include "test_paths.hpp"

using namespace coopsim;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace import_torch_snapshot_real_test {

namespace {

using Kind = pickle::Value::Kind;

struct Figures {
  std::uint64_t allocs = 0, frees = 0, peak_live = 0, segments = 0, reserved = 0;
};

// Straight from the snapshot dict, device 0, without the importer: live bytes at the start are
// the requested sizes of blocks freed without an alloc plus those of end-state active blocks at
// addresses the history never names; then + alloc, - free_completed.
Figures read_off(const pickle::Value& root) {
  Figures f;
  const auto& entries = root.get("device_traces")->items.at(0)->items;
  std::set<std::int64_t> named;
  std::set<std::int64_t> live;
  std::uint64_t start = 0;
  for (const auto& e : entries) {
    const std::string& action = e->get("action")->text;
    const std::int64_t addr = e->get("addr")->integer;
    named.insert(addr);
    if (action == "alloc") {
      ++f.allocs;
      live.insert(addr);
    } else if (action == "free_completed") {
      ++f.frees;
      if (live.erase(addr) == 0) start += static_cast<std::uint64_t>(e->get("size")->integer);
    }
  }
  for (const auto& g : root.get("segments")->items) {
    ++f.segments;
    f.reserved += static_cast<std::uint64_t>(g->get("total_size")->integer);
    for (const auto& b : g->get("blocks")->items) {
      if (b->get("state")->text != "inactive" && !named.count(b->get("address")->integer)) {
        start += static_cast<std::uint64_t>(b->get("requested_size")->integer);
      }
    }
  }
  std::uint64_t now = start;
  f.peak_live = start;
  for (const auto& e : entries) {
    const std::string& action = e->get("action")->text;
    if (action == "alloc") now += static_cast<std::uint64_t>(e->get("size")->integer);
    if (action == "free_completed") now -= static_cast<std::uint64_t>(e->get("size")->integer);
    f.peak_live = std::max(f.peak_live, now);
  }
  return f;
}

}  // namespace

TEST_CASE("torch snapshot: the six public snapshots replay exactly with the pytorch model",
          "[torch_snapshot][shared]") {
  if (!test::have_shared()) {
    WARN("../shared not present: skipping the public PyTorch snapshots");
    return;
  }
  // Figures measured independently with a restricted Python unpickler (find_class refuses
  // everything): allocs, free_completed, peak live bytes, end segments, reserved bytes.
  const std::map<std::string, Figures> expected{
      {"cs336_MAGMA27", {1721, 1721, 13923997700, 216, 14180941824}},
      {"cs336_bcrafton", {2162, 2162, 3849232640, 96, 4238344192}},
      {"medium_128_inference", {1280, 1280, 1736962048, 98, 1763704832}},
      {"medium_128_training", {6526, 6305, 7013335044, 377, 7235174400}},
      {"medium_256_inference", {1280, 1280, 1793775616, 101, 1864368128}},
      {"medium_256_training", {6624, 6403, 9103544320, 495, 9265217536}},
  };
  // Pre-existing large blocks whose unsplit remainder the importer pins (a gap of at most 1 MiB
  // behind them, which no free large-pool block can be; or an allocation at their true end).
  const std::map<std::string, int> remainders{{"cs336_MAGMA27", 0},        {"cs336_bcrafton", 5},
                                              {"medium_128_inference", 0}, {"medium_128_training", 4},
                                              {"medium_256_inference", 0}, {"medium_256_training", 4}};
  for (const auto& [name, want] : expected) {
    const std::string path =
        (test::shared_dir() / "traces" / "pytorch_snapshots" / (name + "_memory_snapshot.pickle.gz")).string();
    INFO(path);
    const pickle::ValuePtr root = pickle::parse_file(path);
    const Figures got = read_off(*root);
    CHECK(got.allocs == want.allocs);
    CHECK(got.frees == want.frees);
    CHECK(got.peak_live == want.peak_live);
    CHECK(got.segments == want.segments);
    CHECK(got.reserved == want.reserved);

    const Trace t = torch_snapshot::import_value(*root, path, {});
    CHECK(t.header.model == name);
    CHECK(t.header.source["initial_state"] == "exact");
    CHECK(t.header.source["truncated"] == false);
    CHECK(t.header.source["absorbed_remainders"] == remainders.at(name));
    CHECK(t.header.source["remainders_from_replay"] == 0);
    CHECK(t.header.source["ooms"].empty());
    const TraceSummary s = summarize(t);
    CHECK(s.allocs == got.allocs);
    CHECK(s.frees == got.frees);
    CHECK(s.peak_live.value == got.peak_live);
    CHECK(t.header.extra["final_reserved"] == got.reserved);
    // No segment_* entries in these files: the initial segments are the end segments.
    CHECK(s.initial_segments == got.segments);
    CHECK(s.initial_reserved.value == got.reserved);

    PyTorchCachingAllocator alloc(Bytes{80ULL << 30},
                                  torch_snapshot::allocator_options(t.header.extra["allocator_settings"]));
    KeepPolicy keep;
    EngineOptions opt;
    opt.budget = Bytes{80ULL << 30};
    Report r;
    run_engine(t, alloc, keep, opt, r);
    alloc.check_invariants();
    CHECK(r.status == RunStatus::Completed);
    CHECK(r.addresses.checked == got.allocs);
    CHECK(r.addresses.mismatches == 0);
    const AllocatorStats st = alloc.stats();
    CHECK(st.device_mallocs == 0);  // the recording took no new segment, nor does the replay
    CHECK(st.reserved.value == got.reserved);
    CHECK(st.segments == got.segments);
    const auto cmp = torch_snapshot::compare_end_state(*torch_snapshot::final_segments(t), *alloc.snapshot());
    CHECK(cmp.first_difference == "");
    CHECK(cmp.segments_match);
    CHECK(cmp.reserved_match);
  }
}

}  // namespace import_torch_snapshot_real_test
