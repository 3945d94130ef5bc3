// The PyTorch memory snapshot export: the pickle writer read back by coopsim's own reader, and
// the snapshot of a hand-built run imported again into the same alloc/free sequence.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "coopsim/formats/pickle_writer.hpp"
#include "coopsim/alloc/allocator.hpp"
#include "coopsim/output/export.hpp"
#include "coopsim/import/torch_snapshot.hpp"
#include "runlog_builder.hpp"

using namespace coopsim;
using coopsim::test::chain_trace;
using coopsim::test::LogBuilder;
using coopsim::test::ref;
using Kind = pickle::Value::Kind;

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

// a, b, c as in the validator's swap example: b swapped out (freed) and back at 0x200.
LogBuilder swap_example() {
  LogBuilder l;
  l.alloc(0, ref(0, 0, 0x0), true, 0).compute(1, 0, 0, 10, {}, {ref(0, 1, 0x0)});
  l.alloc(2, ref(1, 0, 0x200), true, 10).compute(3, 1, 10, 30, {ref(0, 1, 0x0)}, {ref(1, 1, 0x200)});
  l.swap_out(4, 30, 430, ref(1, 1, 0x200)).free(4, ref(1, 0, 0x200), 430).free(4, ref(0, 0, 0x0), 430);
  l.alloc(5, ref(2, 0, 0x0), true, 430).alloc(6, ref(1, 0, 0x200), false, 430).swap_in(6, 430, 830, ref(1, 1, 0x200));
  l.compute(6, 2, 830, 860, {ref(1, 1, 0x200)}, {ref(2, 1, 0x0)}).free(7, ref(1, 0, 0x200), 860);
  return l;  // c stays live at the end
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
