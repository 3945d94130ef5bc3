// The trace loader's fast paths read the same traces as its general ones: tensor, op and event
// lines in the writer's exact form (src/formats/trace/loader_plain.cpp) against the same records
// spaced out for the JSON parser, strings scanned eight bytes at a time against every position of
// a stop byte, integers converted while parsed against 19- and 20-digit ids, and the content hash
// read eight bytes at a time against FNV-1a byte by byte, and headers built without nlohmann's
// parser (src/formats/trace/plain_json.cpp) against the values nlohmann::json::parse gives.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "coopsim/base/error.hpp"
#include "coopsim/base/hash.hpp"
#include "coopsim/formats/trace_file.hpp"
#include "coopsim/model/trace.hpp"

// A namespace of its own, holding the using-directive too: the unity build (scripts/test.sh)
// compiles several test files as one.
namespace trace_fast_paths_test {

using namespace coopsim;

namespace {

const std::string kHeader = R"({"format":"coopsim-trace","version":1})";

// The event lines of `body` with a space after every ':' and ',' outside strings, which the fast
// path does not take: the JSON parser reads them.
std::string spaced(const std::string& body) {
  std::string out;
  bool in_string = false;
  for (std::size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    out += c;
    if (c == '"' && (i == 0 || body[i - 1] != '\\')) in_string = !in_string;
    if (!in_string && (c == ':' || c == ',')) out += ' ';
  }
  return out;
}

// The error of loading `text`, or "" when it loads.
std::string load_error(const std::string& text) {
  try {
    (void)parse_trace(text, "t.jsonl");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::uint64_t fnv1a_bytewise(std::string_view s) {
  std::uint64_t h = kFnvOffset;
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= kFnvPrime;
  }
  return h;
}

// The same tree with the same types: operator== calls unsigned 5 and signed 5 equal.
bool same_tree(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.type() != b.type()) return false;
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto i = a.begin(), j = b.begin(); i != a.end(); ++i, ++j) {
      if (i.key() != j.key() || !same_tree(i.value(), j.value())) return false;
    }
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!same_tree(a[i], b[i])) return false;
    }
    return true;
  }
  return a == b;
}

}  // namespace

TEST_CASE("trace fast paths: a header line gives the values nlohmann's parser gives", "[trace]") {
  const std::string head = R"({"format":"coopsim-trace","version":1,)";
  // The plain reader's lines, and lines it leaves to nlohmann (a fraction, an exponent, 19 and 20
  // digits, escapes, non-ASCII text, deep nesting), each against nlohmann's own parse.
  std::vector<std::string> rests = {
      R"("model":"m","source":{"tool":"t"},"x":{"a":[0,-0,1,-1,999999999999999999,-999999999999999999]}})",
      R"("x":{"k":1,"k":[2,{"k":null,"k":true}]},"y":[[],{},[[false]]],"z":"" })",
      " \"x\" : [ 1 , 2 ,\t3 ] ,\r\"y\" :{ } } \r",
      R"("x":[1.5,2e3,-0.0]})",
      R"("x":[9999999999999999999,18446744073709551616,-9223372036854775809]})",
      R"("x":"a\"b\\c\u00e9","y":"caf)"
      "\xC3\xA9"
      R"("})",
      R"("x":)" + std::string(100, '[') + std::string(100, ']') + "}",
  };
  for (const std::string& rest : rests) {
    const std::string line = head + rest;
    INFO(line);
    const Trace t = parse_trace(line + "\n", "h.jsonl");
    nlohmann::json expected = nlohmann::json::parse(line);
    for (const char* known : {"format", "version", "model", "source", "time_unit", "iterations"}) {
      expected.erase(known);
    }
    CHECK(same_tree(t.header.extra, expected));
    CHECK(t.header.model == nlohmann::json::parse(line).value("model", ""));
  }
  // A repeated top-level key is an error in both readers; in a nested object the last one wins.
  CHECK(load_error(head + R"("x":1,"x":2})" + "\n").find("duplicate key 'x'") != std::string::npos);
  CHECK(load_error(head + R"("x":1,"x":2.5})" + "\n").find("duplicate key 'x'") != std::string::npos);
  CHECK(parse_trace(head + R"("x":{"a":1,"a":2}})" + "\n", "h.jsonl").header.extra["x"]["a"] == 2);
  // A first line without "format" is not a header, whichever reader reads it.
  CHECK(load_error(R"({"kind":"tensor","id":1,"bytes":8})"
                   "\n")
            .find("missing header") != std::string::npos);
  CHECK(load_error(R"({"kind":"tensor","id":1.5,"bytes":8})"
                   "\n")
            .find("missing header") != std::string::npos);
  // Trailing text after the object is malformed JSON for both.
  CHECK(load_error(head + R"("x":1} 2)" + "\n").find("malformed JSON") != std::string::npos);
}

