// The recorded cases of PyTorch memory snapshots that a replay must reproduce exactly: an unsplit
// remainder pinned by the allocator's rules, expandable segments, a recorded OOM and one device
// of several. Each snapshot is small, hand-built, written with coopsim's own pickle writer and
// read back by the importer; every expected address and size is worked out from the caching
// allocator's rules (pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp: round_size,
// get_allocation_size, should_split, get_free_block, try_merge_blocks, find_expandable_block,
// map_block, malloc's OOM path) in the comment next to it. Ground-truth checks against recordings
// made by the model itself are in snapshot_recordings_test.cpp.
#include <fmt/format.h>

#include "snapshot_cases_support.hpp"

using namespace coopsim;
using namespace snapshot_test;
using namespace snapshot_cases;

TEST_CASE("snapshot cases: a gap of at most 1 MiB behind a live large block is its remainder", "[snapshot]") {
  // At the start, segment A (20 MiB, large pool) holds B at A (requested 3 MiB + 700 KiB =
  // 3,862,528 bytes, a multiple of 512, so round_size leaves it) and N at A + 4 MiB (16 MiB).
  // Between B's rounded end and N lie 4 MiB - 3,862,528 = 331,776 bytes (324 KiB). No block of a
  // cudaMalloc'd large-pool segment is ever 1 MiB or smaller: requests there round to more than
  // 1 MiB, should_split splits a large-pool remainder only when it is > 1 MiB, and a freed block
  // only grows by merging. So those 324 KiB were never a free block: B was carved from a 4 MiB
  // free block and kept the remainder (324 KiB <= 1 MiB: not split). B's block is 4 MiB.
  Snap s;
  s.segment(A, 0, "large", {{20 * MiB, 0}});
  const std::uint64_t b_req = 3 * MiB + 700 * KiB;
  s.free(A + 4 * MiB, 16 * MiB)               // 0, 1: N, live at the start, freed first
      .entry("alloc", A + 4 * MiB, 16 * MiB)  // 2: Y
      .free(A, b_req)                         // 3, 4: B
      .free(A + 4 * MiB, 16 * MiB);           // 5, 6: Y
  const Trace t = import(s);
  REQUIRE(t.initial_segments.size() == 1);
  CHECK(layout(t.initial_segments[0]) == Layout{{4 * MiB, 0}, {16 * MiB, 1}});
  CHECK(t.header.source["absorbed_remainders"] == 1);
  CHECK(t.header.source["initial_state"] == "exact");

  // Replay. N's free leaves the free block [A + 4 MiB, A + 20 MiB) (B, live, is not free, so no
  // merge behind it). Y (16 MiB) best-fits that 16 MiB block exactly: at A + 4 MiB. Had the 324
  // KiB been taken for free space, N's free would have merged with it into a block starting at
  // A + 3,862,528 and Y would have gone there. Then B and Y are freed: one 20 MiB free block.
  const Replay r = replay(t);
  CHECK(r.report.addresses.checked == 1);
  CHECK(r.report.addresses.mismatches == 0);
  CHECK(end_difference(t, r) == "");
  CHECK(r.stats.reserved.value == 20 * MiB);
}

TEST_CASE("snapshot cases: a gap larger than 1 MiB is free unless an allocation pins it", "[snapshot]") {
  // Same start but B is requested 2 MiB + 512 (round_size: 2,097,664) and N sits at A + 4 MiB: the
  // gap is 2 MiB - 512, more than 1 MiB, so it may be free space (a remainder can be at most
  // 1 MiB, and a free large-pool block more than 1 MiB: r + f = 2 MiB - 512 has solutions
  // r = 0 and 0 < r < 1 MiB - 512). Nothing pins it: B keeps its rounded size.
  Snap s;
  s.segment(A, 0, "large", {{4 * MiB, 0}, {16 * MiB, 16 * MiB}});
  s.free(A, 2 * MiB + 512);
  const Trace t = import(s);
  REQUIRE(t.initial_segments.size() == 1);
  CHECK(layout(t.initial_segments[0]) == Layout{{2 * MiB + 512, 0}, {2 * MiB - 512, kNoIndex}, {16 * MiB, 1}});
  CHECK(t.header.source["absorbed_remainders"] == 0);
  const Replay r = replay(t);
  CHECK(end_difference(t, r) == "");
}

