// Plan export and format (docs/plan-format.md): the hand-built swap log exported step by step
// with hand-worked dependencies, the exact text of its steps, the round trip through the loader,
// and malformed plans rejected with exact one-line errors.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>

#include "coopsim/base/error.hpp"
#include "coopsim/replay/replay_plan.hpp"
#include "plan_scenarios.hpp"
#include "test_paths.hpp"

using namespace coopsim;
using namespace coopsim::gpu;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace plan_format_test {

namespace {

Plan swap_plan() { return test::plan_of(test::swap_scenario()); }

// The swap plan's text with one edit applied, parsed as "t.plan.json"; returns the error.
template <typename F>
std::string error_after(F&& edit) {
  nlohmann::json doc = nlohmann::json::parse(plan_to_text(swap_plan()));
  edit(doc);
  try {
    (void)parse_plan(doc.dump(), "t.plan.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("plan export: the swap log becomes steps with hand-worked dependencies") {
  const Plan p = swap_plan();
  REQUIRE(p.steps.size() == 14);  // 15 records + 1 Memory: the Stall and Memory records carry no step
  const std::vector<StepKind> kinds = {StepKind::Alloc, StepKind::Alloc, StepKind::Alloc, StepKind::Op,
                                       StepKind::Free,  StepKind::Alloc, StepKind::Op,    StepKind::SwapOut,
                                       StepKind::Free,  StepKind::Free,  StepKind::Alloc, StepKind::SwapIn,
                                       StepKind::Op,    StepKind::Free};
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    INFO("step " << i);
    CHECK(p.steps[i].kind == kinds[i]);
    CHECK(p.steps[i].stream == stream_of(kinds[i]));
  }
  // w and x are read as version 0: their fresh allocations get filled; y and z are outputs.
  CHECK(p.steps[0].fill);
  CHECK(p.steps[1].fill);
  CHECK_FALSE(p.steps[2].fill);
  CHECK_FALSE(p.steps[5].fill);
  CHECK_FALSE(p.steps[10].fresh);
  // The swap-out waits for f (issued after it: f ended at 1000, the copy started at 1000);
  // w's new block waits for the swap-out to finish reading the old one; the swap-in waits for
  // the allocation (which implies the swap-out, so the host copy is written); h waits for the
  // swap-in. Nothing else crosses streams.
  const std::vector<std::vector<StepId>> after = {{},          {}, {}, {},          {},           {},           {},
                                                  {StepId{3}}, {}, {}, {StepId{7}}, {StepId{10}}, {StepId{11}}, {}};
  for (std::size_t i = 0; i < after.size(); ++i) {
    INFO("step " << i);
    CHECK(p.steps[i].after == after[i]);
  }
  CHECK(p.steps[7].bytes == Bytes{1000});
  CHECK(p.steps[12].writes == std::vector<PlanRef>{PlanRef{TensorId{0}, 1, 0, Bytes{1024}}});
  CHECK(p.header.address_base == 0);
  CHECK(p.header.arena_size == Bytes{3072});
  CHECK(p.tensors.size() == 4);
  CHECK(p.ops.size() == 3);
  CHECK(p.ops[2].name == "h");
  CHECK_NOTHROW(check_plan(p, "swap"));
}

TEST_CASE("plan text: header and steps as documented") {
  const std::string text = plan_to_text(swap_plan());
  CHECK(text.rfind("{\n  \"format\": \"coopsim-plan\",\n  \"version\": 1,\n", 0) == 0);
  CHECK(
      text.find("  \"trace\": {\"path\":\"traces/handmade.jsonl\",\"model\":\"handmade\",\"hash\":\"0123456789abcdef\","
                "\"iterations\":1},\n") != std::string::npos);
  CHECK(text.find("\n    {\"id\":3,\"kind\":\"op\",\"stream\":\"compute\",\"after\":[],\"start_ns\":0,\"end_ns\":1000,"
                  "\"op\":0,\"reads\":[{\"tensor\":1,\"version\":0,\"offset\":1024,\"size\":1024},"
                  "{\"tensor\":0,\"version\":0,\"offset\":0,\"size\":1024}],"
                  "\"writes\":[{\"tensor\":2,\"version\":1,\"offset\":2048,\"size\":1024}]},\n") != std::string::npos);
  CHECK(text.find("\n    {\"id\":11,\"kind\":\"swap_in\",\"stream\":\"h2d\",\"after\":[10],\"start_ns\":1500,"
                  "\"end_ns\":1700,\"tensor\":0,\"version\":0,\"offset\":0,\"size\":1024,\"bytes\":1000},\n") !=
        std::string::npos);
  CHECK(text.find("\n    {\"id\":0,\"kind\":\"alloc\",\"stream\":\"compute\",\"after\":[],\"start_ns\":0,\"end_ns\":0,"
                  "\"tensor\":0,\"offset\":0,\"size\":1024,\"fresh\":true,\"fill\":true},\n") != std::string::npos);
}

TEST_CASE("plan round trip: export, write, load gives the same plan") {
  const Plan p = swap_plan();
  CHECK(parse_plan(plan_to_text(p), "mem") == p);
  const auto dir = test::scratch_dir("plan-roundtrip");
  const std::string path = (dir / "swap.plan.json").string();
  std::ofstream(path) << plan_to_text(p);
  CHECK(load_plan(path) == p);

  const Plan q = test::plan_of(test::remat_scenario());
  REQUIRE(q.steps.size() == 8);
  CHECK(q.steps[3].kind == StepKind::Evict);
  CHECK(q.steps[3].forced);
  CHECK(q.steps[6].kind == StepKind::Recompute);
  CHECK(q.steps[6].origin == StepId{2});
  CHECK(q.steps[6].writes == std::vector<PlanRef>{PlanRef{TensorId{1}, 1, 3072, Bytes{1024}}});
  CHECK(parse_plan(plan_to_text(q), "mem") == q);
  CHECK_NOTHROW(check_plan(q, "remat"));
}

TEST_CASE("plan loader: malformed plans give exact one-line errors") {
  using J = nlohmann::json;
  CHECK(error_after([](J& d) { d["format"] = "coopsim-trace"; }) ==
        "t.plan.json: format: expected 'coopsim-plan', got 'coopsim-trace'");
  CHECK(error_after([](J& d) { d["version"] = 2; }) ==
        "t.plan.json: version: unsupported version 2 (this coopsim reads version 1)");
  CHECK(error_after([](J& d) { d.erase("budget"); }) == "t.plan.json: missing key 'budget'");
  CHECK(error_after([](J& d) { d["bugdet"] = 1; }) ==
        "t.plan.json: unknown key 'bugdet' (expected: format, version, coopsim_version, trace, allocator, policy, "
        "budget, arena_size, address_base, link, simulated, tensors, ops, steps)");
  CHECK(error_after([](J& d) { d["budget"] = "3KiB"; }) ==
        "t.plan.json: budget: expected an unsigned integer, got a string");
  CHECK(error_after([](J& d) { d["trace"]["hash"] = "xyz"; }) ==
        "t.plan.json: trace.hash: expected 16 lowercase hexadecimal digits, got 'xyz'");
  CHECK(error_after([](J& d) { d["link"]["serial"] = 1; }) ==
        "t.plan.json: link.serial: expected true or false, got 1");
  CHECK(error_after([](J& d) { d["tensors"][1]["id"] = 0; }) ==
        "t.plan.json: tensors[1].id: ids must increase: 0 follows 0");
  CHECK(error_after([](J& d) { d["steps"][3]["reads"][0]["offset"] = -5; }) ==
        "t.plan.json: steps[3].reads[0].offset: expected an unsigned integer, got -5");
  CHECK(error_after([](J& d) { d["steps"][4]["kind"] = "malloc"; }) ==
        "t.plan.json: steps[4].kind: unknown step kind 'malloc' (expected: alloc, free, evict, op, recompute, access, "
        "swap_out, swap_in)");
  CHECK(error_after([](J& d) { d["steps"][7]["stream"] = "compute"; }) ==
        "t.plan.json: steps[7].stream: a swap_out step runs on stream 'd2h', got 'compute'");
  CHECK(error_after([](J& d) { d["steps"][7]["after"] = J::array({9}); }) ==
        "t.plan.json: steps[7].after[0]: step 9 is not an earlier step");
  CHECK(error_after([](J& d) { d["steps"][2]["id"] = 5; }) ==
        "t.plan.json: steps[2].id: expected 2 (steps are numbered in order)");
  CHECK(error_after([](J& d) { d["steps"][0]["tensor"] = 99; }) ==
        "t.plan.json: steps[0].tensor: tensor 99 is not in the tensors list");
  CHECK(error_after([](J& d) { d["steps"][5].erase("size"); }) == "t.plan.json: steps[5]: missing key 'size'");
  CHECK(error_after([](J& d) { d["steps"][4]["version"] = 0; }) ==
        "t.plan.json: steps[4]: unknown key 'version' (expected: id, kind, stream, after, start_ns, end_ns, tensor, "
        "offset, size)");
  CHECK(error_after([](J& d) { d["steps"][10]["fill"] = true; }) ==
        "t.plan.json: steps[10].fill: only a fresh allocation starts with version 0");
  CHECK(error_after([](J& d) { d["steps"][6]["end_ns"] = 10; }) ==
        "t.plan.json: steps[6].end_ns: ends (10) before it starts (1000)");
  CHECK(error_after([](J& d) { d["steps"][7]["bytes"] = 4096; }) ==
        "t.plan.json: steps[7].bytes: 4096 bytes do not fit the block of 1024");
  CHECK(error_after([](J& d) { d["steps"][12]["op"] = 7; }) ==
        "t.plan.json: steps[12].op: op 7 is not in the ops list");
  CHECK(error_after([](J& d) { d = J::array(); }) == "t.plan.json: expected an object, got an array");
  CHECK(error_after([](J& d) {
          d["steps"][3] = J::object({{"id", 3}});
        }) == "t.plan.json: steps[3]: missing key 'kind'");
}

TEST_CASE("plan loader: JSON syntax errors name the line") {
  std::string text = plan_to_text(swap_plan());
  text = text.substr(0, text.find("\"budget\"")) + "\"budget\": 3072,,\n";
  try {
    (void)parse_plan(text, "t.plan.json");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.file() == "t.plan.json");
    CHECK(e.line() == 8);
    CHECK(e.problem().rfind("invalid JSON: syntax error while parsing object key", 0) == 0);
  }
  CHECK_THROWS_WITH(load_plan("no/such/file.plan.json"), "no/such/file.plan.json: cannot open plan file");
}

}  // namespace plan_format_test
