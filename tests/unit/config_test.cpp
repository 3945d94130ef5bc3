// Config loading, overrides, validation and the resolved config in reports.
#include <catch2/catch.hpp>

#include <fstream>

#include "coopsim/alloc/registry.hpp"
#include "coopsim/base/error.hpp"
#include "coopsim/sim/simulation.hpp"
#include "test_paths.hpp"
#include "trace_builder.hpp"
#include "audited_run.hpp"

using namespace coopsim;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace config_test {

namespace {
SimConfig from(const nlohmann::json& j) {
  SimConfig c;
  c.source = "cfg.json";
  c.doc = j;
  return c;
}
}  // namespace

TEST_CASE("overrides route component names to params", "[config]") {
  SimConfig c;
  apply_override(c, "pytorch.max_split_size=64MiB");
  apply_override(c, "budget=4GiB");
  apply_override(c, "link.preset=pcie3-x16");
  apply_override(c, "engine.paranoid=true");
  CHECK(c.doc["params"]["pytorch"]["max_split_size"] == "64MiB");
  CHECK(c.doc["budget"] == "4GiB");
  CHECK(c.doc["link"]["preset"] == "pcie3-x16");
  CHECK(c.doc["engine"]["paranoid"] == true);
  CHECK_NOTHROW(check_config(c));
  CHECK_THROWS_WITH(apply_override(c, "novalue"), "--set novalue: expected key=value");
}

TEST_CASE("config errors name the file and key and list valid choices", "[config]") {
  const std::string allocs = builtin_components().allocators.names();
  CHECK_THROWS_WITH(check_config(from({{"alocator", "x"}})),
                    "cfg.json: alocator: unknown key (valid: allocator, policy, budget, initial_state, link, engine, params, "
                    "limits, description)");
  CHECK_THROWS_WITH(check_config(from({{"allocator", "tlsf"}})),
                    "cfg.json: allocator: unknown allocator 'tlsf' (valid: " + allocs + ")");
  CHECK_THROWS_WITH(
      check_config(from({{"policy", "magic"}})),
      "cfg.json: policy: unknown policy 'magic' (valid: keep, coop, dte, dtr, autoswap, vdnn, pooch, capuchin)");
  CHECK_THROWS_WITH(check_config(from({{"budget", "lots"}})),
                    "cfg.json: budget: expected a size such as 512MiB, 8GiB or plain bytes, got \"lots\"");
  CHECK_THROWS_WITH(check_config(from({{"budget", 0}})), "cfg.json: budget: must be greater than 0");
  CHECK_THROWS_WITH(check_config(from({{"link", {{"preset", "pcie9"}}}})),
                    "cfg.json: link.preset: invalid value 'pcie9' (valid: pcie3-x16, pcie4-x16, pcie5-x16, "
                    "nvlink-c2c, h200)");
  CHECK_THROWS_WITH(check_config(from({{"params", {{"cnmem", {{"bogus", 1}}}}}})),
                    Catch::StartsWith("cfg.json: cnmem.bogus: unknown parameter (valid for cnmem: "));
  CHECK_THROWS_WITH(check_config(from({{"params", {{"tlsf", nlohmann::json::object()}}}})),
                    Catch::StartsWith("cfg.json: params.tlsf: unknown component (allocators: "));
  CHECK_THROWS_WITH(check_config(from({{"engine", {{"paranoid", "maybe"}}}})),
                    "cfg.json: engine.paranoid: expected true or false, got \"maybe\"");
}

TEST_CASE("config files with bad JSON report file:line", "[config]") {
  const auto dir = test::scratch_dir("config");
  const auto path = (dir / "bad.json").string();
  std::ofstream(path) << "{\n  \"budget\": \"1GiB\",\n  \"allocator\" \"cnmem\"\n}\n";
  CHECK_THROWS_WITH(load_config(path), Catch::StartsWith(path + ":3: invalid JSON: "));
  CHECK_THROWS_WITH(load_config((dir / "missing.json").string()),
                    (dir / "missing.json").string() + ": cannot open config file");
}

TEST_CASE("the report carries the resolved config with every default", "[config]") {
  test::TraceBuilder b;
  const auto t = b.tensor(1000);
  b.alloc(t).free(t);
  SimConfig c = from({{"allocator", "cnmem"}, {"budget", "1MiB"}});
  const Report r = test::audited_run(c, b.trace());
  CHECK(r.allocator == "cnmem");
  CHECK(r.policy == "keep");
  CHECK(r.budget.value == 1 << 20);
  CHECK(r.config["budget"] == 1 << 20);
  CHECK(r.config["link"]["preset"] == "pcie4-x16");
  CHECK(r.config["engine"]["paranoid"] == false);
  CHECK(r.config["params"].contains("cnmem"));
  CHECK(r.config["params"].contains("keep"));
  CHECK(r.memory.peak_allocated.value == 1024);
}

TEST_CASE("a trace recorded for a device profile names its link; the config's preset wins", "[config]") {
  test::TraceBuilder b;
  const auto t = b.tensor(1000);
  b.alloc(t).free(t);
  Trace trace = b.trace();
  trace.header.source = {{"durations", {{"profile", "h200"}, {"link", "h200"}}}};
  SimConfig c = from({{"allocator", "cnmem"}, {"budget", "1MiB"}});
  Report r = test::audited_run(c, trace);
  CHECK(r.config["link"]["preset"] == "h200");
  CHECK(r.config["link"]["resolved_name"] == "h200");
  CHECK(r.config["link"]["preset_from"] == "trace");
  // The config's fields still override the trace's preset.
  c = from({{"allocator", "cnmem"}, {"budget", "1MiB"}, {"link", {{"d2h_gbps", 10.0}}}});
  r = test::audited_run(c, trace);
  CHECK(r.config["link"]["resolved_name"] == "h200+custom");
  // A preset in the config is the one used.
  c = from({{"allocator", "cnmem"}, {"budget", "1MiB"}, {"link", {{"preset", "pcie3-x16"}}}});
  r = test::audited_run(c, trace);
  CHECK(r.config["link"]["resolved_name"] == "pcie3-x16");
  CHECK_FALSE(r.config["link"].contains("preset_from"));
  // A trace naming no preset coopsim knows: one line naming the trace, the key and the way out.
  trace.header.source["durations"]["link"] = "pcie9-x64";
  c = from({{"allocator", "cnmem"}, {"budget", "1MiB"}});
  CHECK_THROWS_WITH(test::audited_run(c, trace),
                    Catch::Contains("<builder>: header source.durations.link names \"pcie9-x64\", not a link preset") &&
                        Catch::Contains("--set link.preset=NAME"));
  // Traces without it (every bundled one) keep the default.
  trace.header.source = nlohmann::json::object();
  CHECK(test::audited_run(c, trace).config["link"]["resolved_name"] == "pcie4-x16");
}

TEST_CASE("--set numbers beyond a double or a type name the key", "[config]") {
  const auto checked = [](const std::string& assignment) {
    SimConfig c;
    apply_override(c, assignment);
    try {
      check_config(c);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(checked("link.d2h_gbps=1e999") ==
        "link.d2h_gbps: expected a number within the range of a double, got \"1e999\"");
  CHECK(checked("budget=1e999") == "budget: expected a size such as 512MiB, 8GiB or plain bytes, got \"1e999\"");
  CHECK(checked("engine.paranoid=1e999") == "engine.paranoid: expected true or false, got \"1e999\"");
  CHECK(checked("limits.max_tensors=18446744073709551615") ==
        "limits.max_tensors: expected an integer from -9223372036854775808 to 9223372036854775807, got "
        "18446744073709551615");
  CHECK(checked("pytorch.max_split_size=-1") == "pytorch.max_split_size: expected a non-negative size, got -1");
  CHECK(checked("pytorch.garbage_collection_threshold=1e300") == "no error");  // checked when the allocator is built
  // The valid names are the registry's, whatever it holds.
  CHECK(checked("allocator=bestfti") ==
        "allocator: unknown allocator 'bestfti' (valid: " + builtin_allocators().names() + "); did you mean 'bestfit'?");
}

}  // namespace config_test