TEST_CASE("snapshot cases: a remainder only a misplaced replay reveals", "[snapshot]") {
  // At the start segment A (20 MiB) holds B at A (requested 4 MiB - 600 KiB = 3,580,928; truly a
  // 4 MiB block: it kept 600 KiB unsplit) and 16 MiB free. The gap behind B's rounded end is
  // 16 MiB + 600 KiB, more than 1 MiB: free space, or remainder + free space. While B is live the
  // history allocates Y = 16 MiB + 300 KiB (17,084,416): in the recording the 16 MiB free block is
  // too small, so a new 18 MiB segment (round_up to 2 MiB) is taken at NA.
  // Replaying with no remainder, the model carves Y from the 16 MiB + 600 KiB block behind B, at
  // A + 3,580,928: misplaced. So the recording's block there was smaller than Y: B holds more than
  // gap - Y = 300 KiB of the gap; the smallest such remainder, 307,200 + 512 = 307,712 bytes, is
  // taken (B = 3,888,640; a lower bound of the true 600 KiB, and enough for every placement).
  constexpr std::uint64_t NA = 0x30000000;
  Snap s;
  s.segment(A, 0, "large", {{20 * MiB, 0}});
  s.segment(NA, 0, "large", {{18 * MiB, 0}});
  const std::uint64_t b_req = 4 * MiB - 600 * KiB, y_req = 16 * MiB + 300 * KiB;
  s.entry("segment_alloc", NA, 18 * MiB).entry("alloc", NA, y_req).free(A, b_req).free(NA, y_req);
  const Trace t = import(s);
  CHECK(t.header.source["remainders_from_replay"] == 1);
  CHECK(t.header.source["absorbed_remainders"] == 1);
  REQUIRE(t.initial_segments.size() == 1);
  CHECK(layout(t.initial_segments[0]) == Layout{{b_req + 307'712, 0}, {20 * MiB - b_req - 307'712, kNoIndex}});
  const Replay r = replay(t);
  CHECK(r.report.addresses.checked == 1);
  CHECK(r.report.addresses.mismatches == 0);
  CHECK(end_difference(t, r) == "");
}

TEST_CASE("snapshot cases: with max_split_size an oversize block is its whole segment", "[snapshot]") {
  // max_split_size 20 MiB (a multiple of 2 MiB). A block of at least max_split_size is never
  // split (should_split), and it comes either from a fresh segment (alloc_size = round_up(size,
  // 2 MiB): the whole segment) or from a cached block of at least max_split_size, which by the
  // same argument is a whole segment (segments made for smaller requests are at most
  // round_up(request, 2 MiB) <= max_split_size, and their free blocks smaller still). So B at A,
  // requested 22 MiB in a 30 MiB segment, is all 30 MiB: it took a cached 30 MiB segment
  // (30 < 22 + max_non_split_rounding_size 20 MiB) and kept 8 MiB unsplit.
  // History: while B is live, Z (5 MiB) cannot go behind B; no cached block fits, so a new
  // segment of kLargeBuffer (20 MiB, the request is < 10 MiB) is taken at NA. Had the 8 MiB been
  // taken for free space, the model would have carved Z from it at A + 22 MiB.
  constexpr std::uint64_t NA = 0x30000000;
  Snap s;
  Fields div;
  for (int i = 0; i < 16; ++i) div.emplace_back(std::to_string(1 << i), I(0));
  s.settings = D({{"max_split_size", U(20 * MiB)},
                  {"garbage_collection_threshold", F(0.0)},
                  {"expandable_segments", B(false)},
                  {"roundup_power2_divisions", D(div)}});
  s.segment(A, 0, "large", {{30 * MiB, 0}});
  s.segment(NA, 0, "large", {{20 * MiB, 0}});
  s.entry("segment_alloc", NA, 20 * MiB).entry("alloc", NA, 5 * MiB).free(A, 22 * MiB).free(NA, 5 * MiB);
  const Trace t = import(s);
  REQUIRE(t.initial_segments.size() == 1);
  CHECK(layout(t.initial_segments[0]) == Layout{{30 * MiB, 0}});
  CHECK(t.header.source["absorbed_remainders"] == 1);
  CHECK(t.header.source["remainders_from_replay"] == 0);
  const Replay r = replay(t);
  CHECK(r.report.addresses.checked == 1);
  CHECK(r.report.addresses.mismatches == 0);
  CHECK(end_difference(t, r) == "");
}

