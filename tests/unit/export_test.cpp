// Timeline exports of a hand-built run: the Perfetto / Chrome trace JSON (structure, tracks,
// exact times, counters) and the SVG memory map (one rectangle per block lifetime, markers,
// the rectangle cap, stacked bars for address-blind logs).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <map>
#include <string>

#include "coopsim/output/export.hpp"
#include "coopsim/audit/audit.hpp"
#include "runlog_builder.hpp"

using namespace coopsim;
using coopsim::test::chain_trace;
using coopsim::test::LogBuilder;
using coopsim::test::ref;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace export_test {

namespace {

// The chain (runlog_builder.hpp) run with b swapped out and in before h, c evicted after h and
// recomputed; numbers are the records.
RunLog example_log(bool address_aware = true) {
  LogBuilder l(1024, address_aware);
  l.alloc(0, ref(0, 0, 0x0), true, 0).memory(0, 512, 1024, 0);                                        // 0, 1
  l.compute(1, 0, 0, 10, {}, {ref(0, 1, 0x0)});                                                       // 2
  l.alloc(2, ref(1, 0, 0x200), true, 10).memory(2, 1024, 1024, 10);                                   // 3, 4
  l.compute(3, 1, 10, 30, {ref(0, 1, 0x0)}, {ref(1, 1, 0x200)});                                      // 5
  l.free(4, ref(0, 0, 0x0), 30).memory(4, 512, 1024, 30);                                             // 6, 7
  l.alloc(5, ref(2, 0, 0x0), true, 30).memory(5, 1024, 1024, 30);                                     // 8, 9
  l.swap_out(6, 30, 430, ref(1, 1, 0x200)).free(6, ref(1, 0, 0x200), 430).memory(6, 512, 1024, 430);  // 10-12
  l.alloc(6, ref(1, 0, 0x200), false, 430).memory(6, 1024, 1024, 430);                                // 13, 14
  l.swap_in(6, 430, 830, ref(1, 1, 0x200)).stall(6, 30, 830);                                         // 15, 16
  l.compute(6, 2, 830, 860, {ref(1, 1, 0x200)}, {ref(2, 1, 0x0)});                                    // 17
  l.evict(7, ref(2, 1, 0x0), 860).free(7, ref(2, 0, 0x0), 860).alloc(7, ref(2, 0, 0x0), false, 860);  // 18-20
  l.recompute(7, 2, 17, 860, 890, {ref(1, 1, 0x200)}, {ref(2, 1, 0x0)});                              // 21
  l.free(7, ref(1, 0, 0x200), 890).memory(7, 512, 1024, 890);                                         // 22, 23
  l.free(8, ref(2, 0, 0x0), 890).memory(8, 0, 1024, 890);                                             // 24, 25
  return l.log();
}

Report example_report() {
  Report r;
  r.coopsim_version = "test";
  r.trace_path = "<builder>";
  r.model = "chain";
  r.allocator = "bestfit";
  r.policy = "autoswap";
  r.budget = Bytes{1024};
  r.time.simulated = SimTime{890};
  return r;
}

std::int64_t ns(const nlohmann::json& micros) { return std::llround(micros.get<double>() * 1000.0); }

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("the example log is a valid run", "[export]") {
  CHECK(audit_runlog(chain_trace(), example_log()).violations == std::vector<std::string>{});
}

TEST_CASE("perfetto: Chrome trace JSON with compute, transfer, eviction and counter tracks", "[export]") {
  const Trace t = chain_trace();
  const RunLog log = example_log();
  const std::string text = perfetto_json(t, log, example_report());
  CHECK(text == perfetto_json(t, log, example_report()));  // deterministic
  const auto doc = nlohmann::json::parse(text);
  REQUIRE(doc.at("traceEvents").is_array());
  CHECK(doc.at("otherData").at("allocator") == "bestfit");
  std::map<std::string, int> phases;
  std::map<int, std::string> threads;
  std::vector<nlohmann::json> compute, counters;
  for (const auto& e : doc["traceEvents"]) {
    REQUIRE(e.contains("ph"));
    REQUIRE(e.at("pid") == 1);
    ++phases[e["ph"].get<std::string>()];
    const std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "thread_name") threads[e["tid"].get<int>()] = e["args"]["name"];
    if (ph == "X") {
      REQUIRE(e.at("ts").is_number());
      REQUIRE(e.at("dur").is_number());
      CHECK(e["dur"].get<double>() >= 0.0);
      CHECK(e.at("name").is_string());
      if (e["tid"] == 1) compute.push_back(e);
    }
    if (ph == "C") counters.push_back(e);
  }
  // Metadata: process name + 4 threads (name and sort index each); f, g, stall, h, recompute,
  // one swap-out and one swap-in; one eviction; 5 distinct counter times x 2 counters.
  CHECK(phases == std::map<std::string, int>{{"M", 9}, {"X", 7}, {"i", 1}, {"C", 10}});
  CHECK(threads == std::map<int, std::string>{
                       {1, "compute stream"}, {2, "evictions"}, {1000, "device-to-host"}, {2000, "host-to-device"}});
  REQUIRE(compute.size() == 5);
  std::vector<std::string> names;
  for (std::size_t i = 0; i < compute.size(); ++i) {
    names.push_back(compute[i]["name"]);
    if (i > 0) CHECK(ns(compute[i]["ts"]) >= ns(compute[i - 1]["ts"]) + ns(compute[i - 1]["dur"]));
  }
  CHECK(names == std::vector<std::string>{"f", "g", "stall", "h", "recompute h"});
  CHECK(compute[4]["cat"] == "recompute");
  CHECK(compute[4]["args"]["origin_event"] == 6);
  CHECK(compute[3]["args"] == nlohmann::json{{"op", 2}, {"event", 6}});
  // Exact microseconds with 3 decimals: h runs over [830, 860) ns.
  CHECK(text.find(R"("name":"h","ts":0.830,"dur":0.030)") != std::string::npos);
  CHECK(
      text.find(
          R"("cat":"swap-out","name":"swap-out b","ts":0.030,"dur":0.400,"args":{"tensor":1,"version":1,"bytes":512,"addr":"0x200","event":6})") !=
      std::string::npos);
  CHECK(text.find(R"("ph":"i","s":"t","pid":1,"tid":2,"cat":"evict","name":"evict c","ts":0.860)") !=
        std::string::npos);
  double last = -1.0;
  std::vector<std::uint64_t> reserved;
  for (const auto& c : counters) {
    CHECK(c["ts"].get<double>() >= last);
    last = c["ts"].get<double>();
    if (c["name"] == "reserved") reserved.push_back(c["args"]["bytes"]);
  }
  CHECK(reserved == std::vector<std::uint64_t>(5, 1024));
  CHECK(counters[4]["ts"] == 0.03);  // the last of the samples at 30 ns: allocated 1024
  CHECK(counters[4]["args"]["bytes"] == 1024);
}

TEST_CASE("perfetto: overlapping transfers go to separate lanes", "[export]") {
  LogBuilder l;
  l.swap_out(0, 0, 100, ref(0, 1, 0x0)).swap_out(0, 50, 150, ref(1, 1, 0x200)).swap_out(0, 120, 200, ref(2, 1, 0x400));
  const auto doc = nlohmann::json::parse(perfetto_json(chain_trace(), l.log(), example_report()));
  std::vector<int> tids;
  std::map<int, std::string> threads;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "X") tids.push_back(e["tid"]);
    if (e["ph"] == "M" && e["name"] == "thread_name") threads[e["tid"].get<int>()] = e["args"]["name"];
  }
  CHECK(tids == std::vector<int>{1000, 1001, 1000});
  CHECK(threads.at(1001) == "device-to-host 2");
}

