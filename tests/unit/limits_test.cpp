// Input caps (include/coopsim/base/limits.hpp, docs/limits.md): the "limits" config section, and the
// exact one-line error of every cap in the trace loader and the importers.
#include <catch2/catch.hpp>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "coopsim/base/error.hpp"
#include "coopsim/import/importers.hpp"
#include "coopsim/base/limits.hpp"
#include "coopsim/sim/simulation.hpp"
#include "coopsim/formats/trace_file.hpp"
#include "test_paths.hpp"

namespace fs = std::filesystem;
using namespace coopsim;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace limits_test {

namespace {

std::string tensor(int id) { return "{\"kind\":\"tensor\",\"id\":" + std::to_string(id) + ",\"bytes\":8}\n"; }

std::string write_gz(const fs::path& dir, const std::string& name, const std::string& text) {
  const std::string p = (dir / name).string();
  gzFile f = gzopen(p.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, text.data(), static_cast<unsigned>(text.size())) == static_cast<int>(text.size()));
  REQUIRE(gzclose(f) == Z_OK);
  return p;
}

std::string load_error(const std::string& path, const Limits& limits) {
  try {
    (void)load_trace(path, limits);
  } catch (const Error& e) {
    return e.what();
  }
  return "(loaded without error)";
}

SimConfig from(const nlohmann::json& j) {
  SimConfig c;
  c.source = "cfg.json";
  c.doc = j;
  return c;
}

}  // namespace

