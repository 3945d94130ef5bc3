// The PyTorch memory snapshot export: the pickle writer read back by coopsim's own reader, the
// snapshot of a hand-built run imported again into the same alloc/free sequence, the pytorch
// model's real segments (a hand-worked run that frees one, replayed from its own export) and the
// frames that name each block.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "coopsim/alloc/allocator.hpp"
#include "coopsim/formats/pickle_writer.hpp"
#include "coopsim/import/torch_snapshot.hpp"
#include "coopsim/output/export.hpp"
#include "runlog_builder.hpp"
#include "torch_snapshot_test_support.hpp"

using namespace coopsim;
using coopsim::test::chain_trace;
using coopsim::test::LogBuilder;
using coopsim::test::ref;
using coopsim::test::TraceBuilder;
using Kind = pickle::Value::Kind;
using snapshot_test::MiB;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace export_torch_snapshot_test {

namespace {

constexpr std::uint64_t kBase = DeviceMemory::kBaseAddress;

// (action, address, bytes) of every alloc and free of a trace, in order; a free's address and
// bytes are those of its tensor's allocation.
using Step = std::tuple<std::string, std::uint64_t, std::uint64_t>;
std::vector<Step> alloc_free_sequence(const Trace& t) {
  std::vector<Step> out;
  std::map<TensorId, std::uint64_t> addr;
  for (const TraceEvent& e : t.events) {
    if (e.kind == EventKind::Alloc) {
      addr[e.tensor()] = e.addr;
      out.emplace_back("alloc", e.addr, t.tensor(e.tensor()).size.value);
    } else if (e.kind == EventKind::Free) {
      out.emplace_back("free", addr.at(e.tensor()), t.tensor(e.tensor()).size.value);
    }
  }
  return out;
}

Trace round_trip(const RunLog& log, const Report& report = {}) {
  const std::string bytes = torch_snapshot_pickle(chain_trace(), log, report);
  return torch_snapshot::import_value(*pickle::parse(bytes, "out.pickle"), "out.pickle", TorchSnapshotOptions{});
}

// a, b, c as in the auditor's swap example: b swapped out (freed) and back at 0x200.
LogBuilder swap_example() {
  LogBuilder l;
  l.alloc(0, ref(0, 0, 0x0), true, 0).compute(1, 0, 0, 10, {}, {ref(0, 1, 0x0)});
  l.alloc(2, ref(1, 0, 0x200), true, 10).compute(3, 1, 10, 30, {ref(0, 1, 0x0)}, {ref(1, 1, 0x200)});
  l.swap_out(4, 30, 430, ref(1, 1, 0x200)).free(4, ref(1, 0, 0x200), 430).free(4, ref(0, 0, 0x0), 430);
  l.alloc(5, ref(2, 0, 0x0), true, 430).alloc(6, ref(1, 0, 0x200), false, 430).swap_in(6, 430, 830, ref(1, 1, 0x200));
  l.compute(6, 2, 830, 860, {ref(1, 1, 0x200)}, {ref(2, 1, 0x0)}).free(7, ref(1, 0, 0x200), 860);
  return l;  // c stays live at the end
}

// (action, address, size) of every entry of device_traces[0].
std::vector<Step> entries_of(const pickle::Value& root) {
  std::vector<Step> out;
  for (const auto& e : root.get("device_traces")->items[0]->items) {
    const auto* addr = e->get("addr");
    out.emplace_back(e->get("action")->text, addr != nullptr ? static_cast<std::uint64_t>(addr->integer) : 0,
                     static_cast<std::uint64_t>(e->get("size")->integer));
  }
  return out;
}

// The name of the single frame of an entry or block.
std::string frame_name(const pickle::Value& v) {
  const auto* frames = v.get("frames");
  REQUIRE(frames != nullptr);
  REQUIRE(frames->items.size() == 1);
  return frames->items[0]->get("name")->text;
}

}  // namespace

TEST_CASE("pickle writer: plain data read back by coopsim's reader", "[export][pickle]") {
  const std::vector<std::int64_t> ints{0,
                                       1,
                                       255,
                                       256,
                                       65535,
                                       65536,
                                       -1,
                                       -256,
                                       std::numeric_limits<std::int32_t>::min(),
                                       std::numeric_limits<std::int32_t>::max(),
                                       std::int64_t{1} << 31,
                                       -(std::int64_t{1} << 31) - 1,
                                       std::int64_t{1} << 40,
                                       0x7f0000000200,
                                       -(std::int64_t{1} << 40),
                                       std::numeric_limits<std::int64_t>::max(),
                                       std::numeric_limits<std::int64_t>::min()};
  pickle::Writer w;
  w.begin_dict();
  w.text("ints");
  w.begin_list();
  for (const auto v : ints) w.integer(v);
  w.end();
  w.text("many");
  w.begin_list();
  for (int i = 0; i < 2500; ++i) w.text(i % 2 == 0 ? "even" : std::string(300, 'x'));
  w.end();
  w.text("flags");
  w.begin_list();
  w.boolean(true);
  w.boolean(false);
  w.int_pair(3, -4);
  w.begin_list();
  w.end();
  w.end();
  for (int i = 0; i < 1200; ++i) {  // more pairs than one SETITEMS batch
    w.text("k" + std::to_string(i));
    w.integer(i);
  }
  w.end();
  const std::string bytes = w.finish();
  CHECK(bytes.substr(0, 2) == std::string("\x80\x04", 2));
  CHECK(bytes.back() == '.');
  const auto root = pickle::parse(bytes, "w.pickle");
  REQUIRE(root->kind == Kind::Dict);
  CHECK(root->entries.size() == 3 + 1200);
  const auto* got = root->get("ints");
  REQUIRE(got != nullptr);
  REQUIRE(got->items.size() == ints.size());
  for (std::size_t i = 0; i < ints.size(); ++i) CHECK(got->items[i]->integer == ints[i]);
  const auto* many = root->get("many");
  REQUIRE(many->items.size() == 2500);
  CHECK(many->items[2498]->text == "even");
  CHECK(many->items[2499]->text == std::string(300, 'x'));
  const auto* flags = root->get("flags");
  REQUIRE(flags->items.size() == 4);
  CHECK(flags->items[0]->boolean);
  CHECK(!flags->items[1]->boolean);
  CHECK(flags->items[2]->kind == Kind::Tuple);
  CHECK(flags->items[2]->items[1]->integer == -4);
  CHECK(flags->items[3]->kind == Kind::List);
  CHECK(root->get("k1199")->integer == 1199);
}

TEST_CASE("torch snapshot: the run reads back as the same alloc/free sequence", "[export][pickle]") {
  const LogBuilder l = swap_example();
  const Trace t = round_trip(l.log());
  // bestfit-style addresses from 0 are moved up to the device base.
  CHECK(alloc_free_sequence(t) == std::vector<Step>{{"alloc", kBase, 400},
                                                    {"alloc", kBase + 0x200, 400},
                                                    {"free", kBase + 0x200, 400},
                                                    {"free", kBase, 400},
                                                    {"alloc", kBase, 400},
                                                    {"alloc", kBase + 0x200, 400},
                                                    {"free", kBase + 0x200, 400}});
  // One segment covers every block: allocated before the first alloc, kept to the end, where it
  // holds c (live) and the free rest.
  REQUIRE(t.segment_addresses.size() == 1);
  CHECK(t.segment_addresses[0].addr == kBase);
  CHECK(t.initial_segments.empty());
  const auto end = torch_snapshot::final_segments(t);
  REQUIRE(end.has_value());
  REQUIRE(end->size() == 1);
  CHECK((*end)[0].addr == kBase);
  REQUIRE((*end)[0].blocks.size() == 2);
  CHECK((*end)[0].blocks[0].size.value == 512);
  CHECK((*end)[0].blocks[0].requested.value == 400);
  CHECK((*end)[0].blocks[0].allocated);
  CHECK(!(*end)[0].blocks[1].allocated);
  CHECK((*end)[0].blocks[1].size.value == 512);
  CHECK(t.header.source.at("initial_state") == "exact");
}

TEST_CASE("torch snapshot: address-blind runs get consecutive addresses; OOM runs end with an oom entry",
          "[export][pickle]") {
  LogBuilder l(1 << 20, /*address_aware=*/false);
  l.alloc(0, ref(0, 0, 0x10, 400), true, 0).alloc(2, ref(1, 0, 0x1a0, 400), true, 5);  // fungible's counter
  l.free(4, ref(0, 0, 0x10, 400), 9);
  Report r;
  r.status = RunStatus::OutOfMemory;
  r.budget = Bytes{1 << 20};
  r.oom = OomPoint{};
  r.oom->requested = Bytes{4096};
  r.oom->reserved = Bytes{1024};
  const Trace t = round_trip(l.log(), r);
  // The oom entry reads back as the failed request: an alloc without an address, freed at once.
  CHECK(alloc_free_sequence(t) == std::vector<Step>{{"alloc", kBase, 400},
                                                    {"alloc", kBase + 400, 400},
                                                    {"free", kBase, 400},
                                                    {"alloc", 0, 4096},
                                                    {"free", 0, 4096}});
  // reserved: the importer's sum of the exported segments (800 bytes) at the oom entry.
  CHECK(t.header.source.at("ooms") == nlohmann::json::parse(
                                          R"([{"entry": 5, "size": 4096, "device_free": 1047552, "reserved": 800,
                                               "capacity": 1048352, "event": 5}])"));
}

