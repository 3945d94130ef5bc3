// Sweep configs (every validation error, word for word), the planned run list (order, ratio
// budgets, variant restrictions, ratio of the sweep's largest budget), shard slices and the
// CSV line splitter used by --resume and merge.
#include <catch2/catch.hpp>

#include <set>

#include "coopsim/base/error.hpp"
#include "coopsim/sweep/sweep.hpp"
#include "trace_builder.hpp"

using namespace coopsim;
using namespace coopsim::sweep;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace sweep_test {

namespace {

SweepConfig parse(const std::string& text) { return parse_sweep_config(text, "dir/s.json"); }

// A minimal valid document with one key replaced (or removed when `value` is empty).
std::string with(const std::string& key, const std::string& value) {
  nlohmann::ordered_json doc = nlohmann::ordered_json::parse(
      R"({"traces": ["t.jsonl"], "allocators": ["bestfit"], "policies": ["keep"], "budgets": ["1GiB"]})");
  if (value.empty()) {
    doc.erase(key);
  } else {
    doc[key] = nlohmann::ordered_json::parse(value);
  }
  return doc.dump();
}

// Peak live bytes 1000: one 1000-byte tensor allocated, used, freed.
Trace peak_1000(const std::string& name) {
  test::TraceBuilder b(name);
  const auto t = b.tensor(1000);
  const auto op = b.op("fill", 10, {}, {t});
  b.alloc(t).compute(op).free(t);
  return b.trace();
}

}  // namespace

TEST_CASE("sweep config errors name the file and key", "[sweep]") {
  const std::string policies = builtin_components().policies.names();
  const std::string allocators = builtin_components().allocators.names();
  CHECK_THROWS_WITH(parse("{\"traces\": [\"a\"],\n  \"allocators\": [\"bestfit\"],,\n}"),
                    Catch::StartsWith("dir/s.json:2: invalid JSON: syntax error"));
  CHECK_THROWS_WITH(parse("[1]"), "dir/s.json: a sweep config must hold a JSON object");
  CHECK_THROWS_WITH(parse(with("trace", "[\"x\"]")),
                    "dir/s.json: trace: unknown key (valid: description, traces, allocators, policies, budgets, "
                    "variants, base, minbudget)");
  CHECK_THROWS_WITH(parse(with("traces", "")),
                    "dir/s.json: traces: missing (a list of trace files, relative to this file)");
  CHECK_THROWS_WITH(parse(with("traces", "[]")), "dir/s.json: traces: expected a non-empty list of trace files");
  CHECK_THROWS_WITH(parse(with("traces", "[\"a\", 3]")), "dir/s.json: traces[1]: expected a file path, got 3");
  CHECK_THROWS_WITH(parse(with("traces", "[\"a\", \"a\"]")), "dir/s.json: traces[1]: 'a' is listed twice");
  CHECK_THROWS_WITH(parse(with("traces", "[\"a,b\"]")),
                    "dir/s.json: traces[0]: a sweep's trace paths may not hold commas, quotes or control characters");
  CHECK_THROWS_WITH(parse(with("allocators", "")),
                    "dir/s.json: allocators: missing (a list of allocator names or \"all\")");
  CHECK_THROWS_WITH(parse(with("allocators", "[\"bestfit\", \"tlsf\"]")),
                    "dir/s.json: allocators[1]: unknown allocator 'tlsf' (valid: " + allocators + ")");
  CHECK_THROWS_WITH(parse(with("policies", "[\"keep\", \"swap-all\"]")),
                    "dir/s.json: policies[1]: unknown policy 'swap-all' (valid: " + policies + ")");
  CHECK_THROWS_WITH(parse(with("policies", "\"some\"")),
                    "dir/s.json: policies: expected a non-empty list of policy names or \"all\"");
  CHECK_THROWS_WITH(parse(with("policies", "[\"keep\", \"keep\"]")), "dir/s.json: policies[1]: 'keep' is listed twice");
  CHECK_THROWS_WITH(
      parse(with("budgets", "")),
      "dir/s.json: budgets: missing (a list of sizes, {\"from\", \"to\", \"step\"} or {\"ratios\": ...})");
  CHECK_THROWS_WITH(parse(with("budgets", "[\"1GiB\", \"lots\"]")),
                    "dir/s.json: budgets[1]: 'lots' is not a size (e.g. 8GiB, 512MB, 1048576)");
  // Plain numbers below 1024 are refused as the command line's -b refuses them (a ratio or a unit
  // was meant), and numbers out of range name the key (or the line, beyond a double).
  CHECK_THROWS_WITH(parse(with("budgets", "[12]")),
                    "dir/s.json: budgets[0]: '12' has no unit; did you mean \"12GiB\"? (plain numbers below 1024 are "
                    "not taken as bytes; write 12B for 12 bytes)");
  CHECK_THROWS_WITH(parse(with("budgets", "[\"1GiB\", 0.5]")),
                    "dir/s.json: budgets[1]: '0.5' has no unit; did you mean {\"ratios\": [0.5]}? (plain numbers below "
                    "1024 are not taken as bytes)");
  CHECK_THROWS_WITH(parse(with("budgets", "[\"0.5\"]")),
                    "dir/s.json: budgets[0]: '0.5' has no unit; did you mean {\"ratios\": [0.5]}? (plain numbers below "
                    "1024 are not taken as bytes)");
  CHECK(parse(with("budgets", "[\"12B\", 4096]")).budgets[0].size == Bytes{12});
  CHECK_THROWS_WITH(parse(with("budgets", "[-5]")),
                    "dir/s.json: budgets[0]: '-5' is not a size (e.g. 8GiB, 512MB, 1048576)");
  CHECK_THROWS_WITH(parse(with("budgets", "[18446744073709551616]")),
                    "dir/s.json: budgets[0]: '1.8446744073709552e+19' is not a size (e.g. 8GiB, 512MB, 1048576)");
  CHECK_THROWS_WITH(parse("{\"traces\": [\"t.jsonl\"], \"allocators\": [\"bestfit\"], \"policies\": [\"keep\"],\n"
                          "\"budgets\": [1e999]}"),
                    "dir/s.json:2: invalid JSON: number overflow parsing '1e999'");
  CHECK_THROWS_WITH(parse(with("minbudget", "{\"max_overhead\": 0.5}")),
                    "dir/s.json: minbudget.max_overhead: expected a compute overhead of at least 1, got 0.5");
  CHECK_THROWS_WITH(parse(with("allocators", "[\"bestfti\"]")),
                    "dir/s.json: allocators[0]: unknown allocator 'bestfti' (valid: pytorch, cnmem, bestfit, fungible, "
                    "smartpool); did you mean 'bestfit'?");
  CHECK_THROWS_WITH(parse(with("budgets", "[0]")), "dir/s.json: budgets[0]: must be greater than 0");
  CHECK_THROWS_WITH(parse(with("budgets", "{\"from\": \"1GiB\", \"to\": \"2GiB\"}")),
                    "dir/s.json: budgets: a range needs \"from\", \"to\" and \"step\" (missing \"step\")");
  CHECK_THROWS_WITH(parse(with("budgets", "{\"from\": \"2GiB\", \"to\": \"1GiB\", \"step\": \"1GiB\"}")),
                    "dir/s.json: budgets: \"to\" is below \"from\"");
  CHECK_THROWS_WITH(parse(with("budgets", "{\"from\": \"1B\", \"to\": 200000, \"step\": \"1B\"}")),
                    "dir/s.json: budgets: the range gives 200000 budgets (at most 100000)");
  CHECK_THROWS_WITH(parse(with("budgets", "{\"from\": 1, \"to\": 2, \"step\": 1, \"by\": 2}")),
                    "dir/s.json: budgets.by: unknown key (valid: from, to, step)");
  CHECK_THROWS_WITH(
      parse(with("budgets", "{\"ratios\": [0.5, -1]}")),
      "dir/s.json: budgets.ratios[1]: expected a ratio of the trace's peak greater than 0 and at most 1000 "
      "(e.g. 0.5), got -1");
  CHECK_THROWS_WITH(parse(with("budgets", "{\"ratios\": {\"from\": 0.5, \"to\": 1}}")),
                    "dir/s.json: budgets.ratios: a range needs \"from\", \"to\" and \"step\" (missing \"step\")");
  CHECK_THROWS_WITH(parse(with("base", "{\"budget\": \"1GiB\"}")),
                    "dir/s.json: base.budget: the sweep's budgets list sets it");
  CHECK_THROWS_WITH(parse(with("base", "{\"link\": {\"preset\": \"pcie9\"}}")),
                    "dir/s.json: base.link.preset: invalid value 'pcie9' (valid: pcie3-x16, pcie4-x16, pcie5-x16, "
                    "nvlink-c2c, h200)");
  CHECK_THROWS_WITH(parse(with("base", "{\"params\": {\"cnmem\": {\"bogus\": 1}}}")),
                    Catch::StartsWith("dir/s.json: base.cnmem.bogus: unknown parameter (valid for cnmem: "));
  CHECK_THROWS_WITH(parse(with("variants", "{\"a b\": {}}")),
                    "dir/s.json: variants.a b: a variant name may hold only letters, digits and - _ . +");
  CHECK_THROWS_WITH(parse(with("variants", "{\"v\": {\"sett\": {}}}")),
                    "dir/s.json: variants.v.sett: unknown key (valid: description, set, allocators, policies)");
  CHECK_THROWS_WITH(parse(with("variants", "{\"v\": {\"set\": {\"coop.ablation\": \"no-window\"}}}")),
                    "dir/s.json: variants.v.set.coop.ablation: invalid value 'no-window' (valid: none, no op-guided "
                    "allocation, no recomputable in-place, no layout-aware eviction)");
  CHECK_THROWS_WITH(parse(with("variants", "{\"v\": {\"set\": {\"policy\": \"dtr\"}}}")),
                    "dir/s.json: variants.v.set.policy: the sweep's policies list sets it");
  CHECK_THROWS_WITH(parse(with("variants", "{\"v\": {\"set\": {\"dtr.heuristic\": [1]}}}")),
                    "dir/s.json: variants.v.set.dtr.heuristic: expected a string, number or boolean, got [1]");
  CHECK_THROWS_WITH(parse(with("variants", "{\"v\": {\"policies\": [\"dtr\"]}}")),
                    "dir/s.json: variants.v.policies[0]: unknown policy of this sweep 'dtr' (valid: keep)");
  CHECK_THROWS_WITH(parse(with("minbudget", "\"yes\"")),
                    "dir/s.json: minbudget: expected true, false or {\"max_overhead\": X}");
  CHECK_THROWS_WITH(parse(with("minbudget", "{\"max_overhead\": 0.5}")),
                    "dir/s.json: minbudget.max_overhead: expected a compute overhead of at least 1, got 0.5");
}

TEST_CASE("sweep configs: lists, ranges, ratio ranges, variants", "[sweep]") {
  const SweepConfig a = parse(with("budgets", "{\"from\": \"1MiB\", \"to\": \"3.5MiB\", \"step\": \"1MiB\"}"));
  REQUIRE(a.budgets.size() == 3);
  CHECK(a.budgets[2].size == 3_MiB);
  CHECK(a.variants.size() == 1);
  CHECK(a.variants[0].name == "base");
  CHECK(a.dir == "dir");
  CHECK(resolve_trace_path(a, 0) == "dir/t.jsonl");

  const SweepConfig r = parse(with("budgets", "{\"ratios\": {\"from\": 0.25, \"to\": 0.5, \"step\": 0.05}}"));
  REQUIRE(r.budgets.size() == 6);
  CHECK(*r.budgets[1].ratio == 0.3);  // the same double as the literal, not 0.25 + 0.05
  CHECK(*r.budgets[5].ratio == 0.5);

  const SweepConfig v = parse(R"({"traces": ["/abs/t.jsonl"], "allocators": "all", "policies": ["keep", "coop"],
    "budgets": ["1GiB"], "base": {"link": {"preset": "pcie3-x16"}},
    "variants": {"z-first": {}, "noinplace": {"set": {"coop.ablation": "no recomputable in-place",
      "engine.residency_checks": true}, "policies": ["coop"]}},
    "minbudget": {"max_overhead": 1.5}})");
  REQUIRE(v.variants.size() == 2);
  CHECK(v.variants[0].name == "z-first");  // file order, not sorted
  CHECK(v.variants[1].sets ==
        std::vector<std::string>{"coop.ablation=no recomputable in-place", "engine.residency_checks=true"});
  CHECK(v.variants[1].config.doc["params"]["coop"]["ablation"] == "no recomputable in-place");
  CHECK(v.variants[1].config.doc["link"]["preset"] == "pcie3-x16");
  CHECK(v.allocators.size() == builtin_components().allocators.entries().size());
  CHECK(resolve_trace_path(v, 0) == "/abs/t.jsonl");
  CHECK(v.minbudget.enabled);
  CHECK(*v.minbudget.max_overhead == 1.5);
}

