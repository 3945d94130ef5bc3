// Trace format v1: loading a valid trace, summary figures, gzip, round trip through write_trace.
// Malformed inputs are covered by tests/catalogue/trace_catalogue_test.cpp.
#include <catch2/catch.hpp>

#include <chrono>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>

#include "coopsim/base/error.hpp"
#include "coopsim/model/trace.hpp"
#include "coopsim/formats/trace_file.hpp"
#include "test_paths.hpp"

namespace fs = std::filesystem;
using namespace coopsim;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace trace_loader_test {

namespace {

const std::string kSmall = "tests/data/traces/small_v1.jsonl";

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::uint32_t tensor_index(const Trace& t, std::uint64_t file_id) {
  for (const auto& info : t.tensors) {
    if (info.file_id == file_id) return index_of(info.id);
  }
  FAIL("no tensor " << file_id);
  return kNoIndex;
}

// Everything but path and content_hash.
void require_same_content(const Trace& a, const Trace& b) {
  REQUIRE(a.header == b.header);
  REQUIRE(a.tensors == b.tensors);
  REQUIRE(a.ops == b.ops);
  REQUIRE(a.events == b.events);
  REQUIRE(a.labels == b.labels);
}

}  // namespace

TEST_CASE("trace v1: a valid multi-iteration trace loads with dense ids, views and unit conversion", "[trace]") {
  const Trace t = load_trace(kSmall);
  CHECK(t.path == kSmall);

  SECTION("header") {
    CHECK(t.header.format == "coopsim-trace");
    CHECK(t.header.version == 1);
    CHECK(t.header.model == "mlp-tiny");
    CHECK(t.header.time_unit == "us");
    CHECK(t.header.iterations == 2);
    CHECK(t.header.source == nlohmann::json{{"tool", "hand-written"}, {"seed", 1}});
    CHECK(t.header.extra == nlohmann::json{{"device", "test-gpu"}, {"x_note", "kept in header extra"}});
  }

  SECTION("tensors: dense ids in definition order, roles, names, views") {
    REQUIRE(t.tensors.size() == 8);
    const std::uint64_t file_ids[] = {10, 11, 20, 21, 30, 40, 50, 60};
    for (std::uint32_t i = 0; i < 8; ++i) {
      CHECK(index_of(t.tensors[i].id) == i);
      CHECK(t.tensors[i].file_id == file_ids[i]);
    }
    CHECK(t.tensors[0].role == TensorRole::Parameter);
    CHECK(t.tensors[0].name == "fc.weight");
    CHECK(t.tensors[0].size == 4096_B);
    CHECK(t.tensors[1].role == TensorRole::Input);
    CHECK(t.tensors[5].role == TensorRole::Gradient);
    CHECK(t.tensors[6].role == TensorRole::OptimizerState);
    CHECK(t.tensors[7].role == TensorRole::Workspace);
    CHECK(t.tensors[7].name.empty());
    // 21 is a view of 20: no storage of its own, storage root 20.
    const TensorInfo& view = t.tensors[3];
    CHECK(view.is_view());
    CHECK(view.view_of == TensorId{tensor_index(t, 20)});
    CHECK(view.size == 0_B);
    CHECK(t.storage_of(3) == 2);
    CHECK(t.storage_of(2) == 2);
    for (std::uint32_t i : {0U, 1U, 2U, 4U, 5U, 6U, 7U}) CHECK_FALSE(t.tensors[i].is_view());
  }

  SECTION("ops: durations converted from us to ns, in-place and random flags") {
    REQUIRE(t.ops.size() == 6);
    const std::uint64_t file_ids[] = {1, 2, 6, 3, 4, 5};
    const std::int64_t ns[] = {1500, 0, 1, 250, 3000, 500};
    for (std::uint32_t i = 0; i < 6; ++i) {
      CHECK(index_of(t.ops[i].id) == i);
      CHECK(t.ops[i].file_id == file_ids[i]);
      CHECK(t.ops[i].duration == SimTime{ns[i]});
    }
    const OpInfo& linear = t.ops[0];
    CHECK(linear.name == "linear");
    REQUIRE(linear.inputs.size() == 2);
    CHECK(index_of(linear.inputs[0]) == 0);
    CHECK(index_of(linear.inputs[1]) == 1);
    REQUIRE(linear.outputs.size() == 1);
    CHECK(index_of(linear.outputs[0]) == 2);
    const OpInfo& flatten = t.ops[1];
    REQUIRE(flatten.views.size() == 1);
    CHECK(index_of(flatten.views[0].first) == 3);
    CHECK(index_of(flatten.views[0].second) == 2);
    CHECK(t.ops[2].random);
    CHECK_FALSE(t.ops[0].random);
    const OpInfo& sgd = t.ops[5];
    CHECK(sgd.outputs.empty());
    REQUIRE(sgd.mutated.size() == 2);
    CHECK(index_of(sgd.mutated[0]) == 0);
    CHECK(index_of(sgd.mutated[1]) == 6);
  }

  SECTION("events: compact, times in ns, labels deduplicated") {
    REQUIRE(t.events.size() == 35);
    const TraceEvent& first = t.events[0];
    REQUIRE(first.kind == EventKind::Alloc);
    CHECK(first.tensor() == TensorId{0});
    CHECK(first.time == SimTime{0});
    CHECK(first.addr == 140737488355328ULL);
    CHECK(t.events[2].stream == 1);
    REQUIRE(t.events[3].kind == EventKind::Iteration);
    CHECK(t.events[3].iteration_index() == 0);
    REQUIRE(t.events[6].kind == EventKind::Compute);
    CHECK(t.events[6].compute_op() == OpId{1});  // op 2 (flatten)
    CHECK(t.events[6].time == SimTime{2500});
    REQUIRE(t.events[8].kind == EventKind::Compute);
    CHECK(t.events[8].compute_op() == OpId{2});  // op 6 (dropout)
    CHECK(t.events[9].kind == EventKind::Free);
    CHECK(t.events[9].time == SimTime{2501});
    const TraceEvent& mark = t.events[12];
    CHECK(mark.kind == EventKind::Mark);
    CHECK(mark.time == SimTime{2751});
    const TraceEvent& write = t.events[18];
    REQUIRE(write.kind == EventKind::Access);
    CHECK(write.write);
    CHECK(write.access_op() == OpId{5});
    CHECK(write.time == SimTime{5751});
    const TraceEvent& read = t.events[24];
    REQUIRE(read.kind == EventKind::Access);
    CHECK_FALSE(read.write);
    CHECK(read.tensor() == TensorId{3});  // the view; storage_of resolves it
    CHECK_FALSE(read.access_op());
    CHECK(read.stream == 2);
    CHECK_FALSE(read.timed());
    CHECK(read.time == TraceEvent::kNotRecorded);
    REQUIRE(t.events.back().kind == EventKind::Mark);
    CHECK(t.labels == std::vector<std::string>{"backward", "snapshot"});
    REQUIRE(t.events[27].kind == EventKind::Mark);
    CHECK(t.events[27].label_index() == 0);  // second "backward"
    CHECK(t.events.back().label_index() == 1);
  }

  SECTION("summary figures (peak worked out by hand)") {
    const TraceSummary s = summarize(t);
    CHECK(s.tensors == 8);
    CHECK(s.views == 1);
    CHECK(s.ops == 6);
    CHECK(s.events == 35);
    CHECK(s.allocs == 10);
    CHECK(s.frees == 7);
    CHECK(s.accesses == 2);
    CHECK(s.computes == 11);
    CHECK(s.iterations == 2);
    // Live before the backward alloc of 40 in iteration 0: 10 + 11 + 50 + 20 + 30 =
    // 4096 + 1024 + 4096 + 2048 + 16 = 11280; plus 40 (4096) = 15376.
    CHECK(s.peak_live == 15376_B);
    // 9216 (10, 11, 50) + 6672 (20, 60, 30, 40) + 6160 (20, 30, 40).
    CHECK(s.total_allocated == 22048_B);
    // (1500 + 0 + 1 + 250 + 3000 + 500) + (1500 + 0 + 250 + 3000 + 500).
    CHECK(s.compute_time == SimTime{10501});
  }

  SECTION("content hash is FNV-1a 64 over the file bytes") { CHECK(t.content_hash == fnv1a(read_file(kSmall))); }
}

TEST_CASE("trace v1: names for roles and event kinds", "[trace]") {
  for (const TensorRole r : {TensorRole::Parameter, TensorRole::Input, TensorRole::Activation, TensorRole::Gradient,
                             TensorRole::OptimizerState, TensorRole::Workspace, TensorRole::Other}) {
    CHECK(parse_role(to_string(r)) == r);
  }
  CHECK(to_string(TensorRole::OptimizerState) == "optimizer_state");
  CHECK_FALSE(parse_role("weights").has_value());
  CHECK_FALSE(parse_role("").has_value());
  CHECK(to_string(EventKind::Alloc) == "alloc");
  CHECK(to_string(EventKind::Free) == "free");
  CHECK(to_string(EventKind::Access) == "access");
  CHECK(to_string(EventKind::Compute) == "compute");
  CHECK(to_string(EventKind::Iteration) == "iteration");
  CHECK(to_string(EventKind::Mark) == "mark");
}

TEST_CASE("trace v1: round trip through write_trace, plain and gzip", "[trace]") {
  const fs::path dir = test::scratch_dir("trace-roundtrip");
  const Trace original = load_trace(kSmall);
  const std::string plain = (dir / "rt.jsonl").string();
  const std::string gz = (dir / "rt.jsonl.gz").string();
  write_trace(original, plain);
  write_trace(original, gz);
  CHECK_FALSE(fs::exists(plain + ".tmp"));
  CHECK_FALSE(fs::exists(gz + ".tmp"));

  const Trace a = load_trace(plain);
  const Trace b = load_trace(gz);
  require_same_content(original, a);
  require_same_content(original, b);
  CHECK(a.content_hash == b.content_hash);
  CHECK(a.content_hash == fnv1a(read_file(plain)));

  // gzip is detected by magic bytes, not by name.
  const std::string gz_bytes = read_file(gz);
  REQUIRE(gz_bytes.size() > 2);
  CHECK(static_cast<unsigned char>(gz_bytes[0]) == 0x1f);
  CHECK(static_cast<unsigned char>(gz_bytes[1]) == 0x8b);
  const fs::path disguised = dir / "gzip-without-suffix.jsonl";
  fs::copy_file(gz, disguised);
  const Trace c = load_trace(disguised.string());
  require_same_content(original, c);
  CHECK(c.content_hash == a.content_hash);

  // The writer is deterministic: writing the reloaded trace gives the same bytes.
  const std::string again = (dir / "again.jsonl").string();
  write_trace(a, again);
  CHECK(read_file(again) == read_file(plain));
}

TEST_CASE("trace v1: writer keeps exact times in the header unit", "[trace]") {
  const fs::path dir = test::scratch_dir("trace-units");
  Trace t = load_trace(kSmall);
  t.ops[0].duration = SimTime{1234567};                       // 1.234567 ms
  for (int i = 0; i < 4; ++i) t.events[i].time = SimTime{1};  // 0.000001 ms
  for (const char* unit : {"ns", "us", "ms", "s"}) {
    t.header.time_unit = unit;
    const std::string p = (dir / (std::string("u_") + unit + ".jsonl")).string();
    write_trace(t, p);
    const Trace back = load_trace(p);
    CHECK(back.header.time_unit == unit);
    require_same_content(t, back);
  }
  const std::string ms = read_file(dir / "u_ms.jsonl");
  CHECK(ms.find(R"("duration":1.234567)") != std::string::npos);
  CHECK(ms.find(R"("t":0.000001)") != std::string::npos);
}

TEST_CASE("trace v1: blank lines, CRLF, x_ keys and defaults", "[trace]") {
  const fs::path dir = test::scratch_dir("trace-lenient");
  const fs::path p = dir / "t.jsonl";
  write_file(p,
             "\xEF\xBB\xBF\n  \n"
             "{\"format\":\"coopsim-trace\",\"version\":1,\"x_any\":{\"nested\":[1,{\"a\":null}]}}\r\n"
             "\t\r\n"
             "{\"kind\":\"tensor\",\"id\":18446744073709551615,\"bytes\":9007199254740992,\"x_shape\":[2,3]}\r\n"
             "{ \"kind\" : \"op\" , \"id\" : 0 , \"x_meta\" : {\"k\":[[1,2],[3]]} }\n"
             "{\"kind\":\"alloc\",\"tensor\":18446744073709551615,\"x_\":\"\\u00e9\\ud83d\\ude00\"}\n"
             "{\"kind\":\"compute\",\"op\":0,\"t\":1.5}\n"
             "{\"kind\":\"mark\",\"label\":\"caf\\u00e9 \\\"quoted\\\"\\n\"}\n"
             "\n");
  const Trace t = load_trace(p.string());
  CHECK(t.header.time_unit == "ns");
  CHECK(t.header.iterations == 1);
  CHECK(t.header.model.empty());
  CHECK(t.header.source.is_null());
  CHECK(t.header.extra == nlohmann::json::parse(R"({"x_any":{"nested":[1,{"a":null}]}})"));
  REQUIRE(t.tensors.size() == 1);
  CHECK(t.tensors[0].file_id == 18446744073709551615ULL);
  CHECK(t.tensors[0].size == Bytes{9007199254740992ULL});
  CHECK(t.tensors[0].role == TensorRole::Other);
  REQUIRE(t.ops.size() == 1);
  CHECK(t.ops[0].duration == SimTime{0});
  CHECK(t.ops[0].name.empty());
  REQUIRE(t.events.size() == 3);
  CHECK(t.events[1].time == SimTime{2});  // 1.5 ns rounds half up
  CHECK(t.labels == std::vector<std::string>{"caf\xc3\xa9 \"quoted\"\n"});

  // The writer escapes the label so that it reads back identically.
  const std::string out = (dir / "out.jsonl").string();
  write_trace(t, out);
  require_same_content(t, load_trace(out));
}

TEST_CASE("trace v1: a final line without newline is accepted when complete", "[trace]") {
  const fs::path p = test::scratch_dir("trace-nonl") / "t.jsonl";
  write_file(p, "{\"format\":\"coopsim-trace\",\"version\":1}\n{\"kind\":\"mark\",\"label\":\"end\"}");
  const Trace t = load_trace(p.string());
  CHECK(t.events.size() == 1);
}

TEST_CASE("trace v1: write_trace leaves no file behind on error", "[trace]") {
  const fs::path dir = test::scratch_dir("trace-write-error");
  Trace t = load_trace(kSmall);
  t.tensors[0].name = "bad \xff utf8";
  const std::string p = (dir / "bad.jsonl").string();
  CHECK_THROWS_AS(write_trace(t, p), Error);
  CHECK_FALSE(fs::exists(p));
  CHECK_FALSE(fs::exists(p + ".tmp"));
  CHECK_THROWS_AS(write_trace(load_trace(kSmall), (dir / "no-such-dir" / "x.jsonl").string()), Error);
}

// Parse-rate measurement (not run by default): ./test_unit "[.perf]"
TEST_CASE("trace v1: parse rate on 2M event lines", "[.perf]") {
  const fs::path dir = test::scratch_dir("trace-perf");
  const fs::path p = dir / "big.jsonl";
  {
    std::string buf;
    buf.reserve(1 << 20);
    std::ofstream out(p, std::ios::binary);
    buf += "{\"format\":\"coopsim-trace\",\"version\":1,\"model\":\"perf\",\"time_unit\":\"ns\"}\n";
    constexpr int kTensors = 1000;
    for (int i = 0; i < kTensors; ++i) {
      buf += "{\"kind\":\"tensor\",\"id\":" + std::to_string(1000 + i) +
             ",\"bytes\":" + std::to_string(4096 * (i + 1)) + ",\"role\":\"activation\",\"name\":\"t" +
             std::to_string(i) + "\"}\n";
    }
    for (int i = 0; i < 100; ++i) {
      buf += "{\"kind\":\"op\",\"id\":" + std::to_string(i) + ",\"name\":\"op\",\"duration\":1000,\"inputs\":[" +
             std::to_string(1000 + i) + "],\"outputs\":[" + std::to_string(1100 + i) + "]}\n";
    }
    std::uint64_t lines = 1 + kTensors + 100, t = 0;
    // Cycles of: alloc in, alloc out, compute, access read, access write, free in, free out.
    while (lines < 2'000'000) {
      for (int i = 0; i < 100 && lines < 2'000'000; ++i) {
        const std::string in = std::to_string(1000 + i), outid = std::to_string(1100 + i), op = std::to_string(i);
        buf += "{\"kind\":\"alloc\",\"tensor\":" + in + ",\"t\":" + std::to_string(t++) + ",\"stream\":0}\n";
        buf += "{\"kind\":\"alloc\",\"tensor\":" + outid + ",\"t\":" + std::to_string(t++) + "}\n";
        buf += "{\"kind\":\"compute\",\"op\":" + op + ",\"t\":" + std::to_string(t++) + "}\n";
        buf += "{\"kind\":\"access\",\"tensor\":" + in + ",\"mode\":\"read\",\"op\":" + op +
               ",\"t\":" + std::to_string(t++) + "}\n";
        buf += "{\"kind\":\"access\",\"tensor\":" + outid + ",\"mode\":\"write\",\"op\":" + op +
               ",\"t\":" + std::to_string(t++) + "}\n";
        buf += "{\"kind\":\"free\",\"tensor\":" + in + ",\"t\":" + std::to_string(t++) + "}\n";
        buf += "{\"kind\":\"free\",\"tensor\":" + outid + ",\"t\":" + std::to_string(t++) + "}\n";
        lines += 7;
        if (buf.size() > (1 << 20)) {
          out << buf;
          buf.clear();
        }
      }
    }
    out << buf;
  }
  const auto bytes = fs::file_size(p);
  for (const bool gz : {false, true}) {
    std::string path = p.string();
    if (gz) {
      path = (dir / "big.jsonl.gz").string();
      write_trace(load_trace(p.string()), path);
    }
    // Wall time and process CPU time (user + system): on a shared machine the CPU time is the
    // figure for "one core".
    double best_wall = 1e9, best_cpu = 1e9;
    std::size_t events = 0;
    for (int rep = 0; rep < 3; ++rep) {
      const auto start = std::chrono::steady_clock::now();
      const std::clock_t cpu_start = std::clock();
      const Trace t = load_trace(path);
      const double cpu = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      best_wall = std::min(best_wall, wall);
      best_cpu = std::min(best_cpu, cpu);
      events = t.events.size();
    }
    const double lines = static_cast<double>(events + 1101);
    std::cout << (gz ? "gzip " : "plain") << ": " << static_cast<std::uint64_t>(lines) << " lines, " << bytes
              << " bytes uncompressed; best of 3: wall " << best_wall << " s = " << lines / best_wall / 1e6
              << " M lines/s; cpu " << best_cpu << " s = " << lines / best_cpu / 1e6 << " M lines/s, "
              << static_cast<double>(bytes) / best_cpu / 1e6 << " MB/s\n";
  }
}

}  // namespace trace_loader_test