TEST_CASE("pickle writer: a shared list is written once and read back as one object", "[export][pickle]") {
  pickle::Writer w;
  w.begin_list();
  for (int i = 0; i < 300; ++i) w.text("s" + std::to_string(i));  // memo indices past 255: LONG_BINGET
  const std::uint32_t id = w.begin_shared_list();
  w.integer(7);
  w.text("s3");
  w.end();
  w.shared(id);
  w.shared(id);
  w.end();
  CHECK(id == 300);  // after the 300 strings' memo entries
  const auto root = pickle::parse(w.finish(), "shared.pickle");
  REQUIRE(root->items.size() == 303);
  const auto& first = root->items[300];
  REQUIRE(first->kind == Kind::List);
  REQUIRE(first->items.size() == 2);
  CHECK(first->items[0]->integer == 7);
  CHECK(first->items[1]->text == "s3");
  CHECK(root->items[301].get() == first.get());
  CHECK(root->items[302].get() == first.get());
  pickle::Writer unused;
  CHECK_THROWS_AS(unused.shared(0), std::logic_error);
}

TEST_CASE("torch snapshot: the pytorch model's segments, one freed to retry an allocation", "[export][pickle]") {
  // Budget 40 MiB. a (12 MiB) takes a 12 MiB segment at the device base and is freed: the
  // segment stays cached. b (30 MiB) does not fit in it and a new 30 MiB segment would make
  // 42 MiB reserved, so malloc frees the cached segment (release_cached_blocks) and retries
  // (num_alloc_retries 1); b's segment comes from the device after a's (bump pointer, never
  // reused). b is live at the end.
  TraceBuilder tb;
  const auto a = tb.tensor(12 * MiB, TensorRole::Activation, "a");
  const auto b = tb.tensor(30 * MiB, TensorRole::Gradient, "b");
  const auto make_a = tb.op("make_a", 10, {}, {a});
  const auto make_b = tb.op("make_b", 10, {}, {b});
  tb.alloc(a).compute(make_a).free(a).alloc(b).compute(make_b);
  Trace trace = tb.trace();
  trace.path = "runs/hand.jsonl";
  const Bytes budget{40 * MiB};
  PyTorchCachingAllocator model(budget);
  KeepPolicy keep;
  RunLog log;
  EngineOptions opt;
  opt.budget = budget;
  opt.log = &log;
  Report report;
  run_engine(trace, model, keep, opt, report);
  REQUIRE(report.status == RunStatus::Completed);
  CHECK(model.stats().alloc_retries == 1);
  CHECK(model.stats().device_frees == 1);
  REQUIRE(log.segments_logged);
  CHECK(log.end_segments == *model.snapshot());

  const std::string bytes = torch_snapshot_pickle(trace, log, report);
  const auto root = pickle::parse(bytes, "s.pickle");
  const std::uint64_t b_at = kBase + 12 * MiB;
  CHECK(entries_of(*root) == std::vector<Step>{{"segment_alloc", kBase, 12 * MiB},
                                               {"alloc", kBase, 12 * MiB},
                                               {"free_requested", kBase, 12 * MiB},
                                               {"free_completed", kBase, 12 * MiB},
                                               {"segment_free", kBase, 12 * MiB},
                                               {"segment_alloc", b_at, 30 * MiB},
                                               {"alloc", b_at, 30 * MiB}});
  // The final segments are the model's: one large-pool segment holding b.
  const auto& segments = root->get("segments")->items;
  REQUIRE(segments.size() == 1);
  const auto& s = *segments[0];
  CHECK(static_cast<std::uint64_t>(s.get("address")->integer) == b_at);
  CHECK(s.get("total_size")->integer == static_cast<std::int64_t>(30 * MiB));
  CHECK(s.get("segment_type")->text == "large");
  CHECK(!s.get("is_expandable")->boolean);
  REQUIRE(s.get("blocks")->items.size() == 1);
  const auto& block = *s.get("blocks")->items[0];
  CHECK(block.get("state")->text == "active_allocated");
  CHECK(block.get("requested_size")->integer == static_cast<std::int64_t>(30 * MiB));

  // Frames: tensor, role and producing op; filename the trace's file name, line the tensor's id.
  const auto& entries = root->get("device_traces")->items[0]->items;
  CHECK(frame_name(*entries[1]) == "a [activation] output of make_a (op 0)");
  CHECK(entries[1]->get("frames")->items[0]->get("filename")->text == "hand.jsonl");
  CHECK(entries[1]->get("frames")->items[0]->get("line")->integer == 0);
  CHECK(frame_name(*entries[6]) == "b [gradient] output of make_b (op 1)");
  CHECK(frame_name(block) == "b [gradient] output of make_b (op 1)");
  // A segment change carries the frames of the allocation it was made for: a's segment_alloc,
  // and the segment_free and new segment that served b.
  CHECK(frame_name(*entries[0]) == frame_name(*entries[1]));
  CHECK(frame_name(*entries[4]) == frame_name(*entries[6]));
  CHECK(frame_name(s) == frame_name(*entries[6]));
  // One frames list per block, shared by its entries.
  CHECK(entries[1]->get("frames") == entries[3]->get("frames"));

  // Round trip: imported and replayed by the pytorch model under the same budget, every address
  // and the end state come back (the retry frees the same segment).
  const Trace imported = torch_snapshot::import_value(*root, "s.pickle", TorchSnapshotOptions{});
  const snapshot_test::Replay replayed = snapshot_test::replay(imported, budget);
  CHECK(replayed.report.addresses.checked == 2);
  CHECK(replayed.report.addresses.mismatches == 0);
  CHECK(replayed.stats.alloc_retries == 1);
  CHECK(replayed.end == log.end_segments);
  CHECK(torch_snapshot::compare_end_state(*torch_snapshot::final_segments(imported), replayed.end).segments_match);
}