TEST_CASE("trace fast paths: plain event lines give the trace the JSON parser gives", "[trace]") {
  const std::string defs = std::string(R"({"kind":"tensor","id":0,"bytes":16})") + "\n" +
                           R"({"kind":"tensor","id":9999999999999999999,"bytes":8})" + "\n" +
                           R"({"kind":"op","id":7,"inputs":[0],"outputs":[9999999999999999999]})" + "\n";
  const std::string events = std::string(R"({"kind":"alloc","tensor":0})") + "\n" +
                             R"({"kind":"alloc","tensor":9999999999999999999})" + "\n" +
                             R"({"kind":"compute","op":7})" + "\n" + R"({"kind":"free","tensor":0})" + "\n" +
                             R"({"kind":"free","tensor":9999999999999999999})" + "\n";
  const Trace plain = parse_trace(kHeader + "\n" + defs + events, "plain.jsonl");
  const Trace parsed = parse_trace(kHeader + "\n" + defs + spaced(events), "parsed.jsonl");
  REQUIRE(plain.events.size() == 5);
  CHECK(plain.events == parsed.events);
  CHECK(plain.tensors == parsed.tensors);
  CHECK(plain.ops == parsed.ops);
  CHECK(plain.events[1].tensor() == plain.tensors[1].id);
}

TEST_CASE("trace fast paths: a plain event line fails as the parsed one does", "[trace]") {
  const std::string defs = std::string(R"({"kind":"tensor","id":1,"bytes":16})") + "\n" +
                           R"({"kind":"tensor","id":2,"bytes":0})" + "\n" + R"({"kind":"op","id":3,"inputs":[1]})" +
                           "\n";
  const std::vector<std::string> bad = {
      R"({"kind":"alloc","tensor":5})",                     // undefined tensor
      R"({"kind":"alloc","tensor":2})",                     // 0 bytes
      R"({"kind":"free","tensor":1})",                      // never allocated
      R"({"kind":"compute","op":3})",                       // reads a tensor not allocated
      R"({"kind":"compute","op":4})",                       // undefined op
      R"({"kind":"alloc","tensor":01})",                    // leading zero: not JSON
      R"({"kind":"alloc","tensor":18446744073709551616})",  // 20 digits, over 2^64 - 1
      R"({"kind":"alloc","tensor":-1})",
      R"({"kind":"alloc","tensor":1.0})",
      R"({"kind":"alloc","tensor":})",
      R"({"kind":"free","tensor":1}x})",
  };
  for (const std::string& line : bad) {
    INFO(line);
    const std::string plain = load_error(kHeader + "\n" + defs + line + "\n");
    CHECK_THAT(plain, Catch::Matchers::StartsWith("t.jsonl:5: "));
    if (line.find("01") == std::string::npos && line.find("x}") == std::string::npos &&
        line.find("\":}") == std::string::npos) {
      CHECK(plain == load_error(kHeader + "\n" + defs + spaced(line) + "\n"));
    }
  }
  // Twice allocated, twice freed: the line of the first is named.
  const std::string alloc = R"({"kind":"alloc","tensor":1})";
  const std::string free = R"({"kind":"free","tensor":1})";
  CHECK(load_error(kHeader + "\n" + defs + alloc + "\n" + alloc + "\n") ==
        load_error(kHeader + "\n" + defs + spaced(alloc) + "\n" + spaced(alloc) + "\n"));
  CHECK(load_error(kHeader + "\n" + defs + alloc + "\n" + free + "\n" + free + "\n") ==
        load_error(kHeader + "\n" + defs + spaced(alloc) + "\n" + spaced(free) + "\n" + spaced(free) + "\n"));
}

