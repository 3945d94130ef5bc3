// Kineto + Execution Trace import (`import kineto --et`, src/import/et_*.cpp,
// docs/import-kineto.md "Dataflow from an Execution Trace"). The fixtures in tests/data/kineto/
// are hand-written: et_flat.json (schema 1.0.1) and et_chakra.json (1.1.0-chakra.0.0.4) hold
// the same ten nodes of one tiny step; et_kineto.json is its Kineto trace without Record
// function ids (execution-order link), et_kineto_rf.json the same with ids plus one op the ET
// does not have (aten::zero_, rf 99), which only the rf_id link can skip.
//
// Hand derivation (top-level ops in id order; storages on cuda:0; cpu tensors ignored):
//   op0 aten::mm(x s20, w s21) -> s22 (its nested aten::empty also writes s22)
//   op1 aten::relu_(s22) in place ("Tensor(a!)")      op2 aten::view(s22) -> view of s22
//   op3 aten::sum(view of s22) -> s23                 op4 aten::add_(w s21 "Tensor(a!)", s23)
//   op5 aten::mul(x s20, cpu tensor) -> s22 again: not read by op5, so a new allocation at a
//       reused address; the first s22 ends after op3, its last use.
// Tensors: t0 s20 24 B input (before the trace, never written), t1 s21 48 B parameter (written
// by op4), t2 s22 32 B, t3 s23 4 B, t4 s22 (6 x 4) 24 B. Durations: kernel time launched inside
// each op, nested ops included: mm 7 + 1 (its aten::empty's memset) = 8 us, relu_ 3, view 0,
// sum 2, add_ 1, mul 4.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "coopsim/base/error.hpp"
#include "coopsim/import/importers.hpp"
#include "coopsim/model/report.hpp"
#include "coopsim/sim/simulation.hpp"
#include "coopsim/model/trace.hpp"
#include "coopsim/formats/trace_file.hpp"
#include "import/et_detail.hpp"
#include "test_paths.hpp"
#include "trace_builder.hpp"
#include "audited_run.hpp"