TEST_CASE("snapshot cases: unmapped pages were mapped at the start", "[snapshot]") {
  // expandable_segments:True; the end state maps [R + 20 MiB, R + 40 MiB) (one live 20 MiB block).
  // The history unmaps [R, R + 20 MiB) (empty_cache after a free of a block live at the start;
  // 20 MiB: whole large pages) and maps nothing. Undone backwards: [R, R + 40 MiB) was mapped at
  // the start, holding the freed block (12 MiB at R), 8 MiB free and the live block. The
  // reservation's base is R, the lowest address the record shows.
  Snap s;
  s.settings = expandable_settings();
  s.segment(R + 20 * MiB, 0, "large", {{20 * MiB, 20 * MiB}}, 0, true);
  s.free(R, 12 * MiB).entry("segment_unmap", R, 20 * MiB);
  const Trace t = import(s);
  CHECK(t.header.source["initial_state"] == "exact");
  REQUIRE(t.initial_segments.size() == 1);
  CHECK(t.initial_segments[0].addr == R);
  CHECK(t.initial_segments[0].expandable);
  CHECK(layout(t.initial_segments[0]) == Layout{{12 * MiB, 0}, {8 * MiB, kNoIndex}, {20 * MiB, 1}});
  REQUIRE(t.segment_addresses.size() == 1);
  CHECK(t.segment_addresses[0] == SegmentAddress{R, Bytes{40 * MiB}, 0, SegmentPool::Large, true});
  // The replay has no empty_cache event: it frees the block but keeps its page mapped, so its
  // end state has [R, R + 40 MiB) mapped where the recording has [R + 20 MiB, R + 40 MiB).
  const Replay r = replay(t);
  CHECK(r.report.status == RunStatus::Completed);
  CHECK(r.stats.reserved.value == 40 * MiB);
}

