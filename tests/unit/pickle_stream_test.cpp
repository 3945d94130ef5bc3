// Streaming pickle reading (coopsim/formats/pickle_stream.hpp): items taken as lists fill, memo
// entries kept only where a GET reads them, memory given back, files read in chunks; and the
// snapshot importer's streamed path against the tree it replaces. (Every error case of the
// pickle tests is also streamed: pickle_test_support.hpp error_of.)
#include <catch2/catch.hpp>

#include <zlib.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "coopsim/formats/pickle_stream.hpp"
#include "coopsim/formats/pickle_writer.hpp"
#include "coopsim/import/torch_snapshot.hpp"
#include "pickle_test_support.hpp"
#include "test_paths.hpp"

using namespace coopsim;
using namespace pickle_test;
using Kind = pickle::Value::Kind;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace pickle_stream_test {

namespace {

// Takes the dicts appended to any list, keeping their "n".
struct Collect : pickle::ItemSink {
  bool take(const pickle::ValuePtr& list, const pickle::Value& item) override {
    if (item.kind != Kind::Dict || item.get("n") == nullptr) return false;
    lists.push_back(list.get());
    ns.push_back(item.get("n")->integer);
    return true;
  }
  std::vector<const pickle::Value*> lists;
  std::vector<std::int64_t> ns;
};

// {"entries": [{"n": 0}, ..., {"n": count-1}], "more": [{"n": 7}, 8]} by coopsim's writer
// (every string memoized, so "n" is fetched again by every dict after the first).
std::string entries_pickle(int count) {
  pickle::Writer w;
  w.begin_dict();
  w.text("entries");
  w.begin_list();
  for (int i = 0; i < count; ++i) {
    w.begin_dict();
    w.text("n");
    w.integer(i);
    w.end();
  }
  w.end();
  w.text("more");
  w.begin_list();
  w.begin_dict();
  w.text("n");
  w.integer(7);
  w.end();
  w.integer(8);
  w.end();
  w.end();
  return w.finish();
}

}  // namespace

TEST_CASE("pickle stream: list items are taken in order, the rest is built as parse builds it", "[pickle]") {
  const std::string bytes = entries_pickle(2500);  // three APPENDS batches
  MemoryCap memory(Limits::default_max_memory());
  Collect sink;
  const pickle::ValuePtr root = pickle::stream(bytes, "t.pkl", memory, sink);
  REQUIRE(sink.ns.size() == 2501);
  for (int i = 0; i < 2500; ++i) CHECK(sink.ns[static_cast<std::size_t>(i)] == i);
  CHECK(sink.ns.back() == 7);
  // A list leaves out the taken items at its end, and holds taken() for those before a value.
  const pickle::Value& entries = *root->get("entries");
  CHECK(entries.items.empty());
  CHECK(sink.lists.front() == &entries);
  const pickle::Value& more = *root->get("more");
  REQUIRE(more.items.size() == 2);
  CHECK(more.items[0] == pickle::taken());
  CHECK(more.items[1]->integer == 8);
  CHECK(sink.lists.back() == &more);
  // Taken items were given back: a fraction of what the tree holds.
  MemoryCap tree(Limits::default_max_memory());
  (void)pickle::parse(bytes, "t.pkl", tree);
  CHECK(memory.used() * 4 < tree.used());
}

TEST_CASE("pickle stream: a taken item fetched again from the memo is whole there", "[pickle]") {
  // PROTO 4, EMPTY_DICT, MEMOIZE(0), MARK, 'l', MEMOIZE(1), EMPTY_LIST, MEMOIZE(2),
  // EMPTY_DICT, MEMOIZE(3), 'n', MEMOIZE(4), BININT1 5, SETITEM, APPEND,
  // 'again', MEMOIZE(5), BINGET 3, SETITEMS, STOP: {"l": [d], "again": d} with d = {"n": 5}.
  const std::string bytes =
      "\x80\x04}\x94(\x8c\x01l\x94]\x94}\x94\x8c\x01n\x94K\x05s"
      "a\x8c\x05"
      "again\x94h\x03u."s;
  MemoryCap memory(Limits::default_max_memory());
  Collect sink;
  const pickle::ValuePtr root = pickle::stream(bytes, "t.pkl", memory, sink);
  CHECK(sink.ns == std::vector<std::int64_t>{5});
  CHECK(root->get("l")->items.empty());  // its one item taken, at its end
  REQUIRE(root->get("again")->get("n") != nullptr);
  CHECK(root->get("again")->get("n")->integer == 5);
}

TEST_CASE("pickle stream: files are read in chunks, plain and gzip, with parse_file's errors", "[pickle]") {
  const auto dir = test::scratch_dir("pickle-stream");
  const std::string bytes = entries_pickle(300000);  // several MiB: more than one chunk
  const std::string plain = (dir / "e.pickle").string(), packed = (dir / "e.pickle.gz").string();
  std::ofstream(plain, std::ios::binary) << bytes;
  {
    gzFile f = gzopen(packed.c_str(), "wb1");
    REQUIRE(f != nullptr);
    REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
    gzclose(f);
  }
  for (const std::string& path : {plain, packed}) {
    MemoryCap memory(Limits::default_max_memory());
    Collect sink;
    const pickle::ValuePtr root = pickle::stream_file(path, Limits{}.max_input_bytes, memory, sink);
    CHECK(sink.ns.size() == 300001);
    CHECK(sink.ns[123456] == 123456);
    CHECK(root->get("more")->items.at(1)->integer == 8);
  }
  // Truncated: the same error as parse_file (gzip: the stream's; plain: the pickle's, at its offset).
  const std::string cut = (dir / "cut.pickle").string();
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() - 1000);
  MemoryCap memory(Limits::default_max_memory());
  TakeAll all;
  std::string streamed, parsed;
  try {
    pickle::stream_file(cut, Limits{}.max_input_bytes, memory, all);
  } catch (const Error& e) {
    streamed = e.what();
  }
  try {
    pickle::parse_file(cut);
  } catch (const Error& e) {
    parsed = e.what();
  }
  CHECK(!parsed.empty());
  CHECK(streamed == parsed);
}

