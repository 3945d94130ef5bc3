// DTR log importer: every malformed input gives one exact "file:line: problem" (the catalogue
// in docs/import-dtr.md), and nothing is written.
#include <catch2/catch.hpp>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "coopsim/base/error.hpp"
#include "coopsim/import/importers.hpp"
#include "test_paths.hpp"

using namespace coopsim;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace import_dtr_errors_test {

namespace {

struct Case {
  const char* what;
  std::string log;
  int line;
  std::string problem;
};

const std::string S = R"({"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"})"
                      "\n";
const std::string P = R"({"INSTRUCTION":"CONSTANT","NAME":"p"})"
                      "\n"
                      R"({"INSTRUCTION":"MEMORY","MEMORY":"64","NAME":"p"})"
                      "\n";
// CALL relu(p) -> r, 32 bytes fresh; lines 4-6 after S and P.
const std::string R = R"({"ARGS":["p"],"INSTRUCTION":"CALL","NAME":"relu","RESULT":["r"],"TIME":"5"})"
                      "\n"
                      R"({"INSTRUCTION":"MEMORY","MEMORY":"32","NAME":"r"})"
                      "\n"
                      R"({"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"r"})"
                      "\n";

std::string line(const std::string& json) { return json + "\n"; }

// Every case, run in both MUTATE modes: the same log is accepted or refused the same way.
void check_cases(const std::vector<Case>& cases) {
  const auto dir = test::scratch_dir("import-dtr-errors");
  int n = 0;
  for (const auto& c : cases) {
    const std::string path = (dir / ("bad" + std::to_string(n++) + ".log")).string();
    std::ofstream(path, std::ios::binary) << c.log;
    for (const bool cow : {false, true}) {
      INFO(c.what << (cow ? " (copy-on-write)" : " (in place)"));
      CHECK_THROWS_WITH(import_dtr_log(path, DtrOptions{cow}), path + ":" + std::to_string(c.line) + ": " + c.problem);
    }
  }
}

}  // namespace

TEST_CASE("dtr errors: syntax and file", "[import][dtr][errors]") {
  check_cases({
      {"not JSON", S + line(R"({"INSTRUCTION":"CONSTANT","NAME":})"), 2,
       "malformed JSON: column 34: syntax error while parsing value - unexpected '}'; expected '[', '{', or a "
       "literal"},
      {"truncated last line", S + P + R"({"ARGS":["p"],"INSTRUCTION":"CALL","NA)", 4,
       "malformed JSON: column 39: syntax error while parsing object key - invalid string: missing closing quote; "
       "last read: '\"NA'; expected string literal (last line has no newline: truncated file?)"},
      {"not an object", S + line("[1,2]"), 2, "line is not a JSON object"},
      {"duplicate key", S + line(R"({"INSTRUCTION":"RELEASE","NAME":"a","NAME":"b"})"), 2, "duplicate key 'NAME'"},
      {"invalid UTF-8", S + line("{\"INSTRUCTION\":\"RELEASE\",\"NAME\":\"\xff\"}"), 2,
       "malformed JSON: column 34: syntax error while parsing value - invalid string: ill-formed UTF-8 byte; last "
       "read: '\"\\xff'"},  // the byte quoted as \xff: messages stay UTF-8 (one_line)
      {"empty file", "", 1, "empty DTR log: no records"},
      {"blank lines only", "\n  \n\t\n", 4, "empty DTR log: no records"},
      {"no START", P + line(R"({"INSTRUCTION":"RELEASE","NAME":"p"})"), 4,
       "no ANNOTATE START record: the measured iteration never starts"},
  });
}