TEST_CASE("snapshot cases: expandable segments replay at the recorded addresses", "[snapshot]") {
  // expandable_segments:True. At the start the large-pool reservation R (stream 0) has its first
  // 20 MiB page mapped: P (12 MiB, live) at R and 8 MiB free at R + 12 MiB. The small pool has no
  // reservation yet. History (sizes are multiples of 512, so round_size leaves them):
  //  0    alloc A1 6 MiB: best fit is the 8 MiB free block; with expandable segments should_split
  //       splits any remainder >= 512: A1 = [R + 12 MiB, +6 MiB), 2 MiB free at R + 18 MiB.
  //  1, 2 segment_map R + 20 MiB (20 MiB), alloc A2 10 MiB: no cached block >= 10 MiB; alloc_block
  //       -> find_expandable_block: the lowest unmapped range starts at R + 20 MiB and the free
  //       2 MiB block before it counts (allocatable prev), 2 MiB + the unmapped rest >= 10 MiB;
  //       map_block maps the 8 MiB still missing, rounded up to one 20 MiB page, which merges
  //       with the 2 MiB block: 22 MiB free at R + 18 MiB, split: A2 = [R + 18 MiB, +10 MiB).
  //  3, 4 free P: 12 MiB free at R (A1 behind it is live: no merge).
  //  5    alloc A3 11 MiB: the cached blocks >= 11 MiB are R (12 MiB) and R + 28 MiB (12 MiB,
  //       followed by the unmapped rest); get_free_block takes the lower address and moves on
  //       only while the next one's expandable size is smaller, which it is not: A3 at R,
  //       1 MiB free behind it.
  //  6, 7 segment_map Q (2 MiB), alloc S 1000 bytes (small pool, round_size 1024): no small
  //       reservation, so find_expandable_block reserves one (at Q in the recording) and maps
  //       one 2 MiB page: S at Q.
  //  8..11 free A1, free A2: [R + 11 MiB, R + 40 MiB) merges into 29 MiB free.
  // End state: R: [A3 11 MiB][29 MiB free] mapped; Q: [S 1024][2 MiB - 1024 free].
  Snap s;
  s.settings = expandable_settings();
  s.segment(R, 0, "large", {{11 * MiB, 11 * MiB}, {29 * MiB, 0}}, 0, true);
  s.segment(Q, 0, "small", {{1024, 1000}, {2 * MiB - 1024, 0}}, 0, true);
  s.entry("alloc", R + 12 * MiB, 6 * MiB)
      .entry("segment_map", R + 20 * MiB, 20 * MiB)
      .entry("alloc", R + 18 * MiB, 10 * MiB)
      .free(R, 12 * MiB)
      .entry("alloc", R, 11 * MiB)
      .entry("segment_map", Q, 2 * MiB)
      .entry("alloc", Q, 1000)
      .free(R + 12 * MiB, 6 * MiB)
      .free(R + 18 * MiB, 10 * MiB);
  const Trace t = import(s);
  CHECK(t.header.source["initial_state"] == "exact");
  // Mapped at the start: the end state's [R, R + 40 MiB) without the page the history maps.
  REQUIRE(t.initial_segments.size() == 1);
  CHECK(t.initial_segments[0].addr == R);
  CHECK(t.initial_segments[0].expandable);
  CHECK(layout(t.initial_segments[0]) == Layout{{12 * MiB, 0}, {8 * MiB, kNoIndex}});
  // The reservations, by their lowest recorded address; the extent each is known to use.
  REQUIRE(t.segment_addresses.size() == 2);
  CHECK(t.segment_addresses[0] == SegmentAddress{Q, Bytes{2 * MiB}, 0, SegmentPool::Small, true});
  CHECK(t.segment_addresses[1] == SegmentAddress{R, Bytes{40 * MiB}, 0, SegmentPool::Large, true});

  const Replay r = replay(t);
  CHECK(r.report.status == RunStatus::Completed);
  CHECK(r.report.addresses.checked == 4);
  CHECK(r.report.addresses.mismatches == 0);
  CHECK(end_difference(t, r) == "");
  CHECK(r.stats.reserved.value == 42 * MiB);  // 2 large pages + 1 small page mapped
  // What `coopsim import` prints: the run line with the recorded setting.
  CHECK(torch_snapshot::simulation_hints(t, "OUT") ==
        std::vector<std::string>{
            "replay: coopsim run OUT --allocator pytorch --check-addresses --set pytorch.expandable_segments=true"});

  // Without expandable_segments the recorded state cannot be installed, and says why.
  PyTorchCachingAllocator plain(Bytes{80 * GiB});
  KeepPolicy keep;
  EngineOptions opt;
  opt.budget = Bytes{80 * GiB};
  Report rep;
  CHECK_THROWS_WITH(run_engine(t, plain, keep, opt, rep),
                    Catch::Contains("replay with pytorch.expandable_segments=true"));
}

