// What the readers accept and how they say no (issue 29): whole JSON documents refuse a key
// given twice at its line (coopsim/base/json_document.hpp), quoted tokens are cut once to 80
// bytes, a NaN is shown as NaN (never JSON's null), owned outputs (a sweep directory's files)
// refuse a planted symbolic link, and the sweep lock a hard link to another file.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "coopsim/base/error.hpp"
#include "coopsim/base/json_document.hpp"
#include "coopsim/base/output_file.hpp"
#include "coopsim/base/params.hpp"
#include "coopsim/base/text.hpp"
#include "coopsim/import/torch_snapshot.hpp"
#include "coopsim/sweep/sweep.hpp"
#include "test_paths.hpp"

using namespace coopsim;
namespace fs = std::filesystem;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace acceptance_test {

namespace {

std::string error_of(const std::string& text, std::uint64_t first_line = 1) {
  try {
    (void)parse_json_document(text, "c.json", first_line);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("JSON documents refuse a key given twice, at its line, at any depth", "[acceptance]") {
  CHECK(error_of("{\"a\": 1,\n \"a\": 2}") == "c.json:2: duplicate key 'a'");
  CHECK(error_of("{\"p\": {\"d\": {\"h\": 1,\n\n \"h\": 2}}}") == "c.json:3: duplicate key 'h'");
  CHECK(error_of("[{\"a\": 1}, {\"a\": 2}]").empty());  // one key per object: no duplicate
  CHECK(error_of("{\"a\": {\"b\": 1}, \"b\": 2}").empty());
  CHECK(error_of("{\"a\": 1, \"a\": 2}", 7) == "c.json:7: duplicate key 'a'");  // a journal's line 7
  CHECK(error_of("{\"" + std::string(200, 'k') + "\": 1, \"" + std::string(200, 'k') + "\": 2}") ==
        "c.json:1: duplicate key '" + std::string(80, 'k') + "...' (200 bytes)");
  const nlohmann::ordered_json doc = parse_ordered_json_document("{\"z\": 1, \"a\": [1, {\"z\": 2}]}", "c.json");
  CHECK(doc.dump() == R"({"z":1,"a":[1,{"z":2}]})");  // file order kept
  CHECK(error_of("{\"a\": 1,\n \"b\" 2}").rfind("c.json:2: invalid JSON: syntax error", 0) == 0);
}

TEST_CASE("a 100,000-digit number is quoted cut once, with its full length", "[acceptance]") {
  const std::string big(100000, '9');
  const std::string expected =
      "c.json:1: invalid JSON: number overflow parsing '" + std::string(80, '9') + "... (100000 bytes)'";
  CHECK(error_of("{\"budget\": " + big + "}") == expected);
  // Passed on again (an InputError re-keyed from another), the cut token stays as it is.
  CHECK(cut_last_read("number overflow parsing '" + big + "'") ==
        "number overflow parsing '" + std::string(80, '9') + "... (100000 bytes)'");
  CHECK(cut_last_read(cut_last_read("number overflow parsing '" + big + "'")) ==
        cut_last_read("number overflow parsing '" + big + "'"));
  CHECK(InputError("c.json", 1, "invalid JSON: number overflow parsing '" + big + "'").what() == expected);
}

TEST_CASE("a NaN or an infinity is shown as such, never as JSON's null", "[acceptance]") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  CHECK(shown_json(nlohmann::json(nan)) == "NaN");
  CHECK(shown_json(nlohmann::json(-inf)) == "-Infinity");
  CHECK(shown_json(nlohmann::json::array({1, inf, nullptr})) == "[1,Infinity,null]");
  CHECK(shown_json(nlohmann::json({{"k", nan}})) == R"({"k":NaN})");
  CHECK_THROWS_WITH(torch_snapshot::allocator_options({{"max_split_size", nan}}),
                    "allocator_settings.max_split_size: expected a non-negative integer (got NaN)");
  CHECK_THROWS_WITH(torch_snapshot::allocator_options({{"expandable_segments", nan}}),
                    "allocator_settings.expandable_segments: expected a bool (got NaN)");
  CHECK_THROWS_WITH(torch_snapshot::allocator_options({{"roundup_power2_divisions", {{"1", inf}}}}),
                    "allocator_settings.roundup_power2_divisions.1: expected a non-negative integer (got Infinity)");
}

TEST_CASE("an owned output refuses a planted link and replaces only a regular file", "[acceptance]") {
  const fs::path dir = test::scratch_dir("acceptance-owned");
  const fs::path victim = dir / "victim.txt", link = dir / "journal.jsonl", regular = dir / "results.csv";
  std::ofstream(victim) << "precious\n";
  fs::create_symlink(victim, link);
  const std::string problem =
      ": cannot write output file: it is a symbolic link: coopsim replaces only a regular file here, never what a "
      "link or device leads to";
  CHECK_THROWS_WITH(OutputFile(link.string(), OutputFile::Target::Owned), link.string() + problem);
  CHECK_THROWS_WITH(check_owned_output(link.string()), link.string() + problem);
  CHECK_THROWS_WITH(write_file_atomic(link.string(), "x", OutputFile::Target::Owned), link.string() + problem);
  std::ifstream in(victim);
  std::string kept;
  std::getline(in, kept);
  CHECK(kept == "precious");
  CHECK(fs::is_symlink(link));
  CHECK_NOTHROW(check_owned_output(regular.string()));  // absent
  write_file_atomic(regular.string(), "a\n", OutputFile::Target::Owned);
  write_file_atomic(regular.string(), "b\n", OutputFile::Target::Owned);  // a regular file is replaced
  CHECK(fs::file_size(regular) == 2);
  CHECK_NOTHROW(check_owned_output(regular.string()));
  fs::create_directory(dir / "sub");
  CHECK_THROWS_WITH(check_owned_output((dir / "sub").string()),
                    (dir / "sub").string() +
                        ": cannot write output file: it is a directory: coopsim replaces only a regular file here, "
                        "never what a link or device leads to");
  // The default rules still write through a link (docs/user-guide.md, "Output files").
  write_file_atomic(link.string(), "through\n");
  CHECK(fs::is_symlink(link));
  CHECK(fs::file_size(victim) == 8);
}

TEST_CASE("the sweep lock refuses a hard link to another file (its truncation would reach it)", "[acceptance]") {
  const fs::path dir = test::scratch_dir("acceptance-lock");
  const fs::path victim = dir / "victim.txt";
  std::ofstream(victim) << "precious\n";
  fs::create_hard_link(victim, dir / sweep::kLockFile);
  CHECK_THROWS_WITH(sweep::DirLock(dir), (dir / sweep::kLockFile).string() +
                                             ": the sweep lock file is not a regular file of its own (a link to "
                                             "another file?)");
  CHECK(fs::file_size(victim) == 9);
  fs::remove(dir / sweep::kLockFile);
  CHECK_NOTHROW(sweep::DirLock(dir));  // a lock file of its own is taken (and created)
}

}  // namespace acceptance_test
