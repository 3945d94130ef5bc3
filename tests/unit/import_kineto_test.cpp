// Kineto importer (src/import/kineto*.cpp, docs/import-kineto.md): hand-worked small traces in
// both category vocabularies (tests/data/kineto/), exact time conversion, device selection,
// the catalogue of malformed inputs, and the public traces under ../shared, whose reference
// figures are computed here straight from the JSON (not through the importer's code).
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "coopsim/base/error.hpp"
#include "coopsim/import/importers.hpp"
#include "coopsim/model/trace.hpp"
#include "coopsim/formats/trace_file.hpp"
#include "import/kineto_detail.hpp"
#include "test_paths.hpp"
#include "trace_builder.hpp"

namespace fs = std::filesystem;
using namespace coopsim;
using nlohmann::json;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace import_kineto_test {

namespace {

KinetoOptions on_device(int device) {
  KinetoOptions o;
  o.device = device;
  return o;
}

const std::string kLegacy = "tests/data/kineto/legacy_lifo.json";
const std::string kCurrent = "tests/data/kineto/current_addr.json";
const std::string kCpuOnly = "tests/data/kineto/cpu_only.json";

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

void write_gzip(const fs::path& p, const std::string& text) {
  gzFile f = gzopen(p.string().c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, text.data(), static_cast<unsigned>(text.size())) == static_cast<int>(text.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

// Decompressed content of a plain or gzip file.
std::string read_any(const fs::path& p) {
  gzFile f = gzopen(p.string().c_str(), "rb");
  REQUIRE(f != nullptr);
  std::string out;
  std::vector<char> buf(1 << 16);
  for (int n; (n = gzread(f, buf.data(), static_cast<unsigned>(buf.size()))) > 0;)
    out.append(buf.data(), static_cast<std::size_t>(n));
  gzclose(f);
  return out;
}

// One line per event: "alloc 3 @14000 addr 1000", "compute 0 @40000", "mark oom @100000".
std::vector<std::string> event_lines(const Trace& t) {
  std::vector<std::string> out;
  for (const TraceEvent& e : t.events) {
    std::string s = fmt::format(
        "{} {} @{}", to_string(e.kind),
        e.kind == EventKind::Mark ? t.labels[e.label_index()] : std::to_string(test::subject_index(e)), e.time.count());
    if (e.addr != 0) s += fmt::format(" addr {}", e.addr);
    out.push_back(s);
  }
  return out;
}

struct TensorRow {
  std::uint64_t bytes;
  TensorRole role;
  std::string name;
};

void check_tensors(const Trace& t, const std::vector<TensorRow>& rows) {
  REQUIRE(t.tensors.size() == rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    INFO("tensor " << i);
    CHECK(index_of(t.tensors[i].id) == i);
    CHECK(t.tensors[i].size.value == rows[i].bytes);
    CHECK(t.tensors[i].role == rows[i].role);
    CHECK(t.tensors[i].name == rows[i].name);
    CHECK_FALSE(t.tensors[i].is_view());
  }
}

struct OpRow {
  std::string name;
  std::int64_t duration_ns;
  std::vector<std::uint32_t> outputs;
};

void check_ops(const Trace& t, const std::vector<OpRow>& rows) {
  REQUIRE(t.ops.size() == rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    INFO("op " << i);
    CHECK(t.ops[i].name == rows[i].name);
    CHECK(t.ops[i].duration == SimTime{rows[i].duration_ns});
    std::vector<std::uint32_t> outputs;
    for (const TensorId o : t.ops[i].outputs) outputs.push_back(index_of(o));
    CHECK(outputs == rows[i].outputs);
    CHECK(t.ops[i].inputs.empty());
  }
}

// write_trace then load_trace: the importer's output must pass the loader's validation and
// come back identical.
Trace round_trip(const Trace& t, const std::string& name) {
  const fs::path dir = test::scratch_dir("kineto-" + name);
  const std::string out = (dir / "out.jsonl.gz").string();
  write_trace(t, out);
  Trace back = load_trace(out);
  CHECK(back.header == t.header);
  CHECK(back.tensors == t.tensors);
  CHECK(back.ops == t.ops);
  CHECK(back.events == t.events);
  CHECK(back.labels == t.labels);
  return back;
}

}  // namespace

TEST_CASE("kineto: 2021 trace without Addr: LIFO-per-size pairing, nesting, kernels by correlation, steps",
          "[kineto]") {
  const Trace t = import_kineto(kLegacy, on_device(0));
  round_trip(t, "legacy");

  SECTION("header") {
    CHECK(t.header.model == "legacy_lifo");
    CHECK(t.header.time_unit == "us");
    CHECK(t.header.iterations == 2);  // ProfilerStep#3 and #4
    CHECK(t.header.extra == json{{"device", "Test GPU 2021"}, {"device_total_memory", 1000000}});
    const json& s = t.header.source;
    CHECK(s["tool"] == "kineto-import");
    CHECK(s["file"] == kLegacy);
    CHECK(s["categories"] == "2021 (Operator, Kernel, Runtime, Memcpy, Memset)");
    CHECK(s["memory_events"] ==
          json{{"device", 11}, {"cpu", 1}, {"other_cuda_devices", 1}, {"other_device_types", 0}, {"zero_bytes", 1}});
    CHECK(s["memory_pairing"].get<std::string>().rfind("inferred (the trace has no Addr)", 0) == 0);
    CHECK(s["freed_before_allocated"] == json{{"tensors", 1}, {"bytes", 2048}});
    CHECK(s["allocations_outside_ops"] == 1);
    // conv2d, convolution, 2 x empty, relu, add_, zeros, ReluBackward0; Optimizer.step#SGD.step
    // is a user range; ProfilerStep ranges are iterations.
    CHECK(s["ops"] == json{{"cpu_ops", 8}, {"top_level", 5}, {"annotations", 1}});
    // Device 0: kernels 7 + 2 + 4 + 5 us, memset 1 us; the 5 us kernel was launched outside any op.
    CHECK(s["gpu_time_ns"] == 19000);
    CHECK(s["gpu_time_outside_ops_ns"] == 5000);
    CHECK(s["profiler_steps"] == json{3, 4});
    CHECK(s["ts_origin_us"] == "100");
    CHECK_FALSE(s.contains("live_before_profiling_bytes"));  // no totals in 2021 traces
  }

  SECTION("tensors: named by the innermost op (tid \"100\" matches tid 100), workspace inside one op") {
    check_tensors(t, {
                         {2048, TensorRole::Other, "(allocated before profiling)"},  // freed at 260, never allocated
                         {1024, TensorRole::Other, "aten::empty in aten::conv2d"},
                         {512, TensorRole::Workspace, "aten::empty in aten::conv2d"},  // freed at 130 inside conv2d
                         {1024, TensorRole::Other, "aten::relu"},
                         {256, TensorRole::Other, "aten::zeros"},
                         {256, TensorRole::Other, "aten::zeros"},
                         {128, TensorRole::Other, "(outside ops)"},  // ts 270: only ProfilerStep#4 encloses it
                     });
  }

  SECTION("ops: one per top-level op, GPU time by correlation, outputs live at the op's end") {
    check_ops(t, {
                     {"aten::conv2d", 8000, {1}},  // kernel 7 + memset 1 (device 1's kernel excluded)
                     {"aten::relu", 0, {3}},       // launched nothing
                     {"aten::add_", 2000, {}},     // top-level inside the Optimizer.step# user range
                     {"aten::zeros", 0, {4, 5}},
                     {"ReluBackward0", 4000, {}},  // autograd thread "101"
                 });
  }

  SECTION("events: LIFO per size, frees before allocs live from the start, compute at op end") {
    CHECK(event_lines(t) == std::vector<std::string>{
                                "alloc 0 @0",           // pre-profiling block, live from the start
                                "iteration 0 @0",       // ProfilerStep#3 at ts 100 = origin
                                "alloc 1 @14000",       //
                                "alloc 2 @20000",       //
                                "free 2 @30000",        //
                                "compute 0 @40000",     // conv2d ends at 140
                                "alloc 3 @55000",       //
                                "compute 1 @60000",     //
                                "compute 2 @75000",     //
                                "iteration 1 @100000",  // ProfilerStep#4
                                "alloc 4 @112000",      //
                                "alloc 5 @115000",      //
                                "compute 3 @120000",    //
                                "free 5 @140000",       // -256: the later 256-byte allocation
                                "free 3 @145000",       // -1024: relu's output, not conv2d's (LIFO)
                                "compute 4 @150000",    //
                                "free 0 @160000",       // -2048 matches nothing allocated
                                "alloc 6 @170000",      //
                            });
  }

  SECTION("summary: live bytes = pre-profiling bytes + running sum of Bytes") {
    const TraceSummary s = summarize(t);
    // Running sum: 1024 1536 1024 2048 2304 2560 2304 1280 -768 -640; 2048 live from the start.
    CHECK(s.peak_live.value == 2048 + 2560);
    CHECK(s.allocs == 7);
    CHECK(s.frees == 4);
    CHECK(s.computes == 5);
    CHECK(s.iterations == 2);
    CHECK(s.compute_time == SimTime{14000});
  }
}

TEST_CASE("kineto: 2023+ trace with Addr, totals, fractional ts and an OOM event", "[kineto]") {
  const Trace t = import_kineto(kCurrent, on_device(0));
  round_trip(t, "current");

  SECTION("header") {
    CHECK(t.header.model == "current_addr");
    CHECK(t.header.iterations == 2);
    CHECK(t.header.extra == json{{"device", "Test GPU 2023"}, {"device_total_memory", 2000000}});
    const json& s = t.header.source;
    CHECK(s["categories"] == "2023+ (cpu_op, user_annotation, kernel, cuda_runtime, gpu_memcpy, gpu_memset)");
    CHECK(s["memory_pairing"] == "by address (args.Addr)");
    CHECK(s["memory_events"] ==
          json{{"device", 7}, {"cpu", 1}, {"other_cuda_devices", 0}, {"other_device_types", 0}, {"zero_bytes", 0}});
    // First event: Total Allocated 28672 after +4096, so 24576 bytes were live before it; 8192
    // of them are freed at Addr 3000, the remaining 16384 never are.
    CHECK(s["live_before_profiling_bytes"] == 24576);
    CHECK(s["total_allocated_mismatches"] == 0);
    CHECK(s["recorded_peak_allocated_bytes"] == 32768);
    CHECK(s["recorded_peak_reserved_bytes"] == 41943040);
    CHECK(s["ops"] == json{{"cpu_ops", 6}, {"top_level", 4}, {"annotations", 1}});  // + gpu_user_annotation
    CHECK(s["gpu_time_ns"] == 12845);                                               // 12.345 + 0.5 us
    CHECK(s["gpu_time_outside_ops_ns"] == 0);
    CHECK(s["profiler_steps"] == json{0, 1});
    // 1700000000001000 us: beyond a double's exact range once the ns digits are added.
    CHECK(s["ts_origin_us"] == "1700000000001000");
    CHECK(
        s["oom_events"] ==
        json::array({{{"t_us", "100"}, {"bytes", 1048576}, {"total_allocated", 20480}, {"total_reserved", 41943040}}}));
    CHECK(s["schema_version"] == 1);
    CHECK(s["distributed_info"] == json{{"backend", "nccl"}, {"rank", 0}, {"world_size", 1}});
  }

  SECTION("tensors and ops") {
    check_tensors(t, {
                         {16384, TensorRole::Other, "(live before profiling, never freed: from Total Allocated)"},
                         {8192, TensorRole::Other, "(allocated before profiling)"},
                         {4096, TensorRole::Other, "aten::addmm in aten::linear"},
                         {512, TensorRole::Workspace, "aten::addmm in aten::linear"},
                         {4096, TensorRole::Other, "aten::mse_loss"},  // reuses Addr 2000 after its free
                         {1024, TensorRole::Other, "aten::zeros"},     // reuses Addr 1000
                     });
    check_ops(t, {
                     {"aten::linear", 12345, {2}},  // kernel via cudaLaunchKernel in aten::addmm
                     {"aten::mse_loss", 500, {4}},  // gpu_memcpy via cudaMemcpyAsync
                     {"aten::zeros", 0, {5}},
                     {"aten::mul_", 0, {}},
                 });
  }

  SECTION("events: exact sub-microsecond times, addresses, OOM mark") {
    CHECK(event_lines(t) == std::vector<std::string>{
                                "alloc 0 @0",
                                "alloc 1 @0 addr 3000",
                                "iteration 0 @0",
                                "alloc 2 @16750 addr 1000",
                                "alloc 3 @17000 addr 2000",
                                "free 3 @50000",
                                "compute 0 @60125",  // ts 1700000000001010.125 + dur 50
                                "alloc 4 @72000 addr 2000",
                                "compute 1 @80000",
                                "free 2 @90000",  // outside ops: only python_function encloses it
                                "free 1 @95000",
                                "mark oom @100000",
                                "iteration 1 @200500",
                                "alloc 5 @211000 addr 1000",
                                "compute 2 @215001",
                                "compute 3 @251000",
                            });
    CHECK(t.labels == std::vector<std::string>{"oom"});
  }

  SECTION("summary: peak live = recorded peak of Total Allocated") {
    const TraceSummary s = summarize(t);
    CHECK(s.peak_live.value == 32768);
    CHECK(s.allocs == 6);
    CHECK(s.frees == 3);
    CHECK(s.compute_time == SimTime{12845});
  }
}

TEST_CASE("kineto: CPU-only trace: op time is the CPU dur, ranges nest despite rounding, one iteration", "[kineto]") {
  const Trace t = import_kineto(kCpuOnly, on_device(0));
  round_trip(t, "cpu-only");
  CHECK(t.header.iterations == 1);
  CHECK(t.header.source["op_duration"] == "cpu: the op's dur (the trace has no GPU activity)");
  CHECK(t.header.source["memory_pairing"] == "none (no memory events for the device)");
  CHECK(t.tensors.empty());
  // aten::mm [15, 21] starts inside aten::matmul [10, 20]: a child, though it ends 1 us later.
  // Thread 2's backward op overlaps thread 1's in time and is a top-level op of its own thread.
  check_ops(t, {
                   {"autograd::engine::evaluate_function: AddBackward0", 4000, {}},
                   {"aten::matmul", 10000, {}},
                   {"aten::add", 2000, {}},
                   {"aten::empty", 500, {}},
               });
  CHECK(event_lines(t) ==
        std::vector<std::string>{"compute 0 @6000", "compute 1 @10000", "compute 2 @13000", "compute 3 @14500"});
  CHECK(summarize(t).compute_time == SimTime{16500});
}

TEST_CASE("kineto: --device picks the device's memory events and GPU work", "[kineto]") {
  const Trace t = import_kineto(kLegacy, on_device(1));
  round_trip(t, "device1");
  const json& s = t.header.source;
  CHECK(t.header.extra == json{{"device", "Other GPU"}, {"device_total_memory", 2000000}});
  CHECK(s["memory_events"] ==
        json{{"device", 1}, {"cpu", 1}, {"other_cuda_devices", 11}, {"other_device_types", 0}, {"zero_bytes", 0}});
  CHECK(s["gpu_time_ns"] == 100000);
  // The 4096-byte event at ts 112 is where aten::convolution starts: it is that op's.
  check_tensors(t, {{4096, TensorRole::Other, "aten::convolution in aten::conv2d"}});
  check_ops(t, {
                   {"aten::conv2d", 100000, {0}},  // the device-1 kernel of correlation 6
                   {"aten::relu", 0, {}},
                   {"aten::add_", 0, {}},
                   {"aten::zeros", 0, {}},
                   {"ReluBackward0", 0, {}},
               });
  CHECK(summarize(t).peak_live.value == 4096);

  try {
    (void)import_kineto(kLegacy, on_device(2));
    FAIL("device 2 accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == kLegacy +
                                       ": device 2 has no [memory] events or GPU activity in this trace "
                                       "(devices with events: 0, 1)");
  }
  CHECK_THROWS_WITH(import_kineto(kLegacy, on_device(-1)),
                    "device: must be a CUDA device index >= 0 (got -1)");
}

TEST_CASE("kineto: gzip and plain input, bare event arrays, deterministic output", "[kineto]") {
  const fs::path dir = test::scratch_dir("kineto-forms");
  const std::string gz = (dir / "legacy.pt.trace.json.gz").string();
  write_gzip(gz, read_file(kLegacy));
  const Trace plain = import_kineto(kLegacy, on_device(0));
  const Trace zipped = import_kineto(gz, on_device(0));
  CHECK(zipped.header.model == "legacy");  // .pt.trace.json.gz stripped
  CHECK(zipped.tensors == plain.tensors);
  CHECK(zipped.ops == plain.ops);
  CHECK(zipped.events == plain.events);

  // Same input, same bytes.
  write_trace(plain, (dir / "a.jsonl").string());
  write_trace(import_kineto(kLegacy, on_device(0)), (dir / "b.jsonl").string());
  CHECK(read_file(dir / "a.jsonl") == read_file(dir / "b.jsonl"));

  // The Chrome "JSON Array Format": just the events.
  const std::string array = (dir / "array.json").string();
  write_file(
      array,
      R"([{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":5,"dur":3},)"
      R"({"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":6,"args":{"Device Type":1,"Device Id":0,"Bytes":512}}])");
  const Trace a = import_kineto(array, on_device(0));
  check_tensors(a, {{512, TensorRole::Other, "aten::mm"}});
  check_ops(a, {{"aten::mm", 3000, {0}}});
  CHECK(event_lines(a) == std::vector<std::string>{"alloc 0 @1000", "compute 0 @3000"});
}

TEST_CASE("kineto: microsecond text converts to ns exactly", "[kineto]") {
  using kineto_detail::micros_text_to_ns;
  CHECK(micros_text_to_ns("0") == 0);
  CHECK(micros_text_to_ns("1.5") == 1500);
  CHECK(micros_text_to_ns("12.345") == 12345);
  CHECK(micros_text_to_ns("1700000000001016.750") == 1700000000001016750);  // a double would give ...016.75 +- 0.25
  CHECK(micros_text_to_ns("0.0005") == 1);                                  // halves round away from zero
  CHECK(micros_text_to_ns("0.00049") == 0);
  CHECK(micros_text_to_ns("-2.5") == -2500);
  CHECK(micros_text_to_ns("-0.0005") == -1);
  CHECK(micros_text_to_ns("1.5e3") == 1500000);
  CHECK(micros_text_to_ns("15E-1") == 1500);
  CHECK(micros_text_to_ns("9223372036854775.807") == 9223372036854775807);
  CHECK_FALSE(micros_text_to_ns("9223372036854775.808"));
  CHECK_FALSE(micros_text_to_ns("1e300"));
  CHECK(micros_text_to_ns("1e-300") == 0);
}

TEST_CASE("kineto: malformed inputs fail with file:line: problem", "[kineto][catalogue]") {
  struct Case {
    std::string name, text, expected;  // expected: "line: problem" (the file name is prepended)
  };
  const std::string mem = R"({"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":5,"args":)";
  const std::string op = R"({"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,)";
  const std::vector<Case> cases = {
      {"empty", "", "1: empty file (expected a Kineto trace: a JSON object with 'traceEvents')"},
      {"not json", "hello",
       "1: malformed JSON at column 1: syntax error while parsing value - invalid literal; last read: 'h'"},
      {"truncated", "{\"traceEvents\": [\n  {\"ph\": \"X\"",
       "2: malformed JSON at column 13: syntax error while parsing object - unexpected end of input; expected '}' "
       "(truncated file?)"},
      {"trailing text", R"({"traceEvents":[]} x)",
       "1: malformed JSON at column 20: syntax error while parsing value - invalid literal; last read: "
       "'\"traceEvents\":[]} x'; expected end of input"},
      {"top-level number", "42",
       "1: not a Kineto trace: the top level must be a JSON object with 'traceEvents' (got 42)"},
      {"no traceEvents", "{\"schemaVersion\": 1,\n \"deviceProperties\": []\n}",
       "3: not a Kineto trace: the top-level object has no 'traceEvents' array"},
      {"traceEvents object", R"({"traceEvents":{}})", "1: field 'traceEvents' must be an array (got an object)"},
      {"traceEvents number", R"({"traceEvents":5})", "1: field 'traceEvents' must be an array (got 5)"},
      {"duplicate traceEvents", R"({"traceEvents":[],"traceEvents":[]})", "1: duplicate top-level key 'traceEvents'"},
      {"event not object", "{\"traceEvents\":[\n{\"ph\":\"M\"},\n7]}",
       "3: traceEvents[1]: an event must be a JSON object (got 7)"},
      {"event array", R"({"traceEvents":[[]]})", "1: traceEvents[0]: an event must be a JSON object (got an array)"},
      {"no ph", R"({"traceEvents":[{"name":"x"}]})", "1: traceEvents[0]: missing field 'ph'"},
      {"ph number", R"({"traceEvents":[{"ph":1}]})", "1: traceEvents[0]: field 'ph' must be a string (got 1)"},
      {"duplicate key", R"({"traceEvents":[{"ph":"X","ph":"i"}]})", "1: traceEvents[0]: duplicate key 'ph'"},
      {"cat number", R"({"traceEvents":[{"ph":"X","cat":3}]})",
       "1: traceEvents[0]: field 'cat' must be a string (got 3)"},
      {"op without ts", "{\"traceEvents\":[\n" + op + R"("dur":1}]})", "2: traceEvents[0]: missing field 'ts'"},
      {"ts string", R"({"traceEvents":[)" + op + R"("ts":"5","dur":1}]})",
       "1: traceEvents[0]: field 'ts' must be a number (got '5')"},
      {"ts overflow", R"({"traceEvents":[)" + op + R"("ts":1e300,"dur":1}]})",
       "1: traceEvents[0]: field 'ts' is out of range (got 1e+300)"},
      {"negative dur", R"({"traceEvents":[)" + op + R"("ts":5,"dur":-1}]})",
       "1: traceEvents[0]: field 'dur' must be a non-negative number (got -1)"},
      {"tid bool", R"({"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":true,"ts":5,"dur":1}]})",
       "1: traceEvents[0]: field 'tid' must be an integer or a string (got true)"},
      {"op name number", R"({"traceEvents":[{"ph":"X","cat":"Operator","name":5}]})",
       "1: traceEvents[0]: field 'name' must be a string (got 5)"},
      {"kernel without device", R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"k","pid":"gpu","ts":1,"dur":1}]})",
       "1: traceEvents[0]: GPU event without a device (no integer 'args.device' or 'pid')"},
      {"runtime correlation string",
       R"({"traceEvents":[{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":1,"dur":1,"args":{"correlation":"7"}}]})",
       "1: traceEvents[0]: field 'args.correlation' must be an integer (got '7')"},
      {"memory without args", R"({"traceEvents":[{"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":5}]})",
       "1: traceEvents[0]: missing field 'args'"},
      {"memory args array", R"({"traceEvents":[)" + mem + "[]}]}",
       "1: traceEvents[0]: field 'args' must be an object (got an array)"},
      {"memory without device type", R"({"traceEvents":[)" + mem + R"({"Device Id":0,"Bytes":5}}]})",
       "1: traceEvents[0]: missing field 'args.Device Type'"},
      {"memory fractional bytes", R"({"traceEvents":[)" + mem + R"({"Device Type":1,"Device Id":0,"Bytes":1.5}}]})",
       "1: traceEvents[0]: field 'args.Bytes' must be an integer (got 1.5)"},
      {"memory negative addr",
       R"({"traceEvents":[)" + mem + R"({"Device Type":1,"Device Id":0,"Bytes":16,"Addr":-1}}]})",
       "1: traceEvents[0]: field 'args.Addr' must be a non-negative integer (got -1)"},
      {"memory huge bytes",
       R"({"traceEvents":[)" + mem + R"({"Device Type":1,"Device Id":0,"Bytes":1152921504606846976}}]})",
       "1: traceEvents[0]: field 'args.Bytes' is too large for a tensor (got 1152921504606846976; at most 2^53)"},
      {"oom without bytes",
       R"({"traceEvents":[{"ph":"i","s":"t","name":"[OutOfMemory]","pid":1,"tid":1,"ts":5,"args":{"Device Type":1,"Device Id":0}}]})",
       "1: traceEvents[0]: missing field 'args.Bytes'"},
      {"mixed Addr",
       "{\"traceEvents\":[\n" + mem + R"({"Device Type":1,"Device Id":0,"Bytes":16,"Addr":64}},)" + "\n" + mem +
           R"({"Device Type":1,"Device Id":0,"Bytes":16}}]})",
       "3: traceEvents[1]: [memory] event without 'args.Addr', unlike traceEvents[0] (pairing needs all or none)"},
      {"alloc at a live address",
       "{\"traceEvents\":[\n" + mem + R"({"Device Type":1,"Device Id":0,"Bytes":16,"Addr":64}},)" + "\n" + mem +
           R"({"Device Type":1,"Device Id":0,"Bytes":32,"Addr":64}}]})",
       "3: traceEvents[1]: allocation at address 64, which is still live (allocated by traceEvents[0])"},
      {"free of the wrong size",
       "{\"traceEvents\":[\n" + mem + R"({"Device Type":1,"Device Id":0,"Bytes":16,"Addr":64}},)" + "\n" + mem +
           R"({"Device Type":1,"Device Id":0,"Bytes":-32,"Addr":64}}]})",
       "3: traceEvents[1]: free of 32 bytes at address 64, which holds an allocation of 16 bytes (traceEvents[0])"},
      {"nesting too deep",
       R"({"traceEvents":[{"ph":"M","args":)" + std::string(300, '[') + std::string(300, ']') + "}]}",
       "1: traceEvents[0]: nesting too deep (over 256 levels)"},
  };
  const fs::path dir = test::scratch_dir("kineto-catalogue");
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const std::string path = (dir / fmt::format("case{}.json", i)).string();
    write_file(path, c.text);
    INFO(c.name);
    try {
      (void)import_kineto(path, on_device(0));
      FAIL("accepted: " << c.name);
    } catch (const InputError& e) {
      CHECK(std::string(e.what()) == path + ":" + c.expected);
    }
  }

  SECTION("cannot open") {
    const std::string missing = (dir / "missing.json").string();
    CHECK_THROWS_WITH(import_kineto(missing, on_device(0)),
                      missing + ":0: cannot open trace file: No such file or directory");
  }

  SECTION("truncated and corrupt gzip streams") {
    const std::string gz = (dir / "t.json.gz").string();
    std::string text = read_file(kCurrent);
    write_gzip(gz, text);
    const std::string bytes = read_file(gz);
    write_file(gz, bytes.substr(0, bytes.size() / 2));
    try {
      (void)import_kineto(gz, on_device(0));
      FAIL("truncated gzip accepted");
    } catch (const InputError& e) {
      CHECK(std::regex_match(std::string(e.what()),
                             std::regex(".*t\\.json\\.gz:[1-9][0-9]*: gzip stream is truncated \\(unexpected end of "
                                        "compressed data\\)")));
    }
    std::string damaged = bytes;
    damaged[damaged.size() - 6] = static_cast<char>(damaged[damaged.size() - 6] ^ 0x55);  // the CRC-32 trailer
    write_file(gz, damaged);
    try {
      (void)import_kineto(gz, on_device(0));
      FAIL("corrupt gzip accepted");
    } catch (const InputError& e) {
      CHECK(std::regex_match(std::string(e.what()),
                             std::regex(".*t\\.json\\.gz:[1-9][0-9]*: gzip stream is corrupt: incorrect data check")));
    }
  }
}

