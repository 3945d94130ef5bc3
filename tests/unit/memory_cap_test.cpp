// limits.max_memory (coopsim/model/memory_cap.hpp, docs/limits.md "Memory cap"): its default
// and syntax, and small inputs describing huge data, generated here, that every reader refuses
// with the one-line budget error before allocating it: a pickle dict shared 2^100 times through
// the memo, 2^28 Nones in a 256 KB gzip pickle, 3*10^8 mark events in a gzip trace, 10^6 tensors,
// a DTR log whose copy-on-write names grow quadratically, a Kineto event with a 10^6-element
// array, a plan of 10^6 empty objects. The budgets are lowered so that each runs in a second;
// the refusal points follow from the documented per-unit costs (worked out in the comments).
#include <catch2/catch.hpp>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "coopsim/base/error.hpp"
#include "coopsim/replay/replay_plan.hpp"
#include "coopsim/import/importers.hpp"
#include "coopsim/formats/pickle.hpp"
#include "coopsim/base/limits.hpp"
#include "coopsim/model/memory_cap.hpp"
#include "coopsim/formats/trace_file.hpp"
#include "test_paths.hpp"

namespace fs = std::filesystem;
using namespace coopsim;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace memory_cap_test {

namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

// One gzip member holding `text`.
std::string gzip_member(const std::string& text) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&z, text.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

Limits budget(std::uint64_t bytes) {
  Limits l;
  l.max_memory = bytes;
  return l;
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Protocol-4 opcodes, as Lib/pickletools.py lists them.
std::string text_op(const std::string& s) { return "\x8c" + std::string(1, static_cast<char>(s.size())) + s; }
const std::string kEmptyDict = "}", kEmptyList = "]", kSetItem = "s", kAppend = "a", kMemoize = "\x94", kPop = "0";
std::string get(int index) { return "h" + std::string(1, static_cast<char>(index)); }

// {'segments': [], 'device_traces': [[]], 'allocator_settings': d_levels} with d_0 = {} and
// d_i = {'a': d_{i-1}, 'b': d_{i-1}}: each level is built once and fetched twice from the memo
// (BINGET), so the pickle grows by 15 bytes per level while the tree doubles.
std::string shared_settings_snapshot(int levels) {
  std::string p = "\x80\x04" + kEmptyDict + kMemoize + kPop;  // d_0 is memo 0
  for (int i = 1; i <= levels; ++i) {
    p += kEmptyDict + text_op("a") + get(i - 1) + kSetItem + text_op("b") + get(i - 1) + kSetItem + kMemoize + kPop;
  }
  p += kEmptyDict + text_op("segments") + kEmptyList + kSetItem + text_op("device_traces") + kEmptyList + kEmptyList +
       kAppend + kSetItem + text_op("allocator_settings") + get(levels) + kSetItem + ".";
  return p;
}

// Values of a JSON tree, keys counted as values (as the importer counts them).
std::uint64_t json_values(const nlohmann::json& j) {
  std::uint64_t n = 1;
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) n += 1 + json_values(v);
  }
  return n;
}

}  // namespace