TEST_CASE("trace fast paths: plain tensor and op lines give what the JSON parser gives", "[trace]") {
  const std::string defs = std::string(R"({"kind":"tensor","id":1,"bytes":16,"role":"parameter"})") + "\n" +
                           R"({"kind":"tensor","id":2,"bytes":16,"role":"activation","name":"x2 a/b"})" + "\n" +
                           R"({"kind":"tensor","id":3,"bytes":0,"role":"other","name":""})" + "\n" +
                           R"({"kind":"tensor","id":4,"bytes":8,"role":"gradient"})" + "\n";
  const std::string ops =
      std::string(R"({"kind":"op","id":10,"name":"mm","duration":1500,"inputs":[1,2],"outputs":[4]})") + "\n" +
      R"({"kind":"op","id":11,"duration":0,"inputs":[2,4],"outputs":[3,4,4],"views":[[3,2]],"mutates":[4],"random":true})" +
      "\n" + R"({"kind":"op","id":12,"duration":7})" + "\n";
  const Trace plain = parse_trace(kHeader + "\n" + defs + ops, "plain.jsonl");
  const Trace parsed = parse_trace(kHeader + "\n" + spaced(defs) + spaced(ops), "parsed.jsonl");
  REQUIRE(plain.ops.size() == 3);
  CHECK(plain.tensors == parsed.tensors);
  CHECK(plain.ops == parsed.ops);
  CHECK(plain.tensors[1].name == "x2 a/b");
  CHECK(plain.ops[1].random);
  CHECK(plain.ops[1].views.size() == 1);
  CHECK(plain.ops[1].outputs.size() == 2);  // the repeated output is one
  // In microseconds, the duration is converted from its text.
  const std::string us = R"({"format":"coopsim-trace","version":1,"time_unit":"us"})";
  CHECK(parse_trace(us + "\n" + defs + ops, "t").ops[0].duration == SimTime{1500000});

  const std::vector<std::string> bad = {
      R"({"kind":"op","id":10,"duration":1,"inputs":[9]})",                  // undefined tensor
      R"({"kind":"op","id":10,"duration":1,"inputs":[1],"mutates":[2]})",    // mutates a non-input
      R"({"kind":"op","id":10,"duration":1,"inputs":[1],"views":[[2,1]]})",  // view of a non-output
      R"({"kind":"op","id":10,"duration":1,"inputs":[1],"outputs":[2],"views":[[2,2]]})",
      R"({"kind":"tensor","id":1,"bytes":4,"role":"parameter"})",  // a duplicate id
      R"({"kind":"tensor","id":5,"bytes":4,"role":"weights"})",
      R"({"kind":"tensor","id":5,"bytes":9007199254740993,"role":"other"})",
  };
  for (const std::string& line : bad) {
    INFO(line);
    const std::string plain_error = load_error(kHeader + "\n" + defs + line + "\n");
    CHECK_THAT(plain_error, Catch::Matchers::StartsWith("t.jsonl:6: "));
    CHECK(plain_error == load_error(kHeader + "\n" + defs + spaced(line) + "\n"));
  }
  // A pair of three: the message quotes the pair as written.
  CHECK_THAT(load_error(kHeader + "\n" + defs +
                        R"({"kind":"op","id":10,"duration":1,"inputs":[1],"outputs":[2],"views":[[2,1,1]]})" + "\n"),
             Catch::Matchers::EndsWith("(element 0 is [2,1,1])"));
  // Valid lines in another form than the writer's go to the parser, with the same result.
  for (const std::string& line :
       {std::string(R"({"kind":"op","id":10,"duration":1,"inputs":[]})"),
        std::string(R"({"kind":"op","id":10,"duration":1,"random":true,"inputs":[1]})"),
        std::string(R"({"kind":"op","id":10,"duration":1,"random":false})"),
        std::string(R"({"kind":"op","id":10,"duration":1.5})"),
        std::string(R"({"kind":"tensor","id":5,"bytes":4,"role":"other","name":"\u00e9"})")}) {
    INFO(line);
    const Trace a = parse_trace(kHeader + "\n" + defs + line + "\n", "t");
    const Trace b = parse_trace(kHeader + "\n" + defs + spaced(line) + "\n", "t");
    CHECK(a.ops == b.ops);
    CHECK(a.tensors == b.tensors);
  }
  // A duplicate op id names the first line.
  const std::string op = R"({"kind":"op","id":10,"duration":1})";
  CHECK(load_error(kHeader + "\n" + defs + op + "\n" + op + "\n") ==
        load_error(kHeader + "\n" + defs + spaced(op) + "\n" + spaced(op) + "\n"));
}