TEST_CASE("torch snapshot: frames say how a block was filled: swap-in, recompute, copy-on-write", "[export][pickle]") {
  LogBuilder l = swap_example();  // b swapped out and back in
  // a evicted and recomputed by f at 0x400; c copied before h writes it at 0x600; b placed at
  // 0x800 for a copy the run never made.
  l.alloc(8, ref(0, 0, 0x400), false, 900).recompute(8, 0, 0, 900, 910, {}, {ref(0, 1, 0x400)});
  l.alloc(8, ref(2, 0, 0x600), false, 910).compute(8, 2, 910, 940, {}, {ref(2, 2, 0x600)});
  l.alloc(8, ref(1, 0, 0x800), false, 940);
  const auto root = pickle::parse(torch_snapshot_pickle(chain_trace(), l.log(), {}), "s.pickle");
  std::vector<std::string> allocs;
  for (const auto& e : root->get("device_traces")->items[0]->items) {
    if (e->get("action")->text == "alloc") allocs.push_back(frame_name(*e));
  }
  CHECK(allocs ==
        std::vector<std::string>{"a [activation] output of f (op 0)", "b [gradient] output of g (op 1)",
                                 "c [activation] output of h (op 2)", "b [gradient] swap-in (output of g (op 1))",
                                 "a [activation] recompute of f (op 0)", "c [activation] copy-on-write for h (op 2)",
                                 "b [gradient] placed for a swap-in or recompute the run did not finish"});
  // Derived segments (this log has no segment records): the range's first allocation names it.
  REQUIRE(!root->get("segments")->items.empty());
  CHECK(frame_name(*root->get("segments")->items[0]) == "a [activation] output of f (op 0)");
}

}  // namespace export_torch_snapshot_test