namespace {

// Reference figures read off a Kineto file with nlohmann::json directly: an independent
// implementation of the same definitions (docs/import-kineto.md), not the importer's code.
struct Reference {
  std::map<std::pair<std::int64_t, std::int64_t>, std::uint64_t> memory_events;  // (type, id) -> count
  std::uint64_t allocs = 0, frees = 0;
  std::int64_t max_running_sum = 0;                             // of Bytes, device 0, in ts order
  std::uint64_t unmatched_free_bytes = 0, unmatched_frees = 0;  // frees no same-size alloc can pay for
  std::uint64_t steps = 0, cpu_ops = 0, top_level_ops = 0;
  double gpu_us = 0;  // kernels, memcpy, memset on device 0
};

Reference reference_figures(const fs::path& file) {
  // A plain DOM (about 190 MB for the 35 MB ResNet-50 trace); nlohmann's filtering callback
  // parser is quadratic in the length of an array.
  const json doc = json::parse(read_any(file));
  Reference r;
  struct Mem {
    double ts;
    std::int64_t bytes;
  };
  std::vector<Mem> device0;
  std::map<std::string, std::vector<std::pair<double, double>>> ops_by_thread;  // (ts, end)
  for (const json& e : doc.at("traceEvents")) {
    const std::string ph = e.value("ph", "");
    const std::string cat = e.value("cat", "");
    const std::string name = e.value("name", "");
    if (ph == "i" && name == "[memory]") {
      const json& a = e.at("args");
      const auto type = a.at("Device Type").get<std::int64_t>(), id = a.at("Device Id").get<std::int64_t>();
      ++r.memory_events[{type, id}];
      if (type == 1 && id == 0) device0.push_back({e.at("ts").get<double>(), a.at("Bytes").get<std::int64_t>()});
    }
    if (ph != "X") continue;
    const bool op_cat = cat == "Operator" || cat == "cpu_op";
    if ((op_cat || cat == "user_annotation") && name.rfind("ProfilerStep#", 0) == 0) ++r.steps;
    if (op_cat && name.find('#') == std::string::npos) {
      ++r.cpu_ops;
      const std::string thread =
          e.at("pid").dump() + "/" + (e.at("tid").is_string() ? e.at("tid").get<std::string>() : e.at("tid").dump());
      const double ts = e.at("ts").get<double>();
      ops_by_thread[thread].push_back({ts, ts + e.at("dur").get<double>()});
    }
    if (cat == "Kernel" || cat == "kernel" || cat == "Memcpy" || cat == "gpu_memcpy" || cat == "Memset" ||
        cat == "gpu_memset") {
      const json& a = e.at("args");
      const std::int64_t dev =
          a.contains("device") ? a.at("device").get<std::int64_t>() : e.at("pid").get<std::int64_t>();
      if (dev == 0) r.gpu_us += e.at("dur").get<double>();
    }
  }
  // Peak of the running sum, in ts order (ties in file order).
  std::stable_sort(device0.begin(), device0.end(), [](const Mem& a, const Mem& b) { return a.ts < b.ts; });
  std::int64_t sum = 0;
  std::map<std::int64_t, std::int64_t> balance, lowest;  // per size: allocs - frees so far, its minimum
  for (const Mem& m : device0) {
    sum += m.bytes;
    r.max_running_sum = std::max(r.max_running_sum, sum);
    if (m.bytes > 0) ++r.allocs;
    if (m.bytes < 0) ++r.frees;
    const std::int64_t size = m.bytes < 0 ? -m.bytes : m.bytes;
    balance[size] += m.bytes > 0 ? 1 : -1;
    lowest[size] = std::min(lowest[size], balance[size]);
  }
  // However frees are matched to same-size allocations, -min(prefix balance) of them per size
  // find nothing to match (bracket matching).
  for (const auto& [size, low] : lowest) {
    r.unmatched_frees += static_cast<std::uint64_t>(-low);
    r.unmatched_free_bytes += static_cast<std::uint64_t>(-low * size);
  }
  // Top-level ops: not starting before the furthest end seen so far on the thread.
  for (auto& [thread, ops] : ops_by_thread) {
    std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    bool first = true;
    double furthest = 0;
    for (const auto& [ts, end] : ops) {
      if (first || ts > furthest || (ts == furthest && end > ts)) ++r.top_level_ops;
      furthest = first ? end : std::max(furthest, end);
      first = false;
    }
  }
  return r;
}

}  // namespace