TEST_CASE("the grid: order, ratio budgets, variant restrictions, sweep-max ratio", "[sweep]") {
  const SweepConfig cfg = parse(R"({"traces": ["a", "b"], "allocators": ["bestfit", "fungible"],
    "policies": ["keep", "dtr"], "budgets": {"ratios": [0.5, 2]},
    "variants": {"base": {}, "lru": {"set": {"dtr.heuristic": "lru"}, "policies": ["dtr"]}}, "minbudget": true})");
  const std::vector<Trace> traces{peak_1000("a"), peak_1000("b")};
  const SweepGrid grid = make_grid(cfg, traces);
  // per trace: 2 allocators x (keep: base; dtr: base, lru) x 2 budgets = 12
  REQUIRE(grid.runs.size() == 24);
  REQUIRE(grid.searches.size() == 12);
  const GridRun& r0 = grid.runs[0];
  CHECK((r0.trace == 0 && r0.allocator == "bestfit" && r0.policy == "keep" && r0.variant == 0));
  CHECK(r0.budget == Bytes{500});
  CHECK(r0.sweep_largest_budget == Bytes{2000});
  CHECK(grid.runs[1].budget == Bytes{2000});
  CHECK(grid.runs[1].sweep_largest_budget == Bytes{2000});
  CHECK((grid.runs[4].policy == "dtr" && grid.runs[4].variant == 1));
  CHECK((grid.runs[12].trace == 1 && grid.runs[12].allocator == "bestfit"));
  for (std::size_t i = 0; i < grid.runs.size(); ++i) CHECK(grid.runs[i].index == i);
  CHECK((grid.searches[2].policy == "dtr" && grid.searches[2].variant == 1));

  const SimConfig c = run_config(cfg, 1, "bestfit", "dtr", Bytes{500});
  CHECK(c.doc["params"]["dtr"]["heuristic"] == "lru");
  CHECK(c.doc["budget"] == "500");
  CHECK_FALSE(run_config(cfg, 0, "bestfit", "dtr", std::nullopt).doc.contains("budget"));

  // The hash covers the trace contents.
  std::vector<Trace> other = traces;
  other[1].content_hash = 7;
  CHECK(make_grid(cfg, other).hash != grid.hash);
  CHECK(make_grid(cfg, traces).hash == grid.hash);

  const SweepConfig tiny = parse(with("budgets", "{\"ratios\": [0.0001]}"));
  CHECK_THROWS_WITH(make_grid(tiny, {peak_1000("t")}),
                    "dir/s.json: budgets: ratio 0.0001 of 't.jsonl' (peak live 1000 bytes) is a budget of 0 bytes");
  // A ratio whose budget passes 2^64 - 1 bytes is refused (it was cast from a double out of
  // range); the rule is run's "N%" rule (scale_bytes).
  test::TraceBuilder huge("h");
  const auto big = huge.tensor(std::uint64_t{1} << 62);
  huge.alloc(big).compute(huge.op("fill", 10, {}, {big})).free(big);
  const SweepConfig large = parse(with("budgets", "{\"ratios\": [1000]}"));
  CHECK_THROWS_WITH(make_grid(large, {huge.trace()}),
                    "dir/s.json: budgets: ratio 1000 of 't.jsonl' (peak live 4611686018427387904 bytes) is a budget of "
                    "more than 2^64 - 1 bytes");
  // Below that, the sweep's budget is run's: floor(ratio x peak).
  const SweepConfig third = parse(with("budgets", "{\"ratios\": [0.333]}"));
  CHECK(make_grid(third, {peak_1000("t")}).runs.at(0).budget == scale_bytes(0.333, Bytes{1000}).value());
}