TEST_CASE("dtr errors: fields", "[import][dtr][errors]") {
  check_cases({
      {"no INSTRUCTION", S + line(R"({"NAME":"p"})"), 2, "missing field 'INSTRUCTION'"},
      {"INSTRUCTION not a string", S + line(R"({"INSTRUCTION":7})"), 2, "field 'INSTRUCTION' must be a string (got 7)"},
      {"unknown INSTRUCTION", S + line(R"({"INSTRUCTION":"PIN","NAME":"p"})"), 2,
       "unknown INSTRUCTION 'PIN' (expected ANNOTATE, CONSTANT, MEMORY, CALL, ALIAS, COPY, RELEASE, MUTATE or "
       "COPY_FROM)"},
      {"unknown INSTRUCTION before START", line(R"({"INSTRUCTION":"pin"})") + S, 1,
       "unknown INSTRUCTION 'pin' (expected ANNOTATE, CONSTANT, MEMORY, CALL, ALIAS, COPY, RELEASE, MUTATE or "
       "COPY_FROM)"},
      {"missing TIME", S + P + line(R"({"ARGS":[],"INSTRUCTION":"CALL","NAME":"f","RESULT":[]})"), 4,
       "CALL record: missing field 'TIME'"},
      {"missing ANNOTATION", S + line(R"({"INSTRUCTION":"ANNOTATE"})"), 2,
       "ANNOTATE record: missing field 'ANNOTATION'"},
      {"NAME not a string", S + line(R"({"INSTRUCTION":"RELEASE","NAME":12})"), 2,
       "RELEASE record: field 'NAME' must be a non-empty string (got 12)"},
      {"empty name", S + line(R"({"DST":"","INSTRUCTION":"COPY","SRC":"p"})"), 2,
       "COPY record: field 'DST' must be a non-empty string (got '')"},
      {"ARGS not an array", S + line(R"({"ARGS":"p","INSTRUCTION":"CALL","NAME":"f","RESULT":[],"TIME":"1"})"), 2,
       "CALL record: field 'ARGS' must be an array of names (got 'p')"},
      {"RESULT element not a string",
       S + line(R"({"ARGS":[],"INSTRUCTION":"CALL","NAME":"f","RESULT":["a",3],"TIME":"1"})"), 2,
       "CALL record: field 'RESULT' must be an array of names (element 1 is 3)"},
      {"MEMORY not numeric",
       S + line(R"({"INSTRUCTION":"CONSTANT","NAME":"p"})") +
           line(R"({"INSTRUCTION":"MEMORY","MEMORY":"12a","NAME":"p"})"),
       3, "MEMORY record: field 'MEMORY' must be a byte count in decimal digits (got '12a')"},
      {"MEMORY negative", S + line(R"({"INSTRUCTION":"MEMORY","MEMORY":"-5","NAME":"p"})"), 2,
       "MEMORY record: field 'MEMORY' must be a byte count in decimal digits (got '-5')"},
      {"MEMORY a number", S + line(R"({"INSTRUCTION":"MEMORY","MEMORY":64,"NAME":"p"})"), 2,
       "MEMORY record: field 'MEMORY' must be a string (got 64)"},
      {"MEMORY above 2^53", S + line(R"({"INSTRUCTION":"MEMORY","MEMORY":"9007199254740993","NAME":"p"})"), 2,
       "MEMORY record: field 'MEMORY' must be at most 2^53 bytes (got '9007199254740993')"},
      {"TIME fractional", S + line(R"({"ARGS":[],"INSTRUCTION":"CALL","NAME":"f","RESULT":[],"TIME":"1.5"})"), 2,
       "CALL record: field 'TIME' must be nanoseconds in decimal digits (got '1.5')"},
      {"TIME too large",
       S + line(R"({"ARGS":[],"INSTRUCTION":"MUTATE","MUTATE":[],"NAME":"f","TIME":"9223372036854775808"})"), 2,
       "MUTATE record: field 'TIME' must be at most 2^63-1 nanoseconds (got '9223372036854775808')"},
      {"ALIAS not numeric", S + line(R"({"ALIAS":"x","INSTRUCTION":"ALIAS","NAME":"r"})"), 2,
       "ALIAS record: field 'ALIAS' must be -1 or an argument index in decimal digits (got 'x')"},
      {"ALIAS -2", S + line(R"({"ALIAS":"-2","INSTRUCTION":"ALIAS","NAME":"r"})"), 2,
       "ALIAS record: field 'ALIAS' must be -1 or an argument index in decimal digits (got '-2')"},
      {"MUTATE index negative",
       S + line(R"({"ARGS":["p"],"INSTRUCTION":"MUTATE","MUTATE":[-1],"NAME":"f","TIME":"1"})"), 2,
       "MUTATE record: field 'MUTATE' must be an array of argument indices (element 0 is -1)"},
      {"MUTATE index a string",
       S + line(R"({"ARGS":["p"],"INSTRUCTION":"MUTATE","MUTATE":["0"],"NAME":"f","TIME":"1"})"), 2,
       "MUTATE record: field 'MUTATE' must be an array of argument indices (element 0 is '0')"},
  });
}