TEST_CASE("memory map: one rectangle per block lifetime, with markers", "[export]") {
  const Trace t = chain_trace();
  const RunLog log = example_log();
  const std::string svg = memory_map_svg(t, log, example_report());
  CHECK(svg == memory_map_svg(t, log, example_report()));
  CHECK(svg.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg", 0) == 0);
  CHECK(svg.substr(svg.size() - 7) == "</svg>\n");
  // a, b (swapped out), c (evicted), b (swapped in), c (recomputed).
  CHECK(count(svg, "<rect class=\"block") == 5);
  CHECK(count(svg, "<rect class=\"block role-activation evicted\"") == 1);
  CHECK(count(svg, "<rect class=\"block role-gradient swapped\"") == 1);
  CHECK(count(svg, "<rect class=\"transfer") == 2);
  CHECK(count(svg, "class=\"merged\"") == 0);
  // b's first lifetime: [10, 430) ns of 890 at addresses [0x200, 0x400) of [0, 0x400).
  CHECK(svg.find(
            "<rect class=\"block role-gradient swapped\" x=\"100.11\" y=\"70.00\" width=\"424.72\" height=\"300.00\">"
            "<title>tensor 1 b (gradient): 512 B at 0x200, 10 ns to 430 ns, producer op 20 ns, swapped out</title>") !=
        std::string::npos);
  CHECK(svg.find("coopsim memory map: chain - bestfit / autoswap, budget 1.00 KiB, completed") != std::string::npos);
  // Axes: 0 to 890 ns (0.0009 ms) and 0 to 1 KiB, ticks labelled without "-0".
  CHECK(svg.find("text-anchor=\"end\">0.0000</text>") != std::string::npos);
  CHECK(svg.find(">-0") == std::string::npos);
  CHECK(svg.find("address - 0x0 (MiB)") != std::string::npos);

  const std::string by_cost = memory_map_svg(t, log, example_report(), {MemoryMapColour::Cost, 50000});
  CHECK(count(by_cost, "<rect class=\"block") == 5);
  // Producer op times: a 10 ns (f), b 20 ns (g), c 30 ns (h, and its recompute); the swapped-in b
  // has no producer (grey). The top of the scale is h's.
  CHECK(count(by_cost, "fill=\"#fde725\"") == 2);
  CHECK(count(by_cost, "fill=\"#440154\"") == 1);
  CHECK(count(by_cost, "<rect class=\"block\" fill=\"#d0d0d0\"") == 1);
}

TEST_CASE("memory map: the rectangle cap merges the smallest blocks", "[export]") {
  const std::string svg = memory_map_svg(chain_trace(), example_log(), example_report(), {MemoryMapColour::Role, 2});
  CHECK(count(svg, "<rect class=\"block") == 2);
  CHECK(count(svg, "class=\"merged\"") > 0);
  CHECK(svg.find("5 block lifetimes: the 2 largest drawn one by one, 3 small ones merged into") != std::string::npos);
}

TEST_CASE("memory map: address-blind logs are stacked bars", "[export]") {
  Report r = example_report();
  r.allocator = "fungible";
  const std::string svg = memory_map_svg(chain_trace(), example_log(false), r);
  CHECK(count(svg, "<rect class=\"block") == 0);
  CHECK(count(svg, "<rect class=\"bar role-") > 0);
  CHECK(svg.find("address-blind allocator (fungible): addresses are not a layout, so this shows stacked bars") !=
        std::string::npos);
  CHECK(svg.find("class=\"budget\"") != std::string::npos);
}

}  // namespace export_test
