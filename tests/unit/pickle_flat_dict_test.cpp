// Flat dicts built in one step while streaming (src/formats/pickle/pickle_flat_dict.cpp): the
// streamed tree equals parse()'s wherever the shortcut applies and wherever it must not
// (equal keys, a dict the memo reads again, a second SETITEMS, long integers), and the scanner
// decodes exactly the opcode run it claims.
#include <catch2/catch.hpp>

#include <string>

#include "formats/pickle/pickle_builder.hpp"
#include "coopsim/formats/pickle_stream.hpp"
#include "pickle_test_support.hpp"

using namespace coopsim;
using namespace pickle_test;
using Kind = pickle::Value::Kind;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace pickle_flat_dict_test {

namespace {

// Python-like text of a value, dict entries in order.
std::string show(const pickle::Value& v) {
  switch (v.kind) {
    case Kind::None: return "None";
    case Kind::Bool: return v.boolean ? "True" : "False";
    case Kind::Int: return std::to_string(v.integer);
    case Kind::Float: return std::to_string(v.real);
    case Kind::String: return "'" + v.text + "'";
    case Kind::Bytes: return "b'" + v.text + "'";
    case Kind::List:
    case Kind::Tuple: {
      std::string s = v.kind == Kind::List ? "[" : "(";
      for (const auto& item : v.items) s += (item == pickle::taken() ? std::string("<taken>") : show(*item)) + ", ";
      return s + (v.kind == Kind::List ? "]" : ")");
    }
    case Kind::Dict: {
      std::string s = "{";
      for (const auto& [k, val] : v.entries) s += show(*k) + ": " + show(*val) + ", ";
      return s + "}";
    }
  }
  return "?";
}

// Protocol 4, worked by hand (memo numbers in brackets): EMPTY_LIST [0], MARK, then
//  1. {'a': 1, 'b': 32767}      [1], keys 'a' [2] and 'b' [3] new: opcode by opcode
//  2. {'a': 2, 'b': -1}         [4], BINGET keys, BININT1, LONG1 of one byte: flat
//  3. {'a': None, 'b': True}    [5]: flat
//  4. {'a': 5}                  'a' twice (False, then 5): Python keeps the last value
//  5. {'a': -1, 'b': 513}       [6], BININT -1 and BININT2: flat
//  6. {'a': 7}                  BINPUT 16, which BINGET reads twice below: opcode by opcode
//  7. {'a': 9, 'b': 2}          flat {'a': 1}, then a second MARK ... SETITEMS onto it
//  8. {}                        flat, no items
//  9. {'a': 0, 'b': -2**63}     LONG1 of 0 and of 8 bytes: flat
// 10. {'a': {'a': 7}}           a value read from the memo that is a dict: flat
// 11. {'a': 1}                  LONG1 of 9 bytes: opcode by opcode
// APPENDS, BINGET 16, TUPLE2, STOP. pickle.loads gives
// ([{'a': 1, 'b': 32767}, {'a': 2, 'b': -1}, ..., {'a': 1}], {'a': 7}).
const std::string kFlatDicts =
    "\x80\x04]\x94("
    "}\x94(\x8c\x01"
    "a\x94K\x01\x8c\x01"
    "b\x94\x8a\x02\xff\x7fu"
    "}\x94(h\x02K\x02h\x03\x8a\x01\xffu"
    "}\x94(h\x02Nh\x03\x88u"
    "}(h\x02\x89h\x02K\x05u"
    "}\x94(h\x02J\xff\xff\xff\xffh\x03M\x01\x02u"
    "}q\x10(h\x02K\x07u"
    "}(h\x02K\x01u(h\x03K\x02h\x02K\x09u"
    "}(u"
    "}(h\x02\x8a\x00h\x03\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80u"
    "}(h\x02h\x10u"
    "}(h\x02\x8a\x09\x01\x00\x00\x00\x00\x00\x00\x00\x00u"
    "eh\x10\x86."s;

const std::string kExpected =
    "([{'a': 1, 'b': 32767, }, {'a': 2, 'b': -1, }, {'a': None, 'b': True, }, {'a': 5, }, {'a': -1, 'b': 513, }, "
    "{'a': 7, }, {'a': 9, 'b': 2, }, {}, {'a': 0, 'b': -9223372036854775808, }, {'a': {'a': 7, }, }, {'a': 1, }, ], "
    "{'a': 7, }, )";

}  // namespace

TEST_CASE("pickle flat dicts: streamed as parse() builds them, shortcut or not", "[pickle]") {
  CHECK(show(*P(kFlatDicts)) == kExpected);
  MemoryCap memory(Limits::default_max_memory());
  TakeNone none;
  CHECK(show(*pickle::stream(kFlatDicts, "t.pkl", memory, none)) == kExpected);
  // Taking every item: each dict reaches the sink whole, in order.
  struct Show : pickle::ItemSink {
    bool take(const pickle::ValuePtr&, const pickle::Value& item) override {
      seen += show(item) + " ";
      return true;
    }
    std::string seen;
  } all;
  MemoryCap memory2(Limits::default_max_memory());
  const pickle::ValuePtr root = pickle::stream(kFlatDicts, "t.pkl", memory2, all);
  CHECK(all.seen ==
        "{'a': 1, 'b': 32767, } {'a': 2, 'b': -1, } {'a': None, 'b': True, } {'a': 5, } {'a': -1, 'b': 513, } "
        "{'a': 7, } {'a': 9, 'b': 2, } {} {'a': 0, 'b': -9223372036854775808, } {'a': {'a': 7, }, } {'a': 1, } ");
  CHECK(show(*root->items[1]) == "{'a': 7, }");
}

TEST_CASE("pickle flat dicts: the scanner spans exactly EMPTY_DICT's run up to SETITEMS, or nothing", "[pickle]") {
  pickle::detail::FlatDict d;
  using Item = pickle::detail::FlatDict::ItemKind;
  // After EMPTY_DICT: MEMOIZE, MARK, BINGET 2, LONG1 -1, LONG_BINGET 300, NEWFALSE, SETITEMS, then more.
  const std::string run = "\x94(h\x02\x8a\x01\xffj\x2c\x01\x00\x00\x89u]"s;
  REQUIRE(pickle::detail::scan_flat_dict(run, d) == run.size() - 1);
  CHECK(d.put == pickle::detail::FlatDict::Put::Memoize);
  REQUIRE(d.size == 4);
  CHECK((d.items[0].kind == Item::Get && d.items[0].value == 2));
  CHECK((d.items[1].kind == Item::Int && static_cast<std::int64_t>(d.items[1].value) == -1));
  CHECK((d.items[2].kind == Item::Get && d.items[2].value == 300));
  CHECK(d.items[3].kind == Item::False);
  // BINPUT and LONG_BINPUT name their index.
  REQUIRE(pickle::detail::scan_flat_dict("q\x07(u"s, d) == 4);
  CHECK((d.put == pickle::detail::FlatDict::Put::Index && d.put_index == 7));
  REQUIRE(pickle::detail::scan_flat_dict("r\x00\x00\x01\x00(u"s, d) == 7);
  CHECK(d.put_index == 65536);
  // Not the shape: no MARK, a string value, an odd item count, a truncated run, too many items.
  CHECK(pickle::detail::scan_flat_dict("(h\x02\x8c\x01xu"s, d) == 0);
  CHECK(pickle::detail::scan_flat_dict("(h\x02u"s, d) == 0);
  CHECK(pickle::detail::scan_flat_dict("h\x02K\x01u"s, d) == 0);
  CHECK(pickle::detail::scan_flat_dict("(h\x02K"s, d) == 0);
  CHECK(pickle::detail::scan_flat_dict("(h\x02\x8a\x08\x01\x02"s, d) == 0);
  std::string many = "(";
  for (int i = 0; i < 17; ++i) many += "h\x02K\x01"s;
  CHECK(pickle::detail::scan_flat_dict(many + "u", d) == 0);
}

}  // namespace pickle_flat_dict_test