TEST_CASE("trace fast paths: a stop byte anywhere in a string ends its plain run", "[trace]") {
  for (std::size_t at = 0; at < 24; ++at) {
    INFO("stop byte at " << at);
    const std::string before(at, 'a');
    auto tensor = [&](const std::string& name_json) {
      return kHeader + "\n" + R"({"kind":"tensor","id":0,"bytes":4,"name":")" + name_json + "\"}\n";
    };
    // An escaped quote, an escaped backslash and two-, three- and four-byte UTF-8.
    CHECK(parse_trace(tensor(before + "\\\"b"), "t").tensors[0].name == before + "\"b");
    CHECK(parse_trace(tensor(before + "\\\\b"), "t").tensors[0].name == before + "\\b");
    CHECK(parse_trace(tensor(before + "\xC3\xA9" + before), "t").tensors[0].name == before + "\xC3\xA9" + before);
    CHECK(parse_trace(tensor(before + "\xE2\x82\xAC"), "t").tensors[0].name == before + "\xE2\x82\xAC");
    CHECK(parse_trace(tensor(before + "\xF0\x9F\x98\x80z"), "t").tensors[0].name == before + "\xF0\x9F\x98\x80z");
    // A plain name of that length, and the column of a control character or a bad UTF-8 byte.
    CHECK(parse_trace(tensor(before), "t").tensors[0].name == before);
    const std::size_t column = std::string(R"({"kind":"tensor","id":0,"bytes":4,"name":")").size() + at + 1;
    CHECK_THAT(load_error(tensor(before + "\tb")),
               Catch::Matchers::Contains("control character in string at column " + std::to_string(column)));
    CHECK_THAT(load_error(tensor(before + "\x80")),
               Catch::Matchers::Contains("invalid UTF-8 in string at column " + std::to_string(column)));
    CHECK_THAT(load_error(kHeader + "\n" + R"({"kind":"tensor","id":0,"bytes":4,"name":")" + before + "\n"),
               Catch::Matchers::Contains("unterminated string"));
  }
}

TEST_CASE("trace fast paths: integers of 19 and 20 digits", "[trace]") {
  auto tensor_bytes = [](const std::string& bytes) {
    return kHeader + "\n" + R"({"kind":"tensor","id":0,"bytes":)" + bytes + "}\n";
  };
  CHECK(parse_trace(tensor_bytes("9007199254740992"), "t").tensors[0].size == Bytes{9007199254740992ULL});
  CHECK(parse_trace(tensor_bytes("0"), "t").tensors[0].size == Bytes{0});
  CHECK_THAT(load_error(tensor_bytes("9007199254740993")), Catch::Matchers::Contains("an integer in [0, 2^53]"));
  auto tensor_id = [](const std::string& id) {
    return kHeader + "\n" + R"({"kind":"tensor","id":)" + id + R"(,"bytes":4})" + "\n";
  };
  CHECK(parse_trace(tensor_id("9999999999999999999"), "t").tensors[0].file_id == 9999999999999999999ULL);
  CHECK(parse_trace(tensor_id("18446744073709551615"), "t").tensors[0].file_id == 18446744073709551615ULL);
  CHECK_THAT(load_error(tensor_id("18446744073709551616")), Catch::Matchers::Contains("a non-negative integer"));
  CHECK_THAT(load_error(tensor_id("99999999999999999999")), Catch::Matchers::Contains("a non-negative integer"));
}