TEST_CASE("dtr errors: record sequence", "[import][dtr][errors]") {
  const std::string call_ab =
      line(R"({"ARGS":["p"],"INSTRUCTION":"CALL","NAME":"split","RESULT":["a","b"],"TIME":"5"})");
  const std::string mem_a = line(R"({"INSTRUCTION":"MEMORY","MEMORY":"8","NAME":"a"})");
  const std::string alias_a = line(R"({"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"a"})");
  check_cases({
      {"CONSTANT not followed by MEMORY",
       S + line(R"({"INSTRUCTION":"CONSTANT","NAME":"p"})") + line(R"({"INSTRUCTION":"RELEASE","NAME":"p"})"), 3,
       "expected the MEMORY record of CONSTANT 'p' (line 2), got a RELEASE record"},
      {"MEMORY of another name",
       S + line(R"({"INSTRUCTION":"CONSTANT","NAME":"p"})") +
           line(R"({"INSTRUCTION":"MEMORY","MEMORY":"1","NAME":"q"})"),
       3, "expected the MEMORY record of CONSTANT 'p' (line 2), got one for 'q'"},
      {"CONSTANT at end of file", S + line(R"({"INSTRUCTION":"CONSTANT","NAME":"p"})"), 3,
       "file ends before the MEMORY record of CONSTANT 'p' (line 2) (truncated?)"},
      {"CALL result without MEMORY", S + P + call_ab + alias_a, 5,
       "expected the MEMORY record of result 'a' of CALL 'split' (line 4), got an ALIAS record"},
      {"CALL result without ALIAS", S + P + call_ab + mem_a + mem_a, 6,
       "expected the ALIAS record of result 'a' of CALL 'split' (line 4), got a MEMORY record"},
      {"second result missing", S + P + call_ab + mem_a + alias_a, 7,
       "file ends before the MEMORY record of result 'b' of CALL 'split' (line 4) (truncated?)"},
      {"results out of order", S + P + call_ab + line(R"({"INSTRUCTION":"MEMORY","MEMORY":"8","NAME":"b"})"), 5,
       "expected the MEMORY record of result 'a' of CALL 'split' (line 4), got one for 'b'"},
      {"ALIAS out of range", S + P + call_ab + mem_a + line(R"({"ALIAS":"1","INSTRUCTION":"ALIAS","NAME":"a"})"), 6,
       "ALIAS 1 of result 'a' of CALL 'split' (line 4) is out of range (the CALL has 1 ARGS)"},
      {"stray MEMORY", S + P + line(R"({"INSTRUCTION":"MEMORY","MEMORY":"1","NAME":"p"})"), 4,
       "MEMORY record for 'p' without a CONSTANT or CALL that expects it"},
      {"stray ALIAS", S + P + R + line(R"({"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"r"})"), 7,
       "ALIAS record for 'r' without a CALL that expects it"},
  });
}

