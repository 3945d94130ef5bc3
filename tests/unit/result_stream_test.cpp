// The streaming reads and writes of a sweep's result files that `coopsim merge` uses (issue 32,
// src/sweep/result_stream.hpp): results.json written entry by entry is byte for byte the
// document's dump(2); a results.json read as a stream refuses what read_finished refuses, with
// the same message; entries and rows read back one at a time are the ones written.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "coopsim/base/error.hpp"
#include "coopsim/sweep/sweep.hpp"
#include "sweep/result_stream.hpp"
#include "test_paths.hpp"

using namespace coopsim;
using namespace coopsim::sweep;
namespace fs = std::filesystem;
using OJ = nlohmann::ordered_json;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace result_stream_test {

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void spit(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

Manifest manifest(std::size_t runs) {
  Manifest m;
  m.coopsim_version = "0.1.0 \"x\"";
  m.config_hash = 0x0123456789abcdefULL;
  m.runs = runs;
  return m;
}

// Entries whose dump exercises every kind of value: nested empty containers, escapes, UTF-8,
// floats, negative and large numbers, and braces inside strings.
std::vector<OJ> entries() {
  std::vector<OJ> out;
  for (std::size_t i = 0; i < 3; ++i) {
    OJ e;
    e["run"] = i;
    e["variant"] = i == 1 ? "caf\xc3\xa9 {[\"quoted\"]} \\ \n\t\x01" : "base";
    e["budget_ratio"] = i == 2 ? OJ(nullptr) : OJ(0.1 * static_cast<double>(i + 1));
    e["report"] = OJ::parse(R"({"a": [], "b": {}, "c": [1, -2, 3.5e300, {"d": [[]]}], "e": true,
                                "f": 18446744073709551615, "g": "}]"})");
    out.push_back(e);
  }
  return out;
}

std::string write_doc(const fs::path& file, const Manifest& m, const std::vector<OJ>& es) {
  ResultsJsonWriter w(file, m);
  for (const OJ& e : es) w.add(e);
  w.finish();
  w.commit();
  return slurp(file);
}

std::string dumped(const Manifest& m, const std::vector<OJ>& es) {
  OJ doc;
  doc["schema_version"] = 1;  // include/coopsim/base/schema_version.hpp, kSweepResults
  doc["coopsim_version"] = m.coopsim_version;
  doc["config_hash"] = "0123456789abcdef";
  doc["runs"] = OJ::array();
  for (const OJ& e : es) doc["runs"].push_back(e);
  return doc.dump(2) + "\n";
}

// What read_finished says of DIR/results.json, or "" when it accepts it.
std::string read_finished_error(const fs::path& dir, const Manifest& m) {
  try {
    read_finished(dir, m);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string scan_error(const fs::path& file, std::size_t limit) {
  try {
    scan_entries(file, limit, Shard{}, limit);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("results.json written entry by entry is the document's dump(2)", "[sweep][merge]") {
  const fs::path dir = test::scratch_dir("result-stream-write");
  const std::vector<OJ> es = entries();
  for (std::size_t n = 0; n <= es.size(); ++n) {
    const std::vector<OJ> some(es.begin(), es.begin() + static_cast<std::ptrdiff_t>(n));
    CHECK(write_doc(dir / "results.json", manifest(n), some) == dumped(manifest(n), some));
  }
  // write_results (sweep's own final files) goes through the same writer.
  Finished f;
  for (const OJ& e : es) f.entries.emplace(e.at("run").get<std::size_t>(), e);
  write_results(dir, manifest(3), f);
  CHECK(slurp(dir / "results.json") == dumped(manifest(3), es));
  CHECK(slurp(dir / "results.csv") == results_csv_header() + "\n");
  fs::remove_all(dir);
}

TEST_CASE("entries read back one at a time from any layout of results.json", "[sweep][merge]") {
  const fs::path dir = test::scratch_dir("result-stream-read");
  const std::vector<OJ> es = entries();
  const fs::path file = dir / "results.json";
  OJ doc = OJ::parse(dumped(manifest(3), es));
  doc["after"] = {{"runs", 1}};
  for (const std::string& text : {dumped(manifest(3), es), doc.dump() + "\n", "\xEF\xBB\xBF" + doc.dump(4, '\t')}) {
    spit(file, text);
    const EntryScan scan = scan_entries(file, 3, Shard{}, 3);
    CHECK(scan.count == 3);
    CHECK(!scan.missing);
    CHECK(scan.disorder.empty());
    EntryReader reader(file, scan.runs_at);
    for (std::size_t i = 0; i < es.size(); ++i) CHECK(reader.next(i) == es[i]);
  }
  // Shard 2/2 holds runs 1 and 3 of 4: its entries are checked against that slice.
  spit(file, R"({"runs": [{"run": 1, "report": {}}, {"run": 3, "report": {}}]})");
  EntryScan scan = scan_entries(file, 4, Shard{2, 2}, 2);
  CHECK((scan.count == 2 && !scan.missing && scan.disorder.empty()));
  spit(file, R"({"runs": [{"run": 1, "report": {}}, {"run": 2, "report": {}}]})");
  scan = scan_entries(file, 4, Shard{2, 2}, 2);
  CHECK((scan.count == 2 && scan.missing == std::size_t{3}));
  spit(file, R"({"runs": [{"run": 3, "report": {}}, {"run": 1, "report": {}}]})");
  scan = scan_entries(file, 4, Shard{2, 2}, 2);
  CHECK(scan.disorder == file.string() + ": runs[1]: run 1 comes after run 3");
  // A file that changed after it was checked is refused, not merged.
  spit(file, R"({"runs": [{"run": 1, "report": {}}, {"run": 3, "report": {}}]})");
  scan = scan_entries(file, 4, Shard{2, 2}, 2);
  spit(file, R"({"runs": [{"run": 1, "report": {}}, {"run": 5, "report": {}}]})");
  EntryReader reader(file, scan.runs_at);
  CHECK(reader.next(1).at("run") == 1);
  CHECK_THROWS_WITH(reader.next(3),
                    file.string() + ": changed during the merge (run 3 is not the next entry): merge again");
  fs::remove_all(dir);
}

TEST_CASE("a streamed results.json is refused as read_finished refuses it, word for word", "[sweep][merge]") {
  const fs::path dir = test::scratch_dir("result-stream-errors");
  const fs::path file = dir / "results.json";
  const std::string ok = R"({"run": 0, "report": {}})";
  for (const std::string& text : {
           std::string(""),
           std::string("{\n  \"runs\": [\n" + ok + "\n"),
           std::string("{\"runs\": [" + ok + "]}\n{}"),
           std::string("{\"runs\": [" + ok + "],\n\n \"runs\": []}"),
           std::string("{\"runs\": [{\"run\": 0,\n \"report\": {\"a\": 1,\n \"a\": 2}}]}"),
           std::string("{\"runs\": [{\"run\": 0, \"x\":\n\n 1e999, \"report\": {}}]}"),
           std::string("[]"),
           std::string("{\"runs\": {}}"),
           std::string("{\"run\": []}"),
           std::string("{\"runs\": [" + ok + ", 5]}"),
           std::string("{\"runs\": [" + ok + ", {\"run\": 1}]}"),
           std::string("{\"runs\": [" + ok + ", {\"run\": -1, \"report\": 1}]}"),
           std::string("{\"runs\": [" + ok + ", {\"run\": 1.0, \"report\": 1}]}"),
           std::string("{\"runs\": [" + ok + ", {\"run\": 9, \"report\": 1}]}"),
           std::string("{\"runs\": [" + ok + ", " + ok + "]}"),
           std::string("{\"runs\": [" + ok + ", {\"run\": 7, \"report\": 1}], \"x\": }"),
       }) {
    spit(file, text);
    const std::string expected = read_finished_error(dir, manifest(4));
    CAPTURE(text);
    CHECK(!expected.empty());
    CHECK(scan_error(file, 4) == expected);
  }
  fs::remove_all(dir);
}

TEST_CASE("rows scanned and read back one at a time", "[sweep][merge]") {
  const fs::path dir = test::scratch_dir("result-stream-rows");
  const fs::path file = dir / "results.csv";
  const std::string header = "run,x";
  spit(file, header + "\n1,a\n3,b\n5,c\n7,cut");
  RowScan scan = scan_rows(file, header, 8, "run", Shard{2, 2});
  CHECK((scan.count == 3 && !scan.outside && scan.disorder.empty()));
  RowReader reader(file, "run");
  CHECK(reader.next(1) == "1,a");
  CHECK(reader.next(3) == "3,b");
  CHECK_THROWS_WITH(reader.next(7),
                    file.string() + ": changed during the merge (run 7 is not the next row): merge again");
  spit(file, header + "\n3,a\n2,b\n1,c\n");
  scan = scan_rows(file, header, 8, "run", Shard{2, 2});
  CHECK((scan.count == 3 && scan.outside == std::size_t{2}));
  CHECK(scan.disorder == file.string() + ":3: run 2 comes after run 3");
  spit(file, header + "\n1,a\n1,b\n");
  CHECK_THROWS_WITH(scan_rows(file, header, 8, "run", Shard{2, 2}),
                    file.string() + ":3: run 1 is listed twice (also " + file.string() + ":2)");
  CHECK(scan_rows(dir / "absent.csv", header, 8, "run", Shard{}).count == 0);
  fs::remove_all(dir);
}

}  // namespace result_stream_test