namespace {

// Opens a snapshot dict with no segments and its device_traces list.
void begin_snapshot(pickle::Writer& w) {
  w.begin_dict();
  w.text("segments");
  w.begin_list();
  w.end();
  w.text("device_traces");
  w.begin_list();
}

// A snapshot of `count` alloc / free_completed pairs (three APPENDS batches for 1250: from the
// second dict on, every key is a memo reference, so whole batches take the flat path), with
// `bad` (if any) written over entry `at`.
std::string history_pickle(int count, int at = -1, const std::function<void(pickle::Writer&)>& bad = {}) {
  pickle::Writer w;
  begin_snapshot(w);
  w.begin_list();
  for (int i = 0; i < 2 * count; ++i) {
    if (i == at && bad) {
      bad(w);
      continue;
    }
    w.begin_dict();
    w.text("action");
    w.text(i % 2 == 0 ? "alloc" : "free_completed");
    w.text("addr");
    w.integer(4096 + 512 * (i / 2 % 7));
    w.text("size");
    w.integer(512);
    w.text("stream");
    w.integer(0);
    w.end();
  }
  w.end();
  w.end();
  w.end();
  return w.finish();
}

std::string import_problem(const std::function<void()>& import) {
  try {
    import();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("pickle stream: a history's batches are imported whole or opcode by opcode, as the tree reads them",
          "[pickle]") {
  auto same = [](const std::string& bytes, int device = 0) {
    const TorchSnapshotOptions options{device};
    const std::string tree = import_problem(
        [&] { (void)torch_snapshot::import_value(*pickle::parse(bytes, "s.pickle"), "s.pickle", options); });
    const std::string streamed =
        import_problem([&] { (void)torch_snapshot::import_bytes(bytes, "s.pickle", options); });
    CHECK(streamed == tree);
    return streamed;
  };
  // Every batch taken: the same trace.
  const std::string plain = history_pickle(1250);
  const Trace tree = torch_snapshot::import_value(*pickle::parse(plain, "s.pickle"), "s.pickle", {});
  const Trace streamed = torch_snapshot::import_bytes(plain, "s.pickle", {});
  CHECK(streamed.header == tree.header);
  CHECK(streamed.tensors == tree.tensors);
  CHECK(streamed.events == tree.events);
  CHECK(tree.events.size() == 2500);
  // A device that is not there: the listing counts the entries the list leaves out.
  CHECK(same(plain, 1) ==
        "s.pickle: device_traces: the snapshot records 1 device(s) (0: 2500 entries); device 1 is not one of them "
        "(--device N picks one)");
  // One bad entry in the last batch: that batch goes opcode by opcode, the entry stays in the
  // tree and is refused with its key, as the tree refuses it.
  const std::string zero = history_pickle(1250, 2200, [](pickle::Writer& w) {
    w.begin_dict();
    w.text("action");
    w.text("alloc");
    w.text("addr");
    w.integer(4096);
    w.text("size");
    w.integer(0);
    w.end();
  });
  CHECK(same(zero) == "s.pickle: device_traces[0][2200].size: missing or 0 for a 'alloc' entry");
  // A value that is no dict between taken entries: taken() stands for those before it.
  const std::string seven = history_pickle(1250, 1500, [](pickle::Writer& w) { w.integer(7); });
  CHECK(same(seven) == "s.pickle: device_traces[0][1500]: expected a dict (got 7)");
  // An unknown key is read past, as Value::get passes it; a dict without "action" is no entry.
  const std::string extra = history_pickle(1250, 1700, [](pickle::Writer& w) {
    w.begin_dict();
    w.text("size");
    w.integer(512);
    w.end();
  });
  CHECK(same(extra) == "s.pickle: device_traces[0][1700]: missing field 'action'");
}

TEST_CASE("pickle stream: a snapshot whose entry list is shared elsewhere is imported from the tree", "[pickle]") {
  // {"segments": [], "device_traces": [L], "copy": L}: L's entries must stay whole for "copy".
  pickle::Writer w;
  begin_snapshot(w);
  const std::uint32_t list = w.begin_shared_list();
  for (int i = 0; i < 3; ++i) {
    w.begin_dict();
    w.text("action");
    w.text(i < 2 ? "alloc" : "free_completed");
    w.text("addr");
    w.integer(i == 1 ? 4096 : 0);
    w.text("size");
    w.integer(512);
    w.end();
  }
  w.end();
  w.end();
  w.text("copy");
  w.shared(list);
  w.end();
  const std::string bytes = w.finish();
  const Trace tree = torch_snapshot::import_value(*pickle::parse(bytes, "s.pickle"), "s.pickle", {});
  const Trace streamed = torch_snapshot::import_bytes(bytes, "s.pickle", {});
  CHECK(streamed.header == tree.header);
  CHECK(streamed.tensors == tree.tensors);
  CHECK(streamed.events == tree.events);
  CHECK(tree.events.size() == 3);
}

}  // namespace pickle_stream_test