TEST_CASE("dtr errors: names and references", "[import][dtr][errors]") {
  const std::string rel_r = line(R"({"INSTRUCTION":"RELEASE","NAME":"r"})");
  check_cases({
      {"undefined name in ARGS",
       S + P + line(R"({"ARGS":["p","x9"],"INSTRUCTION":"CALL","NAME":"add","RESULT":[],"TIME":"1"})"), 4,
       "CALL 'add' ARGS[1]: undefined name 'x9' (not defined since START)"},
      {"name defined only before START",
       line(R"({"INSTRUCTION":"CONSTANT","NAME":"q"})") + line(R"({"INSTRUCTION":"MEMORY","MEMORY":"4","NAME":"q"})") +
           S + line(R"({"ARGS":["q"],"INSTRUCTION":"MUTATE","MUTATE":[0],"NAME":"zero_","TIME":"1"})"),
       4, "MUTATE 'zero_' ARGS[0]: undefined name 'q' (not defined since START)"},
      {"use after release",
       S + P + R + rel_r + line(R"({"ARGS":["r"],"INSTRUCTION":"CALL","NAME":"neg","RESULT":[],"TIME":"1"})"), 8,
       "CALL 'neg' ARGS[0]: use after release: 'r' (its storage was freed at line 7)"},
      {"release twice", S + P + R + rel_r + rel_r, 8,
       "RELEASE: the tensor of 'r' has no references left (last dropped at line 7)"},
      {"COPY to an existing name", S + P + R + line(R"({"DST":"r","INSTRUCTION":"COPY","SRC":"p"})"), 7,
       "COPY DST: 'r' is already defined (line 4)"},
      {"COPY to a released name", S + P + R + rel_r + line(R"({"DST":"r","INSTRUCTION":"COPY","SRC":"p"})"), 8,
       "COPY DST: 'r' is already defined (line 4)"},
      {"COPY of an undefined name", S + line(R"({"DST":"b","INSTRUCTION":"COPY","SRC":"a"})"), 2,
       "COPY SRC: undefined name 'a' (not defined since START)"},
      {"COPY of a released tensor", S + P + R + rel_r + line(R"({"DST":"b","INSTRUCTION":"COPY","SRC":"r"})"), 8,
       "COPY SRC: use after release: 'r' (its storage was freed at line 7)"},
      {"CONSTANT redefines a name", S + P + P, 4, "CONSTANT: 'p' is already defined (line 2)"},
      {"CALL result already defined",
       S + P + line(R"({"ARGS":[],"INSTRUCTION":"CALL","NAME":"f","RESULT":["p"],"TIME":"1"})") +
           line(R"({"INSTRUCTION":"MEMORY","MEMORY":"8","NAME":"p"})") +
           line(R"({"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"p"})"),
       4, "CALL 'f' RESULT: 'p' is already defined (line 2)"},
      {"CALL result listed twice",
       S + line(R"({"ARGS":[],"INSTRUCTION":"CALL","NAME":"f","RESULT":["a","a"],"TIME":"1"})") +
           line(R"({"INSTRUCTION":"MEMORY","MEMORY":"8","NAME":"a"})") +
           line(R"({"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"a"})") +
           line(R"({"INSTRUCTION":"MEMORY","MEMORY":"8","NAME":"a"})") +
           line(R"({"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"a"})"),
       2, "CALL 'f': result 'a' is listed twice"},
      {"MUTATE index out of range",
       S + P + line(R"({"ARGS":["p"],"INSTRUCTION":"MUTATE","MUTATE":[1],"NAME":"add_","TIME":"1"})"), 4,
       "MUTATE 'add_': index 1 is out of range (the MUTATE has 1 ARGS)"},
      {"MUTATE index listed twice",
       S + P + line(R"({"ARGS":["p"],"INSTRUCTION":"MUTATE","MUTATE":[0,0],"NAME":"add_","TIME":"1"})"), 4,
       "MUTATE 'add_': index 0 is listed twice"},
      {"MUTATE writes one tensor twice",
       S + P + line(R"({"DST":"p2","INSTRUCTION":"COPY","SRC":"p"})") +
           line(R"({"ARGS":["p","p2"],"INSTRUCTION":"MUTATE","MUTATE":[0,1],"NAME":"add_","TIME":"1"})"),
       5, "MUTATE 'add_': ARGS[0] 'p' and ARGS[1] 'p2' are the same tensor, written twice"},
      {"COPY_FROM to an undefined name", S + P + line(R"({"DST":"z","INSTRUCTION":"COPY_FROM","SRC":"p"})"), 4,
       "COPY_FROM DST: undefined name 'z' (not defined since START)"},
      {"COPY_FROM to a released name", S + P + R + rel_r + line(R"({"DST":"r","INSTRUCTION":"COPY_FROM","SRC":"p"})"),
       8, "COPY_FROM DST: the tensor of 'r' has no references left (last dropped at line 7)"},
  });
}

TEST_CASE("dtr errors: unreadable files", "[import][dtr][errors]") {
  const auto dir = test::scratch_dir("import-dtr-files");
  const std::string missing = (dir / "missing.log").string();
  CHECK_THROWS_WITH(import_dtr_log(missing), missing + ":0: cannot open DTR log: No such file or directory");

  // A gzip stream cut short is reported at the line being read.
  const std::string gz = (dir / "cut.log.gz").string();
  std::string text = S + P;
  for (int i = 0; i < 200; ++i) text += line(R"({"INSTRUCTION":"RELEASE","NAME":"x)" + std::to_string(i) + "\"}");
  gzFile f = gzopen(gz.c_str(), "wb");
  REQUIRE(f != nullptr);
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  const auto size = std::filesystem::file_size(gz);
  std::filesystem::resize_file(gz, size - 12);
  CHECK_THROWS_WITH(
      import_dtr_log(gz),
      Catch::StartsWith(gz + ":") && Catch::EndsWith(": gzip stream is truncated (unexpected end of compressed data)"));
}

}  // namespace import_dtr_errors_test
