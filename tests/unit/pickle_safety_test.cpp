// The pickle reader on hostile and broken input: refused opcodes (code execution), stack and
// MARK misuse, truncation, corruption, reference cycles and nesting limits. Byte strings are
// worked by hand from the Python pickle protocol specification (Lib/pickletools.py); literals
// are split where a hex escape would swallow the next character ("\x05" "a").
#include <catch2/catch.hpp>

#include <cstdio>
#include <map>
#include <random>
#include <string>

#include "coopsim/base/error.hpp"
#include "coopsim/formats/pickle.hpp"
#include "pickle_test_support.hpp"

using coopsim::pickle::PickleError;
using coopsim::pickle::Value;
using coopsim::pickle::ValuePtr;
using Kind = Value::Kind;
using namespace pickle_test;

TEST_CASE("pickle: code-running pickles are refused by opcode", "[pickle]") {
  // os.system('echo pwned') by GLOBAL + REDUCE (protocol 0), refused at its first byte.
  CHECK(error_of("cos\nsystem\n(S'echo pwned'\ntR."s) ==
        "t.pkl: byte 0: opcode GLOBAL (0x63) would import or call code; refusing");
  // The same by STACK_GLOBAL (protocol 4): PROTO 4, 'os', MEMOIZE, 'system', MEMOIZE at bytes
  // 0..15, then STACK_GLOBAL at byte 16.
  CHECK(error_of("\x80\x04\x8c\x02os\x94\x8c\x06system\x94\x93\x94\x8c\x0a"
                 "echo pwned\x94\x85\x94R\x94."s) ==
        "t.pkl: byte 16: opcode STACK_GLOBAL (0x93) would import or call code; refusing");
  // Every opcode that imports or calls, with its name from the specification.
  const std::map<unsigned char, std::string> code = {
      {'c', "GLOBAL"}, {0x93, "STACK_GLOBAL"}, {'R', "REDUCE"},     {'b', "BUILD"},  {'i', "INST"},
      {'o', "OBJ"},    {0x81, "NEWOBJ"},       {0x92, "NEWOBJ_EX"}, {'P', "PERSID"}, {'Q', "BINPERSID"},
      {0x82, "EXT1"},  {0x83, "EXT2"},         {0x84, "EXT4"}};
  for (const auto& [byte, name] : code) {
    const std::string pickle = "\x80\x02]K\x01"s + static_cast<char>(byte) + "\x00\x00\x00\x00."s;
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x", byte);
    CHECK(error_of(pickle) == "t.pkl: byte 5: opcode " + name + " (" + hex + ") would import or call code; refusing");
  }
  CHECK(error_of("\x80\x04\x8f."s) ==
        "t.pkl: byte 2: opcode EMPTY_SET (0x8f): sets are not plain data for coopsim's pickle reader; refusing");
  CHECK(error_of("\x80\x04(\x91."s) ==
        "t.pkl: byte 3: opcode FROZENSET (0x91): sets are not plain data for coopsim's pickle reader; refusing");
  CHECK(error_of("\x80\x04\x90."s).find("ADDITEMS (0x90): sets are not plain data") != std::string::npos);
  CHECK(error_of("\x80\x05\x97."s) ==
        "t.pkl: byte 2: opcode NEXT_BUFFER (0x97): out-of-band buffers are not supported; refusing");
  CHECK(error_of("\x80\x05\x98."s) ==
        "t.pkl: byte 2: opcode READONLY_BUFFER (0x98): out-of-band buffers are not supported; refusing");
  CHECK(error_of("\x80\x05\x99."s) == "t.pkl: byte 2: unknown opcode 0x99; refusing");
  CHECK(error_of("\x80\x05z."s) == "t.pkl: byte 2: unknown opcode 0x7a ('z'); refusing");
  CHECK(error_of("\x00."s) == "t.pkl: byte 0: unknown opcode 0x00; refusing");
}