TEST_CASE("limits: the config section, its defaults and its errors", "[limits]") {
  const Limits d = limits_from_json(nlohmann::json());
  CHECK(d.max_input_bytes == std::uint64_t{16} << 30);
  CHECK(d.max_tensors == 50'000'000);
  CHECK(d.max_events == 500'000'000);
  CHECK(d.max_op_fan_in == 65'536);
  CHECK(d.max_recompute_depth == 10'000'000);
  const Limits l = limits_from_json({{"max_input_bytes", "1KiB"}, {"max_tensors", 3}, {"max_events", "7"}});
  CHECK(l.max_input_bytes == 1024);
  CHECK(l.max_tensors == 3);
  CHECK(l.max_events == 7);
  CHECK(l.max_op_fan_in == d.max_op_fan_in);
  CHECK(limits_from_json({{"max_recompute_depth", 12}}).max_recompute_depth == 12);

  CHECK_THROWS_WITH(limits_from_json({{"max_tensors", 0}}), "limits.max_tensors: must be at least 1, got 0");
  CHECK_THROWS_WITH(limits_from_json({{"max_op_fan_in", -4}}), "limits.max_op_fan_in: must be at least 1, got -4");
  CHECK_THROWS_WITH(limits_from_json({{"max_recompute_depth", 0}}),
                    "limits.max_recompute_depth: must be at least 1, got 0");
  CHECK_THROWS_WITH(limits_from_json({{"max_input_bytes", 0}}), "limits.max_input_bytes: must be greater than 0");
  CHECK_THROWS_WITH(limits_from_json({{"max_events", "lots"}}), "limits.max_events: expected an integer, got \"lots\"");
  CHECK_THROWS_WITH(
      limits_from_json({{"max_tensor", 5}}),
      "limits.max_tensor: unknown parameter (valid for limits: max_input_bytes, max_tensors, "
      "max_events, max_op_fan_in, max_recompute_depth, max_search_steps, max_memory); did you mean 'max_tensors'?");
  CHECK_THROWS_WITH(limits_from_json(5), "limits: expected an object of parameters, got 5");

  // In a config: checked by check_config, read by config_limits, both naming the file.
  CHECK_THROWS_WITH(check_config(from({{"limits", {{"max_tensors", 0}}}})),
                    "cfg.json: limits.max_tensors: must be at least 1, got 0");
  CHECK_THROWS_WITH(config_limits(from({{"limits", {{"max_events", 0}}}})),
                    "cfg.json: limits.max_events: must be at least 1, got 0");
  SimConfig c;
  apply_override(c, "limits.max_tensors=10");
  CHECK_NOTHROW(check_config(c));
  CHECK(config_limits(c).max_tensors == 10);
  CHECK(config_limits(SimConfig{}).max_tensors == d.max_tensors);
}

TEST_CASE("limits: every cap of the trace loader names file, line and key", "[limits]") {
  const auto dir = test::scratch_dir("limits-loader");
  Limits l;
  SECTION("tensors: the third definition (line 4) is over a cap of 2") {
    l.max_tensors = 2;
    const auto p = test::write_file(dir, "tensors.jsonl", test::kTraceHeader + tensor(1) + tensor(2) + tensor(3));
    CHECK(load_error(p, l) == p + ":4: more than 2 tensors (limits.max_tensors)");
    l.max_tensors = 3;
    CHECK(load_trace(p, l).tensors.size() == 3);
  }
  SECTION("events: the third event (line 5) is over a cap of 2") {
    l.max_events = 2;
    const auto p = test::write_file(dir, "events.jsonl",
                                    test::kTraceHeader + tensor(1) +
                                        "{\"kind\":\"alloc\",\"tensor\":1}\n{\"kind\":\"free\",\"tensor\":1}\n" +
                                        "{\"kind\":\"mark\",\"label\":\"x\"}\n");
    CHECK(load_error(p, l) == p + ":5: more than 2 events (limits.max_events)");
  }
  SECTION("op fan-in: inputs, outputs, mutates and views, each against the cap") {
    l.max_op_fan_in = 2;
    const std::string defs = test::kTraceHeader + tensor(1) + tensor(2) + tensor(3) + tensor(4);
    const auto in = test::write_file(dir, "in.jsonl", defs + "{\"kind\":\"op\",\"id\":9,\"inputs\":[1,2,3]}\n");
    CHECK(load_error(in, l) == in + ":6: op 9: field 'inputs': more than 2 tensors (limits.max_op_fan_in)");
    const auto out =
        test::write_file(dir, "out.jsonl", defs + "{\"kind\":\"op\",\"id\":9,\"inputs\":[1],\"outputs\":[2,3,4]}\n");
    CHECK(load_error(out, l) == out + ":6: op 9: field 'outputs': more than 2 tensors (limits.max_op_fan_in)");
    const auto mut =
        test::write_file(dir, "mut.jsonl", defs + "{\"kind\":\"op\",\"id\":9,\"inputs\":[1,2],\"mutates\":[1,2,1]}\n");
    CHECK(load_error(mut, l) == mut + ":6: op 9: field 'mutates': more than 2 tensors (limits.max_op_fan_in)");
    const auto views = test::write_file(
        dir, "views.jsonl",
        defs + "{\"kind\":\"op\",\"id\":9,\"inputs\":[1],\"outputs\":[2],\"views\":[[2,1],[2,1],[2,1]]}\n");
    CHECK(load_error(views, l) == views + ":6: op 9: field 'views': more than 2 pairs (limits.max_op_fan_in)");
    l.max_op_fan_in = 3;
    CHECK(load_trace(in, l).ops.at(0).inputs.size() == 3);
  }
  SECTION("input bytes: the line holding the first byte over the cap, plain and gzip alike") {
    const std::string text = test::kTraceHeader + tensor(1) + tensor(2);  // lines of 39, 35 and 35 bytes
    const auto plain = test::write_file(dir, "bytes.jsonl", text);
    const auto gz = write_gz(dir, "bytes.jsonl.gz", text);
    l.max_input_bytes = 39 + 35;  // byte 75, the first of line 3, is over
    CHECK(load_error(plain, l) == plain + ":3: more than 74 bytes of input (limits.max_input_bytes)");
    CHECK(load_error(gz, l) == gz + ":3: more than 74 bytes of input (limits.max_input_bytes)");
    l.max_input_bytes = 39;  // byte 40, the first of line 2
    CHECK(load_error(plain, l) == plain + ":2: more than 39 bytes of input (limits.max_input_bytes)");
    l.max_input_bytes = 38;  // the header's newline: still line 1
    CHECK(load_error(gz, l) == gz + ":1: more than 38 bytes of input (limits.max_input_bytes)");
    l.max_input_bytes = text.size();
    CHECK(load_trace(gz, l).tensors.size() == 2);
  }
}

TEST_CASE("limits: the importers apply the same caps", "[limits]") {
  const auto dir = test::scratch_dir("limits-import");
  // A DTR log: annotation, then one constant of 64 bytes (lines 2-3), then a call making r.
  const std::string log =
      "{\"ANNOTATION\":\"START\",\"INSTRUCTION\":\"ANNOTATE\"}\n"        // 48 bytes
      "{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"p\"}\n"                  // 38
      "{\"INSTRUCTION\":\"MEMORY\",\"MEMORY\":\"64\",\"NAME\":\"p\"}\n"  // 50
      "{\"ARGS\":[\"p\"],\"INSTRUCTION\":\"CALL\",\"NAME\":\"relu\",\"RESULT\":[\"r\"],\"TIME\":\"5\"}\n"
      "{\"INSTRUCTION\":\"MEMORY\",\"MEMORY\":\"32\",\"NAME\":\"r\"}\n"
      "{\"ALIAS\":\"-1\",\"INSTRUCTION\":\"ALIAS\",\"NAME\":\"r\"}\n";
  const auto dtr = test::write_file(dir, "small.log", log);
  Limits l;
  REQUIRE(import_dtr_log(dtr, {}, l).tensors.size() == 2);
  l.max_input_bytes = 48 + 38;  // byte 87 opens line 3
  CHECK_THROWS_WITH(import_dtr_log(dtr, {}, l), dtr + ":3: more than 86 bytes of input (limits.max_input_bytes)");
  l = Limits{};
  l.max_tensors = 1;
  CHECK_THROWS_WITH(import_dtr_log(dtr, {}, l), dtr + ": more than 1 tensors (limits.max_tensors)");
  l = Limits{};
  l.max_events = 2;
  CHECK_THROWS_WITH(import_dtr_log(dtr, {}, l), Catch::EndsWith(": more than 2 events (limits.max_events)"));

  // Kineto: the cap cuts the JSON document; the error is the cap's, at the line it falls in.
  const auto kineto =
      test::write_file(dir, "k.json", "{\"traceEvents\": [\n  {\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":1}\n]}\n");
  l = Limits{};
  l.max_input_bytes = 20;  // "{\"traceEvents\": [\n" is 18 bytes: byte 21 is on line 2
  CHECK_THROWS_WITH(import_kineto(kineto, {}, l), kineto + ":2: more than 20 bytes of input (limits.max_input_bytes)");

  // Torch snapshot pickles: the bytes read, before parsing.
  const auto pickle = test::write_file(dir, "s.pickle", std::string("\x80\x02}q\x00.", 6));
  l.max_input_bytes = 5;
  CHECK_THROWS_WITH(import_torch_snapshot(pickle, {}, l),
                    pickle + ": more than 5 bytes of input (limits.max_input_bytes)");
}

TEST_CASE("limits: check_limits on a trace built in memory names the first cap exceeded", "[limits]") {
  Trace t;
  t.tensors.resize(3);
  t.ops.resize(1);
  t.ops[0].file_id = 12;
  t.ops[0].inputs = {TensorId{0}, TensorId{1}, TensorId{2}};
  Limits l;
  CHECK_NOTHROW(check_limits(t, l, "t.jsonl"));
  l.max_op_fan_in = 2;
  CHECK_THROWS_WITH(check_limits(t, l, "t.jsonl"), "t.jsonl: op 12: more than 2 tensors (limits.max_op_fan_in)");
  l.max_tensors = 2;
  CHECK_THROWS_WITH(check_limits(t, l, "t.jsonl"), "t.jsonl: more than 2 tensors (limits.max_tensors)");
}

}  // namespace limits_test