namespace fs = std::filesystem;
using namespace coopsim;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace import_et_test {

namespace {

const std::string kFlat = "tests/data/kineto/et_flat.json";
const std::string kChakra = "tests/data/kineto/et_chakra.json";
const std::string kKineto = "tests/data/kineto/et_kineto.json";
const std::string kKinetoRf = "tests/data/kineto/et_kineto_rf.json";

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string put(const std::string& name, const std::string& text) {
  const fs::path p = test::scratch_dir("et-" + name) / name;
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}

Trace linked(const std::string& kineto, const std::string& et, const Limits& limits = {}) {
  KinetoOptions o;
  o.et = et;
  return import_kineto(kineto, o, limits);
}

std::vector<std::uint32_t> ids(const std::vector<TensorId>& v) {
  std::vector<std::uint32_t> out;
  for (const TensorId t : v) out.push_back(index_of(t));
  return out;
}

std::string kinds(const Trace& t) {
  std::string s;
  for (const TraceEvent& e : t.events) {
    const char* k[] = {"A", "F", "X", "C", "I", "M"};
    s += fmt::format(
        "{}{} ", k[static_cast<int>(e.kind)],
        e.kind == EventKind::Mark || e.kind == EventKind::Iteration ? "" : std::to_string(test::subject_index(e)));
  }
  return s;
}

// The hand derivation above, for every pairing of the fixtures.
void check_tiny(const Trace& t) {
  REQUIRE(t.tensors.size() == 5);
  const std::vector<std::uint64_t> bytes{24, 48, 32, 4, 24};
  const std::vector<TensorRole> roles{TensorRole::Input, TensorRole::Parameter, TensorRole::Activation,
                                      TensorRole::Activation, TensorRole::Activation};
  for (std::size_t i = 0; i < 5; ++i) {
    CHECK(t.tensors[i].size.value == bytes[i]);
    CHECK(t.tensors[i].role == roles[i]);
    CHECK_FALSE(t.tensors[i].is_view());
  }
  REQUIRE(t.ops.size() == 6);
  const std::vector<std::string> names{"aten::mm", "aten::relu_", "aten::view", "aten::sum", "aten::add_", "aten::mul"};
  const std::vector<std::vector<std::uint32_t>> in{{0, 1}, {2}, {2}, {2}, {1, 3}, {0}}, out{{2}, {}, {}, {3}, {}, {4}},
      mut{{}, {2}, {}, {}, {1}, {}};
  const std::vector<std::int64_t> ns{8000, 3000, 0, 2000, 1000, 4000};
  for (std::size_t k = 0; k < 6; ++k) {
    INFO("op " << k);
    CHECK(t.ops[k].name == names[k]);
    CHECK(ids(t.ops[k].inputs) == in[k]);
    CHECK(ids(t.ops[k].outputs) == out[k]);
    CHECK(ids(t.ops[k].mutated) == mut[k]);
    CHECK(t.ops[k].duration.count() == ns[k]);
    CHECK_FALSE(t.ops[k].random);
  }
  CHECK(kinds(t) == "A0 A1 I M A2 C0 C1 C2 A3 C3 F2 C4 F3 A4 C5 F4 ");
  CHECK(t.labels == std::vector<std::string>{"forward"});
  CHECK(t.header.iterations == 1);
  std::vector<std::int64_t> times;
  for (const TraceEvent& e : t.events) times.push_back(e.time.count());
  CHECK(times == std::vector<std::int64_t>{0, 0, 0, 0, 0, 0, 8000, 11000, 11000, 11000, 13000, 13000, 14000, 14000,
                                           14000, 18000});
  CHECK(summarize(t).peak_live.value == 24 + 48 + 32 + 4);
}

}  // namespace

TEST_CASE("et: schema 1.0.1 linked by execution order", "[kineto][et]") {
  const Trace t = linked(kKineto, kFlat);
  check_tiny(t);
  CHECK(t.header.source["link"]["method"].get<std::string>().rfind("execution order", 0) == 0);
  CHECK(t.header.source["link"]["linked"] == 7);  // the six top-level ops and the nested aten::empty
  CHECK(t.header.source["execution_trace"]["schema"] == "1.0.1");
}

TEST_CASE("et: schema 1.1.0-chakra linked by execution order gives the same trace", "[kineto][et]") {
  const Trace a = linked(kKineto, kFlat), b = linked(kKineto, kChakra);
  check_tiny(b);
  CHECK(a.tensors == b.tensors);
  CHECK(a.ops == b.ops);
  CHECK(a.events == b.events);
  CHECK(b.header.source["execution_trace"]["schema"] == "1.1.0-chakra.0.0.4");
}

TEST_CASE("et: Record function ids link by rf_id and skip a Kineto op the ET lacks", "[kineto][et]") {
  for (const std::string& et : {kFlat, kChakra}) {
    INFO(et);
    const Trace t = linked(kKinetoRf, et);
    check_tiny(t);  // aten::zero_ (rf 99) and its 5 us kernel are not attributed to any op
    CHECK(t.header.source["link"]["method"].get<std::string>().rfind("rf_id", 0) == 0);
    CHECK(t.header.source["link"]["missing"] == 0);
  }
}

TEST_CASE("et: pairs that are not from one run are refused", "[kineto][et]") {
  // Another process.
  const std::string other_pid = put("pid.json", replace(slurp(kFlat), "\"pid\": 7", "\"pid\": 8"));
  CHECK_THROWS_WITH(linked(kKineto, other_pid), other_pid + ": not from the same run as " + kKineto +
                                                    ": the ET's pid 8 is not a process of the Kineto trace (pids: 7)");
  // Same pid, different op sequence (one of 7 names differs; 5 % of 7 rounds down to 0).
  const std::string renamed = put("renamed.json", replace(slurp(kFlat), "\"aten::sum\"", "\"aten::mean\""));
  CHECK_THROWS_WITH(linked(kKineto, renamed),
                    renamed + ": not from the same run as " + kKineto +
                        ": the 7 ops of ET thread 1 match no run of Kineto ops in execution order (more than 0 names "
                        "differ at every position of every unused Kineto thread; at most 5% may differ)");
  // rf ids that name other ops.
  const std::string rf = put("rf.json", replace(slurp(kKinetoRf), "\"aten::view\"", "\"aten::reshape\""));
  CHECK_THROWS_WITH(linked(rf, kChakra),
                    Catch::StartsWith(kChakra + ": not from the same run as " + rf + ": 1 of the ET's 7 ops"));
}

TEST_CASE("et: malformed Execution Traces give one-line file:line errors", "[kineto][et]") {
  const std::string flat = slurp(kFlat), chakra = slurp(kChakra);
  struct Case {
    std::string name, text, message;
  };
  const std::vector<Case> cases{
      {"short_tuple.json", replace(flat, "[[10, 20, 0, 6, 4, \"cuda:0\"], [11", "[[10, 20, 0, 6, 4], [11"),
       ":4: nodes[2] (id 4): inputs[0]: expected a tensor tuple [tensor id, storage id, offset, numel, element bytes, "
       "device] (got an array of 5)"},
      {"negative.json", replace(flat, "[[10, 20, 0, 6, 4, \"cuda:0\"], [11", "[[10, 20, -1, 6, 4, \"cuda:0\"], [11"),
       ":4: nodes[2] (id 4): inputs[0][2]: expected a non-negative integer in a tensor tuple [tensor id, storage id, "
       "offset, numel, element bytes, device] (got -1)"},
      {"overflow.json",
       replace(flat, "[[10, 20, 0, 6, 4, \"cuda:0\"], [11", "[[10, 20, 0, 18446744073709551615, 4, \"cuda:0\"], [11"),
       ":4: nodes[2] (id 4): tensor 10 of storage 20: (offset 0 + numel 18446744073709551615) x 4 bytes is out of "
       "range"},
      {"types.json",
       replace(flat, "\"input_types\": [\"Tensor(float)\", \"Tensor(float)\"]", "\"input_types\": [\"Tensor(float)\"]"),
       ":4: nodes[2] (id 4): 'inputs' has 2 entries but 'input_types' has 1"},
      {"id.json", replace(flat, "\"id\": 4,", "\"id\": \"4\","),
       ":4: nodes[2]: field 'id' must be an integer (got '4')"},
      {"dup.json", replace(flat, "\"id\": 5,", "\"id\": 4,"), ":4: nodes[2]: duplicate node id 4 (also nodes[1])"},
      {"attrs.json",
       replace(chakra, "\"attrs\": [{\"name\": \"rf_id\", \"type\": \"uint64\", \"value\": 1}",
               "\"attrs\": [{\"name\": \"rf_id\", \"type\": \"uint64\", \"value\": \"one\"}"),
       ":4: nodes[2] (id 4): field 'attrs[0].value' must be an integer (got 'one')"},
      {"cycle.json",
       replace(flat, "\"id\": 2, \"rf_id\": 0, \"parent\": 1,", "\"id\": 2, \"rf_id\": 0, \"parent\": 3,"),
       ":4: nodes[2] (id 4): its parent chain has a cycle"},
      {"loop.json", replace(flat, "\"id\": 3, \"rf_id\": 0, \"parent\": 2,", "\"id\": 3, \"rf_id\": 0, \"parent\": 4,"),
       ":4: nodes[2] (id 4): its parent chain has a cycle"},
      {"no_nodes.json", "{\"schema\": \"1.0.1\", \"pid\": 7}\n",
       ":1: not an Execution Trace: the top-level object has no 'nodes' array"},
      {"array.json", "[]",
       ":1: not an Execution Trace: the top level must be a JSON object with 'nodes' (got an array)"},
      {"truncated.json", flat.substr(0, flat.size() / 2), ""},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const std::string p = put(c.name, c.text);
    try {
      linked(kKineto, p);
      FAIL("no error");
    } catch (const Error& e) {
      const std::string what = e.what();
      CHECK(what.find('\n') == std::string::npos);
      CHECK(what.rfind(p + ":", 0) == 0);
      if (!c.message.empty()) CHECK(what == p + c.message);
      if (c.message.empty()) CHECK_THAT(what, Catch::Contains("malformed JSON"));
    }
  }
}

TEST_CASE("et: the limits caps apply to the Execution Trace", "[kineto][et]") {
  Limits fan_in;
  fan_in.max_op_fan_in = 1;  // aten::mm reads two tensors
  CHECK_THROWS_WITH(linked(kKineto, kFlat, fan_in),
                    kFlat + ":4: nodes[2] (id 4): more than 1 tensors in inputs (limits.max_op_fan_in)");
  Limits nodes;
  nodes.max_events = 3;
  CHECK_THROWS_WITH(linked(kKineto, kFlat, nodes), kFlat + ":5: nodes[3]: more than 3 ET nodes (limits.max_events)");
  Limits bytes;
  bytes.max_input_bytes = 3000;  // the Kineto file has 2693 bytes, the ET 3922
  CHECK_THROWS_WITH(linked(kKineto, kFlat, bytes),
                    Catch::Contains("(limits.max_input_bytes)") && Catch::StartsWith(kFlat + ":"));
  Limits tensors;
  tensors.max_tensors = 4;
  CHECK_THROWS_WITH(linked(kKineto, kFlat, tensors), Catch::Contains("(limits.max_tensors)"));
}

TEST_CASE("et: the linked trace is a valid trace v1 (written, loaded back, replayed)", "[kineto][et]") {
  const Trace t = linked(kKineto, kChakra);
  const std::string out = (test::scratch_dir("et-roundtrip") / "tiny.jsonl.gz").string();
  write_trace(t, out);
  const Trace back = load_trace(out);
  CHECK(back.tensors == t.tensors);
  CHECK(back.ops == t.ops);
  CHECK(back.events == t.events);
  SimConfig cfg;
  cfg.doc = {{"allocator", "fungible"}, {"policy", "keep"}, {"budget", "108"}};
  CHECK(test::audited_run(cfg, back).status == RunStatus::Completed);
  cfg.doc["budget"] = "107";  // op3 needs t0, t1 (constants), its input t2 and its output t3
  CHECK(test::audited_run(cfg, back).status == RunStatus::OutOfMemory);
  // dtr runs it too (its engine gives relu_'s in-place write of t2 a fresh 32 B version).
  cfg.doc = {{"allocator", "fungible"}, {"policy", "dtr"}, {"budget", "136"}};
  CHECK(test::audited_run(cfg, back).status == RunStatus::Completed);
}

TEST_CASE("et: in-place writes come from the schema's '!' annotations", "[kineto][et]") {
  using et_detail::written_arguments;
  CHECK(written_arguments("aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)") ==
        std::vector<bool>{true, false, false});
  CHECK(written_arguments("aten::_foreach_add_.List(Tensor(a!)[] self, Tensor[] other, *, Scalar alpha=1) -> ()") ==
        std::vector<bool>{true, false, false});
  CHECK(written_arguments("aten::to.dtype(Tensor(a) self, ScalarType dtype, bool non_blocking=False) -> Tensor(a)") ==
        std::vector<bool>{false, false, false});
  CHECK(written_arguments("").empty());
  CHECK(written_arguments("aten::broken(Tensor self").empty());
  const std::string flat = slurp(kFlat);
  const std::string relu = "\"aten::relu_(Tensor(a!) self) -> Tensor(a!)\"";
  // An alias return (same tensor id, no '!'), like aten::to returning self, is no write.
  const Trace alias =
      linked(kKineto, put("alias.json", replace(flat, relu, "\"aten::relu_(Tensor(a) self) -> Tensor(a)\"")));
  CHECK(alias.ops[1].mutated.empty());
  // Without a schema, returning the input tensor itself counts as an in-place write.
  const Trace bare = linked(kKineto, put("bare.json", replace(flat, relu, "\"\"")));
  CHECK(ids(bare.ops[1].mutated) == std::vector<std::uint32_t>{2});
}

// ---- the public pairs in ../shared/traces/chakra_et --------------------------------------

TEST_CASE("et: the public same-run pairs link; the resnet pair is refused", "[kineto][et][shared]") {
  if (!test::have_shared()) {
    WARN("../shared not present: skipping the public Execution Trace pairs");
    return;
  }
  const fs::path dir = test::shared_dir() / "traces" / "chakra_et";
  struct Pair {
    std::string name;
    std::uint64_t et_ops, ops, tensors, peak;
  };
  // Measured with this importer and checked against the ET by hand (docs/import-kineto.md).
  for (const Pair& p : {Pair{"linear", 926, 196, 241, 230862848}, Pair{"hta_simple_add", 28, 10, 4, 786432}}) {
    INFO(p.name);
    const Trace t = linked((dir / (p.name + "_kineto.json.gz")).string(), (dir / (p.name + "_et.json.gz")).string());
    CHECK(t.header.source["link"]["et_ops"] == p.et_ops);
    CHECK(t.header.source["link"]["linked"] == p.et_ops);  // every ET op found its Kineto op
    CHECK(t.ops.size() == p.ops);
    CHECK(t.tensors.size() == p.tensors);
    CHECK(summarize(t).peak_live.value == p.peak);
    std::size_t with_inputs = 0;
    for (const OpInfo& op : t.ops) with_inputs += op.inputs.empty() ? 0 : 1;
    CHECK(with_inputs > 0);

    // dtr at 60 % of the peak: either it recomputes, or it runs out of memory because the
    // tensors it may not evict (parameters, inputs, outputs of random ops) exceed the budget.
    SimConfig cfg;
    cfg.doc = {{"allocator", "pytorch"}, {"policy", "dtr"}, {"budget", std::to_string(p.peak * 60 / 100)}};
    const Report r = test::audited_run(cfg, t);
    const bool recomputed = r.time.recomputes > 0 && r.time.recompute_time.count() > 0;
    CHECK((recomputed || r.status == RunStatus::OutOfMemory));
  }
  // linear at 90 %: dtr does evict and recompute (nonzero cost).
  const Trace lin = linked((dir / "linear_kineto.json.gz").string(), (dir / "linear_et.json.gz").string());
  SimConfig cfg;
  cfg.doc = {{"allocator", "pytorch"}, {"policy", "dtr"}, {"budget", std::to_string(230862848ULL * 90 / 100)}};
  const Report r = test::audited_run(cfg, lin);
  CHECK(r.time.recomputes > 0);
  CHECK(r.time.recompute_time.count() > 0);

  const std::string et = (dir / "resnet_et.json.gz").string(), kineto = (dir / "resnet_kineto.json.gz").string();
  CHECK_THROWS_WITH(linked(kineto, et),
                    et + ": not from the same run as " + kineto +
                        ": the ET's pid 1734239 is not a process of the Kineto trace (pids: 23442)");
}

}  // namespace import_et_test