TEST_CASE("pickle: protocol, stack and end-of-pickle errors", "[pickle]") {
  CHECK(P("\x80\x05N."s)->is(Kind::None));
  CHECK(error_of("\x80\x06N."s) ==
        "t.pkl: byte 0: PROTO: unsupported pickle protocol 6 (coopsim reads protocols 2 to 5)");
  CHECK(error_of("\x80\x01N."s) ==
        "t.pkl: byte 0: PROTO: unsupported pickle protocol 1 (coopsim reads protocols 2 to 5)");
  CHECK(error_of(""s) == "t.pkl: byte 0: empty input: no pickle");
  CHECK(error_of("\x80\x02N"s) == "t.pkl: byte 3: input ends before STOP (truncated pickle)");
  CHECK(error_of("N.x"s) == "t.pkl: byte 2: 1 trailing byte after STOP");
  CHECK(error_of("N..."s) == "t.pkl: byte 2: 2 trailing bytes after STOP");
  CHECK(error_of("\x80\x02"
                 "a."s) == "t.pkl: byte 2: APPEND: stack underflow: needs 2 values above the last MARK, found 0");
  CHECK(error_of("](K\x01"
                 "a."s) == "t.pkl: byte 4: APPEND: stack underflow: needs 2 values above the last MARK, found 1");
  CHECK(error_of("(K\x01"
                 "e."s) == "t.pkl: byte 3: APPENDS: stack underflow: no list below the MARK");
  CHECK(error_of("K\x01t."s) == "t.pkl: byte 2: TUPLE: no MARK before it (MARK misuse)");
  CHECK(error_of("K\x01"
                 "1."s) == "t.pkl: byte 2: POP_MARK: no MARK before it (MARK misuse)");
  CHECK(error_of("(K\x01."s) == "t.pkl: byte 3: STOP: STOP inside an open MARK (MARK misuse)");
  CHECK(error_of("K\x01K\x02."s) == "t.pkl: byte 4: STOP: 2 values on the stack at STOP; a pickle leaves exactly one");
  CHECK(error_of("."s) == "t.pkl: byte 0: STOP: 0 values on the stack at STOP; a pickle leaves exactly one");
  CHECK(error_of("}(K\x01u."s) == "t.pkl: byte 4: SETITEMS: odd number of items for SETITEMS");
  CHECK(error_of("(K\x01"
                 "d."s) == "t.pkl: byte 3: DICT: odd number of items for DICT");
  CHECK(error_of(")(K\x01K\x02u."s) == "t.pkl: byte 6: SETITEMS: needs a dict below the MARK, found a tuple");
  CHECK(error_of("}K\x01"
                 "a."s) == "t.pkl: byte 3: APPEND: needs a list below the values, found a dict");
  // Length fields larger than what is left are refused before anything is allocated.
  CHECK(error_of("X\xff\xff\xff\xff"
                 "abc"s) ==
        "t.pkl: byte 0: BINUNICODE: string of 4294967295 bytes runs past the end of the input (3 left; truncated?)");
  CHECK(error_of("\x8d\xff\xff\xff\xff\xff\xff\xff\xff"s) ==
        "t.pkl: byte 0: BINUNICODE8: string of 18446744073709551615 bytes runs past the end of the input (0 left; "
        "truncated?)");
  CHECK(error_of("\x8e\xff\xff\xff\xff\xff\xff\xff\x7f."s).find("BINBYTES8: data of 9223372036854775807 bytes") !=
        std::string::npos);
  CHECK(error_of("\x8b\xff\xff\xff\x7f."s).find("LONG4: integer of 2147483647 bytes runs past") != std::string::npos);
  CHECK(error_of("\x80\x02J\x01\x02"s) ==
        "t.pkl: byte 2: BININT: argument of 4 bytes runs past the end of the input (2 left; truncated?)");
  CHECK(error_of("I12"s) == "t.pkl: byte 0: INT: argument has no terminating newline (truncated input)");
}

TEST_CASE("pickle: every truncation of a valid pickle is an error", "[pickle]") {
  for (const std::string& whole : {kProto2Sample, kProto4Sample}) {
    REQUIRE_NOTHROW(P(whole));
    for (std::size_t n = 0; n < whole.size(); ++n) {
      INFO("prefix of " << n << " bytes");
      try {
        P(whole.substr(0, n));
        FAIL("a truncated pickle parsed");
      } catch (const PickleError& e) {
        CHECK(e.offset() <= n);
      }
    }
  }
}