TEST_CASE("shards are disjoint slices that cover the run list", "[sweep]") {
  CHECK(parse_shard("2/3").index == 2);
  CHECK(parse_shard("2/3").count == 3);
  for (const char* bad : {"0/3", "4/3", "3", "a/b", "/3", "1/", "1/0", "-1/3", "1/3/4"}) {
    CHECK_THROWS_WITH(parse_shard(bad), std::string("--shard: '") + bad + "' is not K/N with 1 <= K <= N (e.g. 2/8)");
  }
  std::multiset<std::size_t> seen;
  std::size_t sizes = 0;
  for (std::uint32_t k = 1; k <= 3; ++k) {
    for (std::size_t i = 0; i < 10; ++i) {
      if (in_shard(i, {k, 3})) seen.insert(i);
    }
    sizes += shard_size(10, {k, 3});
  }
  CHECK(seen.size() == 10);
  CHECK(std::set<std::size_t>(seen.begin(), seen.end()).size() == 10);
  CHECK(sizes == 10);
  CHECK(shard_size(10, {1, 3}) == 4);
  CHECK(shard_size(2, {3, 3}) == 0);
}

TEST_CASE("CSV lines split with RFC 4180 quoting", "[sweep]") {
  CHECK(split_csv_line("a,,\"b,c\",\"say \"\"hi\"\"\",") == std::vector<std::string>{"a", "", "b,c", "say \"hi\"", ""});
  CHECK(split_csv_line("").size() == 1);
}

}  // namespace sweep_test