TEST_CASE("memory: limits.max_memory defaults to half the machine's memory, and is documented", "[memory]") {
  const std::uint64_t machine = machine_memory();
  CHECK(machine > 0);
  CHECK(Limits::kDefaultMaxMemoryPercent == 50);
  CHECK(Limits{}.max_memory == machine / 100 * 50 + machine % 100 * 50 / 100);
  CHECK(limits_from_json(nlohmann::json()).max_memory == Limits{}.max_memory);
  CHECK(limits_from_json({{"max_memory", "25%"}}).max_memory ==
        static_cast<std::uint64_t>(static_cast<long double>(machine) * 25 / 100));
  CHECK(limits_from_json({{"max_memory", "1GiB"}}).max_memory == std::uint64_t{1} << 30);
  CHECK(limits_from_json({{"max_memory", 4096}}).max_memory == 4096);
  const std::string syntax =
      "limits.max_memory: expected a size such as 8GiB or a share of the machine's memory such as "
      "25%, got ";
  CHECK_THROWS_WITH(limits_from_json({{"max_memory", "150%"}}), syntax + "'150%'");
  CHECK_THROWS_WITH(limits_from_json({{"max_memory", "0%"}}), syntax + "'0%'");
  CHECK_THROWS_WITH(limits_from_json({{"max_memory", "lots"}}), syntax + "'lots'");
  CHECK_THROWS_WITH(limits_from_json({{"max_memory", 0}}), "limits.max_memory: must be greater than 0");
  CHECK_THROWS_WITH(limits_from_json({{"max_memory", -5}}), "limits.max_memory: must be greater than 0, got -5");

  // docs/limits.md has the key with the default `coopsim list` shows, and the per-unit table.
  std::ifstream in("docs/limits.md");
  REQUIRE(in);
  std::stringstream docs;
  docs << in.rdbuf();
  bool listed = false;
  for (const ParamDoc& d : limit_param_docs()) {
    CHECK(docs.str().find("| `" + d.key + "` |") != std::string::npos);
    if (d.key == "max_memory") listed = d.default_value == "50%";
  }
  CHECK(listed);
  CHECK(docs.str().find("| `max_memory` | 50% of the machine's memory |") != std::string::npos);
  CHECK(docs.str().find("| event | 32 |") != std::string::npos);
  CHECK(memory_cost::kEvent == 32);
}

TEST_CASE("memory: a 100-level dict shared through the pickle memo is refused at once", "[memory]") {
  const auto dir = test::scratch_dir("memory-shared");
  const std::string bytes = shared_settings_snapshot(100);
  CHECK(bytes.size() == 5 + 100 * 15 + 56);  // 1561 bytes describing 2^102 - 3 values
  // The reader shares memo references: both keys of a level hold the same object.
  MemoryCap memory(64 * kMiB);
  const pickle::ValuePtr root = pickle::parse(bytes, "s.pickle", memory);
  const pickle::Value* top = root->get("allocator_settings");
  REQUIRE(top != nullptr);
  CHECK(top->get("a") == top->get("b"));
  CHECK(memory.used() < kMiB);

  const std::string p = test::write_file(dir, "shared.pickle", bytes);
  CHECK(error_of([&] { (void)import_torch_snapshot(p, {}); }) ==
        p + ": allocator_settings: more than 65536 values once its shared references are expanded (the trace header "
            "copies them); refusing");
  // d_i expands to 2^(i+2) - 3 values: 14 levels (65533) are copied, 15 (131069) are not.
  const Trace ok = import_torch_snapshot(test::write_file(dir, "14.pickle", shared_settings_snapshot(14)), {});
  CHECK(json_values(ok.header.extra["allocator_settings"]) == 65533);
  const std::string p15 = test::write_file(dir, "15.pickle", shared_settings_snapshot(15));
  CHECK_THROWS_WITH(import_torch_snapshot(p15, {}), Catch::StartsWith(p15 + ": allocator_settings: more than 65536"));
  // The copies count in the budget: 65533 values twice (source and extra) at 128 bytes.
  CHECK(error_of([&] {
          (void)import_torch_snapshot(test::write_file(dir, "14b.pickle", shared_settings_snapshot(14)), {},
                                      budget(16 * kMiB));
        }) ==
        (dir / "14b.pickle").string() + ": allocator_settings: more than 16777216 bytes of memory (limits.max_memory)");
}