TEST_CASE("pickle: corrupted pickles give errors, never crashes", "[pickle]") {
  // Every single-byte substitution of the protocol-2 sample, and random multi-byte ones.
  const std::string& base = kProto2Sample;
  std::size_t parsed = 0;
  std::size_t refused = 0;
  auto attempt = [&](const std::string& bytes) {
    try {
      P(bytes);
      ++parsed;
    } catch (const coopsim::Error&) {
      ++refused;
    }
  };
  for (std::size_t i = 0; i < base.size(); ++i) {
    for (int b = 0; b < 256; ++b) {
      std::string bytes = base;
      bytes[i] = static_cast<char>(b);
      attempt(bytes);
    }
  }
  std::mt19937 rng(12345);
  for (int round = 0; round < 20000; ++round) {
    std::string bytes = base;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) bytes[rng() % bytes.size()] = static_cast<char>(rng() % 256);
    attempt(bytes);
  }
  CHECK(parsed + refused == base.size() * 256 + 20000);
  CHECK(parsed > 0);  // e.g. other BININT1 values
  CHECK(refused > 0);
}

TEST_CASE("pickle: reference cycles are refused", "[pickle]") {
  CHECK(error_of("]q\x00h\x00"
                 "a."s) == "t.pkl: byte 5: APPEND: would put the list inside itself (a reference cycle); refusing");
  CHECK(error_of("]2a."s) == "t.pkl: byte 2: APPEND: would put the list inside itself (a reference cycle); refusing");
  CHECK(error_of("}2K\x01s."s) ==
        "t.pkl: byte 4: SETITEM: would put the dict inside itself (a reference cycle); refusing");
  // L1 = []; L2 = [L1]; then L1.append(1): L1 is complete once inside L2.
  CHECK(error_of("]\x94]h\x00"
                 "a0h\x00K\x01"
                 "a."s) ==
        "t.pkl: byte 11: APPEND: the list was already placed inside another container; changing it afterwards is "
        "refused (that is how reference cycles are built)");
  // L1 = []; L2 = [L1]; L1.append(L2) would be L1 -> L2 -> L1.
  CHECK(error_of("]\x94]\x94h\x00"
                 "a0h\x00h\x01"
                 "a."s)
            .find("already placed inside another container") != std::string::npos);
}

TEST_CASE("pickle: nesting is limited", "[pickle]") {
  const std::size_t max = coopsim::pickle::kMaxDepth;
  auto nested_lists = [](std::size_t depth) { return std::string(depth, ']') + std::string(depth - 1, 'a') + "."; };
  const ValuePtr deep = P(nested_lists(max));  // destroyed at the end of the test: no overflow
  const Value* v = deep.get();
  std::size_t depth = 1;
  while (!v->items.empty()) {
    v = v->items[0].get();
    ++depth;
  }
  CHECK(depth == max);
  CHECK(error_of(nested_lists(max + 1)) ==
        "t.pkl: byte " + std::to_string(max + 1 + max - 1) + ": APPEND: nesting deeper than 10000 levels; refusing");
  // Tuples and dicts count alike; a million levels are refused without exhausting the stack.
  CHECK(P(")" + std::string(max - 1, '\x85') + ".")->is(Kind::Tuple));
  CHECK(error_of(")" + std::string(max, '\x85') + ".").find("TUPLE1: nesting deeper than 10000") != std::string::npos);
  std::string dicts;
  for (std::size_t i = 0; i < max; ++i) dicts += "}K\x01"s;  // d1, 1, d2, 1, ..., d(max+1)
  dicts += "}" + std::string(max, 's') + ".";                // d(k)[1] = d(k+1), innermost first
  CHECK(error_of(dicts).find("SETITEM: nesting deeper than 10000 levels") != std::string::npos);
  CHECK(error_of(nested_lists(1000000)).find("nesting deeper than 10000 levels") != std::string::npos);
  CHECK(error_of(std::string(1000000, '(') + ".") ==
        "t.pkl: byte 1000000: STOP: STOP inside an open MARK (MARK misuse)");
}
