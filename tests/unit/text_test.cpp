// Text helpers for input-derived strings (include/coopsim/base/text.hpp) and the one-line rule of
// the error classes built on them.
#include <catch2/catch.hpp>

#include "coopsim/base/error.hpp"
#include "coopsim/sim/simulation.hpp"
#include "coopsim/base/text.hpp"

using namespace coopsim;

TEST_CASE("one_line escapes control characters and bytes that are not UTF-8", "[text]") {
  CHECK(one_line("plain text, caf\xc3\xa9") == "plain text, caf\xc3\xa9");
  // a pickle's first byte quoted by a JSON parser, a lone continuation byte, a cut sequence, an overlong '/'
  CHECK(one_line("last read: '\x80'") == "last read: '\\x80'");
  CHECK(one_line("\xc3(\xe2\x82") == "\\xc3(\\xe2\\x82");
  CHECK(one_line("\xc0\xaf \xf0\x9f\x98\x80") == "\\xc0\\xaf \xf0\x9f\x98\x80");
  CHECK(one_line(std::string("a\nb\rc\td\x7f"
                             "e\0f",
                             11)) == "a\\x0ab\\x0dc\\x09d\\x7fe\\x00f");
}

TEST_CASE("is_utf8 and to_utf8 follow RFC 3629", "[text]") {
  CHECK(is_utf8(""));
  CHECK(is_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  CHECK_FALSE(is_utf8("\xc3"));              // truncated
  CHECK_FALSE(is_utf8("\xc0\xaf"));          // overlong '/'
  CHECK_FALSE(is_utf8("\xed\xa0\x80"));      // a lone surrogate, as Python's surrogatepass writes it
  CHECK_FALSE(is_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  CHECK(to_utf8("caf\xc3\xa9") == "caf\xc3\xa9");
  // One U+FFFD per byte that starts no well-formed sequence.
  CHECK(to_utf8("a\xed\xa0\x80z") == "a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdz");
  CHECK(to_utf8("\xff\xc3\xa9\xc3") == "\xef\xbf\xbd\xc3\xa9\xef\xbf\xbd");
}

TEST_CASE("config errors stay on one line whatever the command line holds", "[text][config]") {
  SimConfig c;
  apply_override(c, "pytorch.x\ny=1");
  CHECK_THROWS_WITH(check_config(c), Catch::StartsWith("pytorch.x\\x0ay: unknown parameter (valid for pytorch: "));
  SimConfig d;
  apply_override(d, "link.preset=a\nb");
  CHECK_THROWS_WITH(check_config(d),
                    "link.preset: invalid value 'a\\x0ab' (valid: pcie3-x16, pcie4-x16, pcie5-x16, "
                    "nvlink-c2c, h200)");
  // Command-line text need not be UTF-8: the message shows U+FFFD instead of failing.
  SimConfig e;
  apply_override(e, "budget=\xff");
  CHECK_THROWS_WITH(check_config(e),
                    "budget: expected a size such as 512MiB, 8GiB or plain bytes, got \"\xef\xbf\xbd\"");
  CHECK(InputError("a\nb.jsonl", 3, "bad\tthing").what() == std::string("a\\x0ab.jsonl:3: bad\\x09thing"));
}

TEST_CASE("quoted input is cut at 80 bytes with its length, on a UTF-8 boundary", "[text]") {
  const std::string big(10 * 1024 * 1024, 'x');
  CHECK(excerpt("tab\there") == "tab\\x09here");
  CHECK(excerpt(big) == std::string(80, 'x') + "... (10485760 bytes)");
  CHECK(quote_excerpt("it's") == "'it\\x27s'");
  CHECK(quote_excerpt(std::string(80, 'y')) == "'" + std::string(80, 'y') + "'");
  CHECK(quote_excerpt(big) == "'" + std::string(80, 'x') + "...' (10485760 bytes)");
  // Bytes 80 and 81 hold one two-byte character: the cut falls before it, not inside.
  CHECK(quote_excerpt(std::string(79, 'a') + "\xc3\xa9zz") == "'" + std::string(79, 'a') + "...' (83 bytes)");
  // Control characters are escaped after the cut, so they cannot stretch the 80 bytes taken.
  CHECK(quote_excerpt(std::string(100, '\n')).size() == 1 + 80 * 4 + std::string("...' (100 bytes)").size());
}

TEST_CASE("error messages stay short whatever they quote", "[text]") {
  const std::string big(10 * 1024 * 1024, 'k');
  const ConfigError c(big, "problem " + big);
  CHECK(std::string(c.what()).size() < 6 * 1024);
  CHECK(c.key() == big);  // the parts stay whole for re-keying
  CHECK(c.problem().size() == big.size() + 8);
  const InputError t(big, 7, big);
  CHECK(std::string(t.what()).size() < 6 * 1024);
  CHECK(ConfigError("k", "p").what() == std::string("k: p"));
}

TEST_CASE("edit_distance counts edits and adjacent swaps, ignoring case", "[text]") {
  CHECK(edit_distance("swep", "sweep") == 1);
  CHECK(edit_distance("plna", "plan") == 1);
  CHECK(edit_distance("JSON", "json") == 0);
  CHECK(edit_distance("", "abc") == 3);
  CHECK(edit_distance("kitten", "sitting") == 3);
}

TEST_CASE("closest_name suggests only close names", "[text]") {
  const std::vector<std::string> commands{"run",  "validate", "list",  "generate",  "import",    "bench",
                                          "plan", "sweep",    "merge", "minbudget", "replay-gpu"};
  CHECK(closest_name("swep", commands) == "sweep");
  CHECK(closest_name("valdiate", commands) == "validate");
  CHECK(closest_name("rn", commands) == "run");
  CHECK(closest_name("replay", commands) == "replay-gpu");  // the one name it begins
  CHECK(closest_name("frobnicate", commands).empty());
  CHECK(closest_name(std::string(1 << 20, 's'), commands).empty());
  const std::vector<std::string> options{"--budget", "-b", "--output", "-o", "--json", "--jobs", "--help", "-h"};
  CHECK(closest_name("--budgett", options) == "--budget");
  CHECK(closest_name("-budget", options) == "--budget");
  CHECK(closest_name("--out", options) == "--output");
  CHECK(closest_name("--JSON", options) == "--json");
  CHECK(closest_name("--jo", options).empty());  // two edits from --json and from --jobs: no guess
  CHECK(closest_name("-x", options).empty());    // one edit is half of "-b": not close
}

TEST_CASE("a JSON reader's last-read token is cut like any quoted input", "[text]") {
  const std::string token = "\"" + std::string(200, 'x');
  const std::string cut = "\"" + std::string(79, 'x') + "... (201 bytes)";
  CHECK(cut_last_read("invalid string; last read: '" + token + "'") == "invalid string; last read: '" + cut + "'");
  CHECK(cut_last_read("invalid literal; last read: '" + token + "'; expected '}'") ==
        "invalid literal; last read: '" + cut + "'; expected '}'");
  CHECK(cut_last_read("invalid literal; last read: 'abc'") == "invalid literal; last read: 'abc'");
  CHECK(cut_last_read("no token here") == "no token here");
  CHECK(InputError("f.json", 1, "invalid JSON: x; last read: '" + token + "'").what() ==
        "f.json:1: invalid JSON: x; last read: '" + cut + "'");
}
