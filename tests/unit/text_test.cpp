// Text helpers for input-derived strings (include/coopsim/text.hpp) and the one-line rule of
// the error classes built on them.
#include <catch2/catch.hpp>

#include "coopsim/error.hpp"
#include "coopsim/simulation.hpp"
#include "coopsim/text.hpp"

using namespace coopsim;

TEST_CASE("one_line escapes control characters only", "[text]") {
  CHECK(one_line("plain text, caf\xc3\xa9") == "plain text, caf\xc3\xa9");
  CHECK(one_line(std::string("a\nb\rc\td\x7f" "e\0f", 11)) == "a\\x0ab\\x0dc\\x09d\\x7fe\\x00f");
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
  CHECK_THROWS_WITH(check_config(d), "link.preset: invalid value 'a\\x0ab' (valid: pcie3-x16, pcie4-x16, pcie5-x16, "
                                     "nvlink-c2c)");
  // Command-line text need not be UTF-8: the message shows U+FFFD instead of failing.
  SimConfig e;
  apply_override(e, "budget=\xff");
  CHECK_THROWS_WITH(check_config(e), "budget: expected a size such as 512MiB, 8GiB or plain bytes, got \"\xef\xbf\xbd\"");
  CHECK(TraceError("a\nb.jsonl", 3, "bad\tthing").what() == std::string("a\\x0ab.jsonl:3: bad\\x09thing"));
}
