// Hostile input shapes (issue 8, part 3): each must load and run in time linear in its size, or
// be refused with its exact one-line error. No timing asserts: a quadratic path would make the
// test run for hours rather than fail, which the suite's timeout reports.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "coopsim/sim/builtin.hpp"
#include "coopsim/base/error.hpp"
#include "coopsim/import/importers.hpp"
#include "coopsim/sim/simulation.hpp"
#include "coopsim/formats/trace_file.hpp"
#include "test_paths.hpp"
#include "trace_builder.hpp"
#include "audited_run.hpp"

namespace fs = std::filesystem;
using namespace coopsim;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace adversarial_test {

namespace {

Report run(const Trace& t, const std::string& allocator, const std::string& policy, std::uint64_t budget) {
  SimConfig cfg;
  cfg.doc = {{"allocator", allocator}, {"policy", policy}, {"budget", std::to_string(budget)}};
  return test::audited_run(cfg, t);
}

}  // namespace

TEST_CASE("adversarial: 10^6 tiny tensors load, summarize and replay", "[adversarial]") {
  // Every tensor is allocated before the first is freed: 10^6 live blocks at the peak.
  constexpr int n = 1'000'000;
  const auto dir = test::scratch_dir("adversarial-tiny");
  std::string text = test::kTraceHeader;
  text.reserve(std::size_t{n} * 100);
  for (int i = 0; i < n; ++i) text += "{\"kind\":\"tensor\",\"id\":" + std::to_string(i) + ",\"bytes\":1}\n";
  for (int i = 0; i < n; ++i) text += "{\"kind\":\"alloc\",\"tensor\":" + std::to_string(i) + "}\n";
  for (int i = 0; i < n; ++i) text += "{\"kind\":\"free\",\"tensor\":" + std::to_string(i) + "}\n";
  const std::string path = test::write_file(dir, "tiny.jsonl", text);
  text = std::string();
  const Trace t = load_trace(path);
  fs::remove(path);
  const TraceSummary s = summarize(t);
  CHECK(s.tensors == n);
  CHECK(s.events == 2 * n);
  CHECK(s.peak_live.value == n);
  for (const char* allocator : {"pytorch", "bestfit", "fungible"}) {
    INFO(allocator);
    const Report r = run(t, allocator, "keep", std::uint64_t{1} << 30);
    CHECK(r.status == RunStatus::Completed);
    CHECK(r.memory.peak_requested.value == n);
  }
  // pytorch and bestfit round every request to 512 bytes.
  CHECK(run(t, "pytorch", "keep", std::uint64_t{1} << 30).memory.peak_allocated.value == std::uint64_t{n} * 512);
}

TEST_CASE("adversarial: a 2^60-byte tensor is refused; 2^53-byte ones replay without overflow", "[adversarial]") {
  const auto dir = test::scratch_dir("adversarial-huge");
  const auto p = test::write_file(
      dir, "huge.jsonl", test::kTraceHeader + "{\"kind\":\"tensor\",\"id\":1,\"bytes\":1152921504606846976}\n");
  CHECK_THROWS_WITH(load_trace(p), p + ":2: tensor 1: field 'bytes' must be an integer in [0, 2^53] (got "
                                       "1152921504606846976)");
  const auto dtr = test::write_file(dir, "huge.log",
                                    "{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"p\"}\n"
                                    "{\"INSTRUCTION\":\"MEMORY\",\"MEMORY\":\"1152921504606846976\",\"NAME\":\"p\"}\n");
  CHECK_THROWS_WITH(import_dtr_log(dtr), dtr +
                                             ":2: MEMORY record: field 'MEMORY' must be at most 2^53 bytes (got "
                                             "'1152921504606846976')");

  // The largest tensors v1 allows, 2^14 of them live at once: 2^67 bytes, far past 64 bits.
  auto huge = [](int n) {
    test::TraceBuilder b;
    std::vector<std::uint32_t> ts;
    for (int i = 0; i < n; ++i) {
      ts.push_back(b.tensor(std::uint64_t{1} << 53));
      b.alloc(ts.back());
    }
    for (const auto x : ts) b.free(x);
    return b;
  };
  const TraceSummary s = summarize(huge(1 << 14).trace());
  CHECK(s.peak_live.value == std::numeric_limits<std::uint64_t>::max());  // saturated, not wrapped
  CHECK(s.total_allocated.value == std::numeric_limits<std::uint64_t>::max());
  // 513 of them (just over 2^62 bytes) at a budget of 2^62, which holds 512: every allocator
  // stops at the 513th allocation (event 512) with the exact OOM point.
  const auto b = huge(513);
  for (const auto& a : builtin_components().allocators.entries()) {
    INFO(a.name);
    const Report r = run(b.trace(), a.name, "keep", std::uint64_t{1} << 62);
    REQUIRE(r.status == RunStatus::OutOfMemory);
    REQUIRE(r.oom.has_value());
    CHECK(r.oom->event == EventId{512});
    CHECK(r.oom->requested.value == std::uint64_t{1} << 53);
  }
}

TEST_CASE("adversarial: a 10^5-op recompute chain read from a file", "[adversarial]") {
  // remat_test's chain, through the loader: x_{i-1} is freed after f_i; a 200-byte allocation at
  // a 300-byte budget evicts x_N, and reading it re-runs f_1..f_N, one value at a time.
  constexpr int n = 100'000;
  const auto dir = test::scratch_dir("adversarial-chain");
  std::string text =
      test::kTraceHeader +
      "{\"kind\":\"tensor\",\"id\":0,\"bytes\":100,\"role\":\"input\"}\n{\"kind\":\"alloc\",\"tensor\":0}\n";
  for (int i = 1; i <= n; ++i) {
    const std::string x = std::to_string(i), prev = std::to_string(i - 1);
    text += "{\"kind\":\"tensor\",\"id\":" + x + ",\"bytes\":100}\n";
    text += "{\"kind\":\"op\",\"id\":" + x + ",\"name\":\"f\",\"duration\":1,\"inputs\":[" + prev + "],\"outputs\":[" +
            x + "]}\n";
    text += "{\"kind\":\"alloc\",\"tensor\":" + x + "}\n{\"kind\":\"compute\",\"op\":" + x + "}\n";
    if (i >= 2) text += "{\"kind\":\"free\",\"tensor\":" + prev + "}\n";
  }
  const std::string z = std::to_string(n + 1);
  text += "{\"kind\":\"tensor\",\"id\":" + z + ",\"bytes\":200}\n";
  text += "{\"kind\":\"op\",\"id\":" + z + ",\"name\":\"z\",\"duration\":1,\"inputs\":[0],\"outputs\":[" + z + "]}\n";
  text += "{\"kind\":\"alloc\",\"tensor\":" + z + "}\n{\"kind\":\"compute\",\"op\":" + z + "}\n";
  text += "{\"kind\":\"free\",\"tensor\":" + z + "}\n";
  text += "{\"kind\":\"op\",\"id\":" + std::to_string(n + 2) + ",\"name\":\"use\",\"duration\":1,\"inputs\":[" +
          std::to_string(n) + "]}\n";
  text += "{\"kind\":\"compute\",\"op\":" + std::to_string(n + 2) + "}\n";
  const Trace t = load_trace(test::write_file(dir, "chain.jsonl", text));
  CHECK(t.ops.size() == n + 2);
  const Report r = run(t, "fungible", "dtr", 300);
  REQUIRE(r.status == RunStatus::Completed);
  CHECK(r.time.recomputes == n);
  CHECK(r.counters.forced_evictions == 1);

  // limits.max_recompute_depth: the chain nests n recomputations; a cap of n passes, n - 1 is
  // one short. The failing event is "use": 1 + 2 + 3 (n - 1) events for x_0..x_n, 3 for z.
  for (const int cap : {n, n - 1}) {
    SimConfig cfg;
    cfg.doc = {
        {"allocator", "fungible"}, {"policy", "dtr"}, {"budget", "300"}, {"limits", {{"max_recompute_depth", cap}}}};
    if (cap == n) {
      CHECK(test::audited_run(cfg, t).time.recomputes == n);
    } else {
      CHECK_THROWS_WITH(test::audited_run(cfg, t),
                        t.path + ": event " + std::to_string(1 + 2 + 3 * (n - 1) + 3) + ": rematerializing tensor " +
                            std::to_string(n) +
                            " needs more than 99999 nested recomputations (limits.max_recompute_depth)");
    }
  }
}

TEST_CASE("adversarial: lines with 2*10^5 keys and ops with 65536-entry lists stay linear", "[adversarial]") {
  const auto dir = test::scratch_dir("adversarial-wide");
  // 200000 extension keys on one mark record: the duplicate-key check used to compare every
  // pair of keys (2*10^10 comparisons).
  std::string mark = "{\"kind\":\"mark\",\"label\":\"wide\"";
  for (int i = 0; i < 200'000; ++i) mark += ",\"x_" + std::to_string(i) + "\":0";
  const Trace wide = load_trace(test::write_file(dir, "wide.jsonl", test::kTraceHeader + mark + "}\n"));
  CHECK(wide.labels == std::vector<std::string>{"wide"});
  CHECK_THROWS_WITH(load_trace(test::write_file(dir, "dup.jsonl", test::kTraceHeader + mark + ",\"x_123456\":1}\n")),
                    (dir / "dup.jsonl").string() + ":2: duplicate key 'x_123456'");

  // An op listing 65536 inputs (the default fan-in cap), each also mutated: the mutates-are-
  // inputs check used to scan the inputs once per entry (4*10^9 comparisons).
  constexpr int k = 65'536;
  std::string text = test::kTraceHeader;
  std::string list;
  for (int i = 0; i < k; ++i) {
    text += "{\"kind\":\"tensor\",\"id\":" + std::to_string(i) + ",\"bytes\":8}\n";
    list += (i ? "," : "") + std::to_string(i);
  }
  text += "{\"kind\":\"op\",\"id\":0,\"inputs\":[" + list + "],\"mutates\":[" + list + "]}\n";
  const Trace t = load_trace(test::write_file(dir, "fan.jsonl", text));
  CHECK(t.ops.at(0).mutated.size() == k);

  // A DTR record with 200000 keys: refused, in linear time, by the duplicate-key check.
  std::string call = "{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"p\"";
  for (int i = 0; i < 200'000; ++i) call += ",\"K" + std::to_string(i) + "\":\"\"";
  const auto dtr = test::write_file(dir, "wide.log", call + ",\"K77\":\"\"}\n");
  CHECK_THROWS_WITH(import_dtr_log(dtr), dtr + ":1: duplicate key 'K77'");
}

}  // namespace adversarial_test