TEST_CASE("memory: 2^28 Nones in a 256 KB gzip pickle stop at the budget", "[memory]") {
  const auto dir = test::scratch_dir("memory-nones");
  const std::string p = (dir / "nones.pickle.gz").string();
  {
    // PROTO 2, MARK, 2^28 NONE, LIST, STOP, written in 1 MiB pieces.
    gzFile f = gzopen(p.c_str(), "wb9");
    REQUIRE(f != nullptr);
    REQUIRE(gzwrite(f, "\x80\x02(", 3) == 3);
    const std::string nones(kMiB, 'N');
    for (int i = 0; i < 256; ++i) REQUIRE(gzwrite(f, nones.data(), static_cast<unsigned>(nones.size())) == 1 << 20);
    REQUIRE(gzwrite(f, "l.", 2) == 2);
    REQUIRE(gzclose(f) == Z_OK);
  }
  CHECK(fs::file_size(p) < 300'000);
  // The import streams the pickle (pickle_stream.hpp): a 1 MiB window of it is held, and the
  // MARK 8 bytes; then each None is a 48-byte stack slot (None itself is one shared value). When
  // the stack is full at 2^23 slots (384 MiB), growing it would copy them beside themselves: the
  // 2^23 + 1st None, at byte 3 + 2^23, is refused.
  CHECK(error_of([&] { (void)import_torch_snapshot(p, {}, budget(512 * kMiB)); }) ==
        p + ": byte 8388611: NONE: more than 536870912 bytes of memory (limits.max_memory)");
  // With 64 MiB, at 2^20 slots (48 MiB): the 2^20 + 1st None, at byte 3 + 2^20.
  CHECK(error_of([&] { (void)import_torch_snapshot(p, {}, budget(64 * kMiB)); }) ==
        p + ": byte 1048579: NONE: more than 67108864 bytes of memory (limits.max_memory)");
}

TEST_CASE("memory: 3*10^8 mark events in an 8 MB gzip trace stop at the budget", "[memory]") {
  const auto dir = test::scratch_dir("memory-marks");
  // A member of 10^6 marks repeated 300 times (zlib reads concatenated members as one stream).
  const std::string header = "{\"format\":\"coopsim-trace\",\"version\":1}\n";
  std::string marks;
  for (int i = 0; i < 1'000'000; ++i) marks += "{\"kind\":\"mark\",\"label\":\"x\"}\n";
  const std::string member = gzip_member(marks);
  std::string file = gzip_member(header);
  for (int i = 0; i < 300; ++i) file += member;
  const std::string p = test::write_file(dir, "marks.jsonl.gz", file);
  const std::uint64_t isize = marks.size();  // the last member's length: the reservation hint
  REQUIRE(isize == 28'000'000);
  REQUIRE(fs::file_size(p) < isize);
  // Held before the events: the header line (38 bytes) at 64 + 32 per byte, and the label "x"
  // (twice 32 + a 64-byte map node): 3776 bytes. Events are 32 bytes each.
  // 64 MiB: the events vector reserves isize / 24 = 1166666 events from the input's size; when
  // it is full, growing it would copy 37 MB beside the 37 MB held: event 1166667 (line 1166668).
  CHECK(error_of([&] { (void)load_trace(p, budget(64 * kMiB)); }) ==
        p + ":1166668: more than 67108864 bytes of memory (limits.max_memory)");
  // 16 MiB: the reservation itself is cut to 16 MiB / 32 = 524288 events, and the events fill
  // the budget first: (16 MiB - 3776) / 32 = 524170 fit, event 524171 (line 524172) does not.
  CHECK(error_of([&] { (void)load_trace(p, budget(16 * kMiB)); }) ==
        p + ":524172: more than 16777216 bytes of memory (limits.max_memory)");
  // The count cap still comes first when it is the lower one.
  Limits l = budget(64 * kMiB);
  l.max_events = 1000;
  CHECK(error_of([&] { (void)load_trace(p, l); }) == p + ":1002: more than 1000 events (limits.max_events)");
}

TEST_CASE("memory: a trace of 10^6 tensors and a long header line stop at the budget", "[memory]") {
  const auto dir = test::scratch_dir("memory-tensors");
  std::string text = "{\"format\":\"coopsim-trace\",\"version\":1}\n";
  for (int i = 0; i < 1'000'000; ++i) text += "{\"kind\":\"tensor\",\"id\":" + std::to_string(i) + ",\"bytes\":8}\n";
  const std::string p = test::write_file(dir, "tensors.jsonl", text);
  // A tensor holds sizeof(TensorInfo) + the loader's state per tensor.
  const std::uint64_t per = memory_cost::tensor(TensorInfo{}) + memory_cost::kLoaderTensor;
  CHECK(per == 72 + 137);
  // 16 MiB: the header line (38 bytes at 64 + 32 per byte: its parse and its DOM) holds 3648;
  // the tensors vector grows by doubling: at 65536 tensors (13.7 MB held) its 4.7 MB copy does
  // not fit: tensor 65537, on line 65538, is refused.
  CHECK(error_of([&] { (void)load_trace(p, budget(16 * kMiB)); }) ==
        p + ":65538: more than 16777216 bytes of memory (limits.max_memory)");
  Limits l = budget(16 * kMiB);
  l.max_tensors = 1000;
  CHECK(error_of([&] { (void)load_trace(p, l); }) == p + ":1002: more than 1000 tensors (limits.max_tensors)");

  // One header line of 2 MB ("x":[0,0,...]): its parse and its DOM need 96 bytes per byte.
  std::string big = "{\"format\":\"coopsim-trace\",\"version\":1,\"x\":[0";
  for (int i = 0; i < 1'000'000; ++i) big += ",0";
  const std::string h = test::write_file(dir, "header.jsonl", big + "]}\n");
  CHECK(error_of([&] { (void)load_trace(h, budget(64 * kMiB)); }) ==
        h + ":1: more than 67108864 bytes of memory (limits.max_memory)");
  CHECK(load_trace(h, budget(256 * kMiB)).header.extra["x"].size() == 1'000'001);
}

TEST_CASE("memory: importers count what they derive, not only what they read", "[memory]") {
  const auto dir = test::scratch_dir("memory-import");
  SECTION("DTR copy-on-write: each MUTATE of p names its new version p$...$, one '$' longer") {
    // 20000 MUTATEs (1.6 MB of log) would make 2*10^8 bytes of names.
    std::string log =
        "{\"ANNOTATION\":\"START\",\"INSTRUCTION\":\"ANNOTATE\"}\n"
        "{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"p\"}\n"
        "{\"INSTRUCTION\":\"MEMORY\",\"MEMORY\":\"64\",\"NAME\":\"p\"}\n";
    for (int i = 0; i < 20000; ++i)
      log += "{\"ARGS\":[\"p\"],\"INSTRUCTION\":\"MUTATE\",\"MUTATE\":[0],\"NAME\":\"add_\",\"TIME\":\"1\"}\n";
    const std::string p = test::write_file(dir, "cow.log", log);
    REQUIRE(import_dtr_log(p, {}, budget(64 * kMiB)).tensors.size() == 1);  // in place: one tensor
    // The k-th MUTATE holds about 584 bytes (tensor 224, op 168, three events 192) and a name of
    // k + 2 bytes: 584 K + K^2 / 2 passes 64 MiB near K = 11016; the vectors' regrowth copies
    // stop it a little earlier, at the 10923rd (line 10926).
    CHECK(error_of([&] { (void)import_dtr_log(p, DtrOptions{true}, budget(64 * kMiB)); }) ==
          p + ":10926: more than 67108864 bytes of memory (limits.max_memory)");
  }
  SECTION("Kineto: one event's args array, and a top-level field, are counted as their DOM is built") {
    std::string zeros = "0";
    for (int i = 0; i < 1'000'000; ++i) zeros += ",0";
    const std::string k = test::write_file(
        dir, "k.json",
        "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":1,\"args\":{\"x\":[" + zeros + "]}}]}\n");
    CHECK(error_of([&] { (void)import_kineto(k, {}, budget(16 * kMiB)); }) ==
          k + ":1: traceEvents[0]: more than 16777216 bytes of memory (limits.max_memory)");
    const std::string t = test::write_file(dir, "t.json", "{\"meta\":[" + zeros + "],\"traceEvents\":[]}\n");
    CHECK(error_of([&] { (void)import_kineto(t, {}, budget(16 * kMiB)); }) ==
          t + ":1: more than 16777216 bytes of memory (limits.max_memory)");
  }
  SECTION("plans: the document is counted before it is built") {
    std::string text = "[{}";
    for (int i = 0; i < 1'000'000; ++i) text += ",{}";
    text += "]";
    CHECK(error_of([&] { (void)gpu::parse_plan(text, "p.plan.json", budget(64 * kMiB)); }) ==
          "p.plan.json: more than 67108864 bytes of memory (limits.max_memory)");
    // Within the budget the document is read, and refused for what it is.
    CHECK_THROWS_WITH(gpu::parse_plan(text, "p.plan.json", budget(1024 * kMiB)),
                      Catch::StartsWith("p.plan.json: expected an object"));
  }
}

}  // namespace memory_cap_test