TEST_CASE("trace fast paths: the content hash is FNV-1a over every byte", "[trace]") {
  std::string text;
  for (int i = 0; i < 64; ++i) text += static_cast<char>(0x80 + i * 7);  // bytes of both halves
  for (std::size_t n = 0; n <= text.size(); ++n) {
    INFO(n);
    CHECK(fnv1a(kFnvOffset, text.data(), n) == fnv1a_bytewise(std::string_view(text.data(), n)));
    // Split anywhere, the running hash is the same.
    CHECK(fnv1a(fnv1a(kFnvOffset, text.data(), n / 3), text.data() + n / 3, n - n / 3) ==
          fnv1a_bytewise(std::string_view(text.data(), n)));
  }
  const std::string trace = kHeader + "\n" + R"({"kind":"tensor","id":0,"bytes":4,"name":"a\u00e9"})" + "\n";
  CHECK(parse_trace(trace, "t").content_hash == fnv1a_bytewise(trace));
}

}  // namespace trace_fast_paths_test

namespace trace_fast_paths_test {

TEST_CASE("trace fast paths: ids 0, 1, 2, ... and then others map to the same indices", "[trace]") {
  // The id map keeps no table while ids are 0, 1, 2, ... in order (src/formats/trace/loader.hpp)
  // and moves to one at the first other id: every id keeps its index across the move.
  std::string text = kHeader + "\n";
  for (const int id : {0, 1, 2, 10, 3}) {
    text += R"({"kind":"tensor","id":)" + std::to_string(id) + R"(,"bytes":8})" + "\n";
  }
  text += R"({"kind":"op","id":0,"inputs":[0,1,2,10,3],"outputs":[]})"
          "\n";
  text += R"({"kind":"op","id":5,"inputs":[3,10],"outputs":[]})"
          "\n";
  for (const int id : {3, 10, 0, 1, 2}) text += R"({"kind":"alloc","tensor":)" + std::to_string(id) + "}\n";
  text += R"({"kind":"compute","op":5})"
          "\n"
          R"({"kind":"compute","op":0})"
          "\n";
  const Trace t = parse_trace(text, "ids.jsonl");
  REQUIRE(t.tensors.size() == 5);
  for (std::size_t i = 0; i < t.tensors.size(); ++i) CHECK(index_of(t.tensors[i].id) == i);
  CHECK(t.tensors[3].file_id == 10);
  CHECK(t.tensors[4].file_id == 3);
  REQUIRE(t.ops.size() == 2);
  CHECK(t.ops[0].inputs == std::vector<TensorId>{TensorId{0}, TensorId{1}, TensorId{2}, TensorId{3}, TensorId{4}});
  CHECK(t.ops[1].inputs == std::vector<TensorId>{TensorId{4}, TensorId{3}});
  REQUIRE(t.events.size() == 7);
  CHECK(t.events[0].tensor() == TensorId{4});
  CHECK(t.events[1].tensor() == TensorId{3});
  CHECK(t.events[2].tensor() == TensorId{0});
  CHECK(t.events[5].compute_op() == OpId{1});
  CHECK(t.events[6].compute_op() == OpId{0});
  // Ids never defined stay undefined on both sides of the move.
  CHECK(load_error(kHeader + "\n" + R"({"kind":"tensor","id":0,"bytes":8})" + "\n" + R"({"kind":"alloc","tensor":1})" +
                   "\n")
            .find("undefined tensor 1") != std::string::npos);
  CHECK(load_error(text + R"({"kind":"alloc","tensor":4})" + "\n").find("undefined tensor 4") != std::string::npos);
  CHECK(load_error(text + R"({"kind":"compute","op":1})" + "\n").find("undefined op 1") != std::string::npos);
}

}  // namespace trace_fast_paths_test