TEST_CASE("kineto: public traces convert and match figures read off the JSON", "[kineto][shared]") {
  if (!test::have_shared()) {
    WARN("../shared not present: skipping the public Kineto traces");
    return;
  }
  std::vector<fs::path> files = {test::shared_dir() / "traces" / "kineto" /
                                 "kineto_tbplugin_resnet50_v100_memory.pt.trace.json.gz"};
  for (const auto& entry : fs::directory_iterator(test::shared_dir() / "traces" / "chakra_et")) {
    if (entry.path().filename().string().find("_kineto.json") != std::string::npos) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() == 4);
  for (const fs::path& file : files) {
    INFO(file.string());
    const Trace t = import_kineto(file.string(), on_device(0));
    const Trace back = round_trip(t, file.stem().string());
    const Reference ref = reference_figures(file);
    const TraceSummary s = summarize(back);
    const json& src = t.header.source;

    const auto count = [&](std::int64_t type, std::int64_t id) {
      const auto it = ref.memory_events.find({type, id});
      return it == ref.memory_events.end() ? std::uint64_t{0} : it->second;
    };
    CHECK(src["memory_events"]["device"] == count(1, 0));
    CHECK(src["memory_events"]["cpu"] == count(0, -1));
    CHECK(s.allocs == ref.allocs + ref.unmatched_frees);  // each unmatched free: an alloc at the start
    CHECK(s.frees == ref.frees);
    CHECK(src["freed_before_allocated"]["bytes"] == ref.unmatched_free_bytes);
    CHECK(s.peak_live.value == ref.unmatched_free_bytes + static_cast<std::uint64_t>(ref.max_running_sum));
    CHECK(t.header.iterations == std::max<std::uint64_t>(ref.steps, 1));
    CHECK(s.iterations == ref.steps);
    CHECK(src["ops"]["cpu_ops"] == ref.cpu_ops);
    CHECK(src["ops"]["top_level"] == ref.top_level_ops);
    CHECK(s.computes == ref.top_level_ops);
    CHECK(src["gpu_time_ns"] == static_cast<std::int64_t>(std::llround(ref.gpu_us * 1000)));
    // Every GPU nanosecond of the device is in exactly one op or reported as outside ops.
    CHECK(s.compute_time.count() + src["gpu_time_outside_ops_ns"].get<std::int64_t>() ==
          src["gpu_time_ns"].get<std::int64_t>());

    if (file.filename() == "kineto_tbplugin_resnet50_v100_memory.pt.trace.json.gz") {
      // One-off cross-check with Python (json.load of the file; [memory] events counted by
      // (Device Type, Device Id); running sum of Bytes for (1, 0) sorted by ts; ProfilerStep#
      // ranges; Operator events without '#' and those not inside an earlier one per thread;
      // sum of Kernel/Memcpy/Memset dur with args.device 0):
      CHECK(count(1, 0) == 8220);
      CHECK(count(0, -1) == 4618);
      CHECK(ref.allocs == 4110);
      CHECK(ref.frees == 4110);
      CHECK(ref.max_running_sum == 2791636480);
      CHECK(ref.unmatched_frees == 0);
      CHECK(ref.steps == 6);
      CHECK(ref.cpu_ops == 23622);
      CHECK(ref.top_level_ops == 8430);
      CHECK(std::llround(ref.gpu_us) == 603558);
      CHECK(t.header.source["categories"] == "2021 (Operator, Kernel, Runtime, Memcpy, Memset)");
      CHECK(t.header.source["profiler_steps"] == json{5, 6, 7, 8, 9, 10});
      CHECK(t.header.extra["device"] == "Tesla V100-DGXS-32GB");
    }
  }
}

}  // namespace import_kineto_test