TEST_CASE("snapshot cases: a recorded OOM fails at the same request at the recorded capacity", "[snapshot]") {
  // The history takes a 20 MiB segment at A (a 6 MiB request is < 10 MiB: kLargeBuffer), A1 takes
  // its low 6 MiB (14 MiB remainder > 1 MiB: split). Then a 30 MiB request fails: no cached block
  // >= 30 MiB, cudaMalloc(30 MiB) fails with device_free = 16 MiB, nothing is releasable (A is
  // split), and malloc records oom with size = the rounded request (30 MiB) and device_free. The
  // program catches it and frees A1.
  Snap s;
  s.entry("segment_alloc", A, 20 * MiB)
      .entry("alloc", A, 6 * MiB)
      .entry("oom", 0, 30 * MiB, 0, nullptr, 0, {{"device_free", U(16 * MiB)}})
      .free(A, 6 * MiB);
  s.segment(A, 0, "large", {{20 * MiB, 0}});
  const Trace t = import(s);
  // Reserved at the oom: A's 20 MiB; the recorded capacity is 20 MiB + 16 MiB free.
  // Events: alloc A1, mark oom, alloc OOM request, free it, free A1 (segment_alloc is a mark
  // first): mark 0, alloc 1, mark 2, alloc 3 <- the request.
  const auto& ooms = t.header.source["ooms"];
  REQUIRE(ooms.size() == 1);
  CHECK(ooms[0]["size"] == 30 * MiB);
  CHECK(ooms[0]["reserved"] == 20 * MiB);
  CHECK(ooms[0]["capacity"] == 36 * MiB);
  CHECK(ooms[0]["event"] == 3);
  CHECK(t.tensors[1].size.value == 30 * MiB);
  CHECK(t.tensors[1].name == "OOM request");
  CHECK(torch_snapshot::simulation_hints(t, "OUT") ==
        std::vector<std::string>{"replay: coopsim run OUT --allocator pytorch --check-addresses",
                                 "recorded OOM (entry 2, 31457280 bytes): recurs at event 3 with --budget 37748736 "
                                 "(reserved 20971520 + device_free 16777216)"});

  // At the recorded capacity: 20 MiB reserved + cudaMalloc(30 MiB) > 36 MiB, so alloc_block
  // fails; release_cached_blocks finds no whole cached segment; OOM at event 3, 30 MiB.
  const Replay at = replay(t, Bytes{36 * MiB});
  CHECK(at.report.status == RunStatus::OutOfMemory);
  REQUIRE(at.report.oom.has_value());
  CHECK(at.report.oom->event == EventId{3});
  CHECK(at.report.oom->requested.value == 30 * MiB);
  CHECK(at.report.oom->reserved.value == 20 * MiB);
  CHECK(at.report.addresses.mismatches == 0);
  // One byte of budget less still fails there, 30 MiB more does not.
  CHECK(replay(t, Bytes{50 * MiB - 1}).report.oom->event == EventId{3});
  const Replay more = replay(t, Bytes{50 * MiB});
  CHECK(more.report.status == RunStatus::Completed);
  CHECK(more.report.addresses.mismatches == 0);
}

TEST_CASE("snapshot cases: each device of a multi-device snapshot replays on its own", "[snapshot]") {
  // Device 0: segment A with X live at the start, freed, then Y (4 MiB) at A. Device 1: the same
  // addresses in its own address space (another GPU), with its own history: a 2 MiB block live
  // throughout, then Z (8 MiB) at A + 2 MiB (split of the 18 MiB free block behind it).
  Snap s;
  s.segment(A, 0, "large", {{4 * MiB, 4 * MiB}, {16 * MiB, 0}}, 0);
  s.segment(A, 0, "large", {{2 * MiB, 2 * MiB}, {8 * MiB, 8 * MiB}, {10 * MiB, 0}}, 1);
  s.entry("free_requested", A, 4 * MiB, 0, nullptr, 0).entry("free_completed", A, 4 * MiB, 0, nullptr, 0);
  s.entry("alloc", A, 4 * MiB, 0, nullptr, 0);
  s.entry("alloc", A + 2 * MiB, 8 * MiB, 0, nullptr, 1);
  for (int device = 0; device < 2; ++device) {
    INFO("device " << device);
    const Trace t = import(s, device);
    CHECK(t.header.extra["device"] == device);
    CHECK(t.header.source["devices"] == 2);
    const Replay r = replay(t);
    CHECK(r.report.addresses.checked == 1);
    CHECK(r.report.addresses.mismatches == 0);
    CHECK(end_difference(t, r) == "");
    CHECK(torch_snapshot::simulation_hints(t, "OUT").back() ==
          fmt::format("the snapshot records 2 devices; this is device {} (--device N imports another)", device));
  }
  CHECK_THROWS_WITH(import(s, 2),
                    "snap.pickle: device_traces: the snapshot records 2 device(s) (0: 3 entries, "
                    "1: 1 entries); device 2 is not one of them (--device N picks one)");
}
