// coopsim's allow-list pickle reader (include/coopsim/formats/pickle.hpp). Byte strings are
// worked by hand from the Python pickle protocol specification (Lib/pickletools.py); string
// literals are split where a hex escape would swallow the next character ("\x05" "a").
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "coopsim/base/error.hpp"
#include "coopsim/formats/pickle.hpp"
#include "pickle_test_support.hpp"
#include "test_paths.hpp"

using namespace std::string_literals;
using coopsim::pickle::Value;
using coopsim::pickle::ValuePtr;
using Kind = Value::Kind;
using namespace pickle_test;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace pickle_test {

namespace {

std::string error_of_file(const std::string& path) {
  try {
    coopsim::pickle::parse_file(path);
  } catch (const coopsim::Error& e) {
    return e.what();
  }
  FAIL("no error for " << path);
  return {};
}

void write_bytes(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out << bytes;
}

std::int64_t int_of(const std::string& bytes) {
  const ValuePtr v = P(bytes);
  REQUIRE(v->is(Kind::Int));
  return v->integer;
}

std::string text_of(const std::string& bytes, Kind kind) {
  const ValuePtr v = P(bytes);
  REQUIRE(v->is(kind));
  return v->text;
}

// CRC-32 (ISO 3309, reflected polynomial 0xEDB88320), for hand-built gzip files.
std::uint32_t crc32(const std::string& data) {
  std::uint32_t crc = 0xFFFFFFFFU;
  for (const char c : data) {
    crc ^= static_cast<unsigned char>(c);
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320U & (0U - (crc & 1U)));
  }
  return ~crc;
}

std::string le32(std::uint32_t v) {
  std::string s;
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFFU));
  return s;
}

// RFC 1952 member holding one RFC 1951 stored block (data shorter than 64 KiB).
std::string gzip_stored(const std::string& data) {
  const auto len = static_cast<std::uint16_t>(data.size());
  const auto nlen = static_cast<std::uint16_t>(~len);
  std::string out = "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"s;  // magic, deflate, no flags, mtime 0
  out += "\x01"s;                                                 // BFINAL, stored
  out += std::string{static_cast<char>(len & 0xFF), static_cast<char>(len >> 8)};
  out += std::string{static_cast<char>(nlen & 0xFF), static_cast<char>(nlen >> 8)};
  out += data;
  out += le32(crc32(data));
  out += le32(static_cast<std::uint32_t>(data.size()));
  return out;
}

}  // namespace

TEST_CASE("pickle: None, bools and every integer encoding", "[pickle]") {
  CHECK(P("\x80\x02N."s)->is(Kind::None));
  CHECK(P("\x80\x02\x88."s)->boolean);
  CHECK(P("\x80\x02\x88."s)->is(Kind::Bool));
  CHECK_FALSE(P("\x80\x02\x89."s)->boolean);
  // INT: decimal text; "01" / "00" are protocol 0's True / False.
  CHECK(int_of("I42\n."s) == 42);
  CHECK(int_of("I-7\n."s) == -7);
  CHECK(P("I01\n."s)->is(Kind::Bool));
  CHECK(P("I01\n."s)->boolean);
  CHECK_FALSE(P("I00\n."s)->boolean);
  // BININT is signed 4-byte LE; BININT1 / BININT2 unsigned.
  CHECK(int_of("J\xff\xff\xff\xff."s) == -1);
  CHECK(int_of("J\x00\x00\x00\x80."s) == -2147483648LL);
  CHECK(int_of("K\xff."s) == 255);
  CHECK(int_of("M\x01\x02."s) == 513);
  // LONG: decimal text with an optional L suffix.
  CHECK(int_of("L123L\n."s) == 123);
  CHECK(int_of("L-9223372036854775808L\n."s) == std::numeric_limits<std::int64_t>::min());
  CHECK(error_of("L9223372036854775808L\n."s) ==
        "t.pkl: byte 0: LONG: integer '9223372036854775808' does not fit in 64 bits");
  // LONG1 / LONG4: little-endian two's complement.
  CHECK(int_of("\x8a\x00."s) == 0);
  CHECK(int_of("\x8a\x01\xff."s) == -1);
  CHECK(int_of("\x8a\x02\x00\x80."s) == -32768);
  CHECK(int_of("\x8a\x03\x00\x80\x00."s) == 32768);
  CHECK(int_of("\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f."s) == std::numeric_limits<std::int64_t>::max());
  CHECK(int_of("\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\xff."s) == -1);  // redundant sign byte
  CHECK(error_of("\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00."s) ==
        "t.pkl: byte 0: LONG1: integer of 9 bytes does not fit in 64 bits");  // 2**63
  CHECK(int_of("\x8b\x02\x00\x00\x00\x00\x01."s) == 256);
  CHECK(error_of("\x80\x02\x8b\xff\xff\xff\xff."s) == "t.pkl: byte 2: LONG4: negative byte count -1");
  // Text arguments are plain decimal (see the header for why).
  CHECK(error_of("I0x10\n."s) == "t.pkl: byte 0: INT: argument '0x10' is not a plain decimal integer");
  CHECK(error_of("I010\n."s) == "t.pkl: byte 0: INT: argument '010' is not a plain decimal integer");
}

TEST_CASE("pickle: floats", "[pickle]") {
  CHECK(P("\x80\x02G\x3f\xf8\x00\x00\x00\x00\x00\x00."s)->real == 1.5);  // big-endian 0x3FF8...
  CHECK(P("\x80\x02G\xc0\x00\x00\x00\x00\x00\x00\x00."s)->real == -2.0);
  CHECK(P("F1.5\n."s)->real == 1.5);
  CHECK(P("F-2.5e-3\n."s)->real == -0.0025);
  CHECK(P("F-inf\n."s)->real == -std::numeric_limits<double>::infinity());
  CHECK(std::isnan(P("Fnan\n."s)->real));
  CHECK(P("F1e999\n."s)->real == std::numeric_limits<double>::infinity());  // float() rounds to inf
  CHECK(P("F1e-999\n."s)->real == 0.0);
  CHECK(P("F1.5\n."s)->is(Kind::Float));
  CHECK(error_of("F1.5x\n."s) == "t.pkl: byte 0: FLOAT: argument '1.5x' is not a decimal floating-point number");
}

TEST_CASE("pickle: strings and bytes", "[pickle]") {
  // STRING: quoted, Python escapes (codecs.escape_decode): \n, \x41, octal \101, unknown \q kept.
  CHECK(text_of("S'a\\nb\\x41\\101\\q'\n."s, Kind::String) == "a\nbAA\\q");
  CHECK(text_of("S\"x\"\n."s, Kind::String) == "x");
  CHECK(error_of("Sabc\n."s) == "t.pkl: byte 0: STRING: the STRING opcode argument must be quoted");
  CHECK(error_of("S'\\xe9'\n."s) ==
        "t.pkl: byte 0: STRING: byte 0xe9 at position 0 is not ASCII (a Python 2 str; Python 3 decodes these as "
        "ASCII)");
  CHECK(text_of("T\x03\x00\x00\x00"
                "abc."s,
                Kind::String) == "abc");
  CHECK(text_of("U\x02hi."s, Kind::String) == "hi");
  CHECK(error_of("\x80\x02T\xfe\xff\xff\xff."s) == "t.pkl: byte 2: BINSTRING: negative byte count -2");
  // UNICODE: raw-unicode-escape; latin-1 bytes become UTF-8; "\\\\u0041" is not an escape.
  CHECK(text_of("Vcaf\xe9\\u20ac\n."s, Kind::String) == "caf\xc3\xa9\xe2\x82\xac");
  CHECK(text_of("Va\\\\u0041\n."s, Kind::String) == "a\\\\u0041");
  CHECK(text_of("V\\U0001F600\n."s, Kind::String) == "\xf0\x9f\x98\x80");
  CHECK(error_of("V\\u12\n."s) ==
        "t.pkl: byte 0: UNICODE: truncated \\uXXXX escape at position 0 of the UNICODE argument");
  // BINUNICODE family: UTF-8 checked like Python's decoder with surrogatepass.
  CHECK(text_of("X\x02\x00\x00\x00hi."s, Kind::String) == "hi");
  CHECK(text_of("\x8c\x03"
                "caf."s,
                Kind::String) == "caf");
  CHECK(text_of("\x8d\x01\x00\x00\x00\x00\x00\x00\x00"
                "a."s,
                Kind::String) == "a");
  CHECK(text_of("\x8c\x04\xf0\x9f\x98\x80."s, Kind::String) == "\xf0\x9f\x98\x80");
  CHECK(text_of("\x8c\x03\xed\xa0\x80."s, Kind::String) == "\xed\xa0\x80");  // lone surrogate
  CHECK(error_of("\x8c\x02\xc0\x80."s) ==
        "t.pkl: byte 0: SHORT_BINUNICODE: invalid UTF-8 at position 0 of the text (byte 0xc0)");
  CHECK(error_of("\x8c\x04\xf4\x90\x80\x80."s) ==
        "t.pkl: byte 0: SHORT_BINUNICODE: invalid UTF-8 at position 0 of the text (byte 0xf4)");
  CHECK(error_of("\x8c\x03"
                 "a\xe2\x82."s) ==
        "t.pkl: byte 0: SHORT_BINUNICODE: invalid UTF-8 at position 1 of the text (byte 0xe2)");
  // Bytes, with NULs kept.
  CHECK(text_of("B\x01\x00\x00\x00\x00."s, Kind::Bytes) == "\x00"s);
  CHECK(text_of("C\x02\xff\x00."s, Kind::Bytes) == "\xff\x00"s);
  CHECK(text_of("\x8e\x01\x00\x00\x00\x00\x00\x00\x00"
                "z."s,
                Kind::Bytes) == "z");
  CHECK(text_of("\x80\x05\x96\x01\x00\x00\x00\x00\x00\x00\x00"
                "z."s,
                Kind::Bytes) == "z");  // bytearray
}

TEST_CASE("pickle: a protocol-2 dict of a list and a tuple", "[pickle]") {
  const ValuePtr v = P(kProto2Sample);
  REQUIRE(v->is(Kind::Dict));
  REQUIRE(v->entries.size() == 2);
  CHECK(v->entries[0].first->text == "a");
  CHECK(v->entries[1].first->text == "b");
  const Value* a = v->get("a");
  REQUIRE(a != nullptr);
  REQUIRE(a->is(Kind::List));
  REQUIRE(a->items.size() == 2);
  CHECK(a->items[0]->integer == 1);
  CHECK(a->items[1]->integer == 2);
  const Value* b = v->get("b");
  REQUIRE(b != nullptr);
  REQUIRE(b->is(Kind::Tuple));
  REQUIRE(b->items.size() == 2);
  CHECK(b->items[0]->is(Kind::None));
  CHECK(b->items[1]->boolean);
  CHECK(v->get("c") == nullptr);
  CHECK(a->get("a") == nullptr);  // not a dict
}

TEST_CASE("pickle: a protocol-4 framed pickle", "[pickle]") {
  const ValuePtr v = P(kProto4Sample);
  REQUIRE(v->is(Kind::Dict));
  REQUIRE(v->get("segments") != nullptr);
  CHECK(v->get("segments")->is(Kind::List));
  CHECK(v->get("segments")->items.empty());
  const Value* traces = v->get("device_traces");
  REQUIRE(traces != nullptr);
  REQUIRE(traces->items.size() == 1);
  CHECK(traces->items[0]->is(Kind::List));
  CHECK(error_of("\x80\x04\x95\x28\x00\x00\x00\x00\x00\x00\x00N."s) ==
        "t.pkl: byte 2: FRAME: frame of 40 bytes runs past the end of the input (2 left; truncated?)");
}

TEST_CASE("pickle: marks, pop, dup and the tuple, list and dict opcodes", "[pickle]") {
  CHECK(P(")."s)->is(Kind::Tuple));
  CHECK(P(")."s)->items.empty());
  CHECK(P("K\x01\x85."s)->items.size() == 1);
  const ValuePtr t3 = P("K\x01K\x02K\x03\x87."s);
  REQUIRE(t3->items.size() == 3);
  CHECK(t3->items[2]->integer == 3);
  CHECK(P("(K\x01K\x02K\x03t."s)->items.size() == 3);
  const ValuePtr l = P("(K\x01K\x02l."s);
  REQUIRE(l->is(Kind::List));
  CHECK(l->items.size() == 2);
  const ValuePtr d =
      P("(K\x01K\x02"
        "d."s);
  REQUIRE(d->is(Kind::Dict));
  REQUIRE(d->entries.size() == 1);
  CHECK(d->entries[0].first->integer == 1);
  CHECK(d->entries[0].second->integer == 2);
  CHECK(P("}K\x01K\x02s."s)->entries.size() == 1);
  CHECK(int_of("K\x01K\x02"
               "0."s) == 1);        // POP
  CHECK(int_of("K\x01(0."s) == 1);  // POP with nothing above the MARK pops the MARK
  CHECK(int_of("K\x07(K\x01K\x02"
               "1."s) == 7);           // POP_MARK
  const ValuePtr dup = P("]2\x86."s);  // DUP: the same list twice
  REQUIRE(dup->items.size() == 2);
  CHECK(dup->items[0].get() == dup->items[1].get());
}

TEST_CASE("pickle: memo entries are shared objects", "[pickle]") {
  // EMPTY_LIST, MEMOIZE (0), BINGET 0, BINGET 0, MARK, 1, 2, APPENDS (into the top one), TUPLE3:
  // all three items are the one list, which shows the appended values.
  const ValuePtr t =
      P("\x80\x04]\x94h\x00h\x00(K\x01K\x02"
        "e\x87."s);
  REQUIRE(t->items.size() == 3);
  for (const auto& item : t->items) {
    CHECK(item.get() == t->items[0].get());
    REQUIRE(item->items.size() == 2);
    CHECK(item->items[1]->integer == 2);
  }
  // A list memoized, appended to, popped, then fetched twice from the memo: [[5], [5]].
  const ValuePtr l =
      P("\x80\x04]\x94K\x05"
        "a0(h\x00h\x00l."s);
  REQUIRE(l->items.size() == 2);
  CHECK(l->items[0].get() == l->items[1].get());
  REQUIRE(l->items[0]->items.size() == 1);
  CHECK(l->items[0]->items[0]->integer == 5);
  // PUT / GET (text), BINPUT / LONG_BINPUT / LONG_BINGET, sparse and overwritten indices.
  CHECK(int_of("K\x09p12\n0g12\n."s) == 9);
  CHECK(int_of("K\x09r\x00\x01\x00\x00"
               "0j\x00\x01\x00\x00."s) == 9);
  CHECK(int_of("K\x01q\x00"
               "0K\x02q\x00"
               "0h\x00."s) == 2);
  CHECK(error_of("\x80\x02h\x05."s) == "t.pkl: byte 2: BINGET: memo index 5 is not set (0 entries)");
  CHECK(error_of("Ng7\n."s) == "t.pkl: byte 1: GET: memo index 7 is not set (0 entries)");
  CHECK(error_of("Np-1\n."s) == "t.pkl: byte 1: PUT: argument '-1' is not a plain decimal integer (non-negative)");
  CHECK(error_of("\x94."s) == "t.pkl: byte 0: MEMOIZE: stack underflow: needs 1 value above the last MARK, found 0");
}

TEST_CASE("pickle: dict keys follow Python's equality", "[pickle]") {
  // {1: 2, 1: 3} -> {1: 3}
  const ValuePtr d = P("}(K\x01K\x02K\x01K\x03u."s);
  REQUIRE(d->entries.size() == 1);
  CHECK(d->entries[0].second->integer == 3);
  // 1, 1.0 and True are one key; the first key object and position stay.
  const ValuePtr n = P("}(K\x01K\x02G\x3f\xf0\x00\x00\x00\x00\x00\x00K\x03\x88K\x04u."s);
  REQUIRE(n->entries.size() == 1);
  CHECK(n->entries[0].first->is(Kind::Int));
  CHECK(n->entries[0].second->integer == 4);
  CHECK(P("(\x8c\x01"
          "aK\x01\x8c\x01"
          "aK\x02"
          "d."s)
            ->get("a")
            ->integer == 2);
  // str 'a' and bytes b'a' differ; equal tuples are one key; two NaNs are two keys.
  CHECK(P("}(\x8c\x01"
          "aK\x01"
          "C\x01"
          "aK\x02u."s)
            ->entries.size() == 2);
  CHECK(P("}(K\x01\x8c\x01x\x86K\x01K\x01\x8c\x01x\x86K\x02u."s)->entries.size() == 1);
  CHECK(P("}(Fnan\nK\x01"
          "Fnan\nK\x02u."s)
            ->entries.size() == 2);
  // Past the size where a hash index takes over: 100 keys, then key 50 again.
  std::string many = "}(";
  for (int k = 0; k < 100; ++k) many += "K"s + static_cast<char>(k) + "N";
  many += "K\x32K\x07u."s;
  const ValuePtr m = P(many);
  REQUIRE(m->entries.size() == 100);
  CHECK(m->entries[50].first->integer == 50);
  CHECK(m->entries[50].second->integer == 7);
  CHECK(m->entries[49].second->is(Kind::None));
  // Unhashable keys are accepted as plain values, each its own entry.
  const ValuePtr u = P("}(]K\x01]K\x02u."s);
  REQUIRE(u->entries.size() == 2);
  CHECK(u->entries[0].first->is(Kind::List));
}

TEST_CASE("pickle: files, plain and gzip", "[pickle]") {
  const auto dir = coopsim::test::scratch_dir("pickle");
  write_bytes(dir / "plain.pickle", kProto2Sample);
  CHECK(coopsim::pickle::parse_file((dir / "plain.pickle").string())->get("a")->items.size() == 2);
  const std::string gz = gzip_stored(kProto4Sample);
  write_bytes(dir / "sample.pickle.gz", gz);
  CHECK(coopsim::pickle::parse_file((dir / "sample.pickle.gz").string())->get("device_traces")->items.size() == 1);
  // Errors name the file.
  const std::string truncated = (dir / "truncated.pickle.gz").string();
  write_bytes(truncated, gz.substr(0, gz.size() - 6));
  CHECK(error_of_file(truncated) == truncated + ": gzip stream is truncated (unexpected end of compressed data)");
  std::string bad_crc = gz;
  bad_crc[bad_crc.size() - 8] = static_cast<char>(bad_crc[bad_crc.size() - 8] ^ 1);
  const std::string corrupt = (dir / "corrupt.pickle.gz").string();
  write_bytes(corrupt, bad_crc);
  CHECK(error_of_file(corrupt).find(corrupt + ": gzip stream is corrupt") == 0);
  const std::string trailing = (dir / "trailing.pickle").string();
  write_bytes(trailing, kProto2Sample + "x");
  CHECK(error_of_file(trailing) == trailing + ": byte 38: 1 trailing byte after STOP");
  const std::string missing = (dir / "missing.pickle").string();
  CHECK(error_of_file(missing) == missing + ": cannot open: No such file or directory");
}

TEST_CASE("pickle: the real PyTorch memory snapshots", "[pickle][shared]") {
  if (!coopsim::test::have_shared()) {
    WARN("../shared is absent: real snapshots skipped");
    return;
  }
  // Figures obtained independently with Python 3.11: a minimal stack machine over
  // pickletools.genops(gzip.open(f).read()) (it only disassembles; nothing is imported or
  // called), cross-checked with a pickle.Unpickler whose find_class always raises.
  // blocks = sum of len(s['blocks']); alloc_bytes = sum of 'size' over 'alloc' entries;
  // first = device_traces[0][0] (addr, size, time_us, number of frames).
  struct Expected {
    const char* file;
    std::size_t segments, blocks, entries, allocs, free_completed;
    std::int64_t segment_bytes, alloc_bytes, first_addr, first_size, first_time_us;
    std::size_t first_frames;
  };
  const Expected expected[] = {
      {"cs336_MAGMA27_memory_snapshot.pickle.gz", 216, 455, 5163, 1721, 1721, 14180941824, 58890300607, 47294971904,
       25165824, 1776479641085368, 7},
      {"cs336_bcrafton_memory_snapshot.pickle.gz", 96, 550, 6486, 2162, 2162, 4238344192, 11680970248, 126972587876352,
       512, 1773270053858957, 47},
      {"medium_128_inference_memory_snapshot.pickle.gz", 98, 230, 3840, 1280, 1280, 1763704832, 2851305568, 32046710784,
       2097152, 1783874041854969, 55},
      {"medium_128_training_memory_snapshot.pickle.gz", 377, 918, 19136, 6526, 6305, 7235174400, 34448091337,
       34135343104, 2097152, 1783874495854988, 58},
      {"medium_256_inference_memory_snapshot.pickle.gz", 101, 232, 3840, 1280, 1280, 1864368128, 6911357024,
       30144593920, 4194304, 1783872326936042, 55},
      {"medium_256_training_memory_snapshot.pickle.gz", 495, 1023, 19430, 6624, 6403, 9265217536, 45687989993,
       35248930816, 4194304, 1783874476478069, 58},
  };
  for (const Expected& e : expected) {
    INFO(e.file);
    const auto path = coopsim::test::shared_dir() / "traces" / "pytorch_snapshots" / e.file;
    const ValuePtr top = coopsim::pickle::parse_file(path.string());
    REQUIRE(top->is(Kind::Dict));
    REQUIRE(top->entries.size() == 4);
    CHECK(top->entries[0].first->text == "segments");
    CHECK(top->entries[1].first->text == "device_traces");
    CHECK(top->entries[2].first->text == "allocator_settings");
    CHECK(top->entries[3].first->text == "external_annotations");
    const Value* segments = top->get("segments");
    REQUIRE(segments != nullptr);
    REQUIRE(segments->is(Kind::List));
    CHECK(segments->items.size() == e.segments);
    std::size_t blocks = 0;
    std::int64_t segment_bytes = 0;
    for (const auto& s : segments->items) {
      REQUIRE(s->get("blocks") != nullptr);
      blocks += s->get("blocks")->items.size();
      REQUIRE(s->get("total_size") != nullptr);
      segment_bytes += s->get("total_size")->integer;
    }
    CHECK(blocks == e.blocks);
    CHECK(segment_bytes == e.segment_bytes);
    const Value* devices = top->get("device_traces");
    REQUIRE(devices != nullptr);
    REQUIRE(devices->items.size() == 1);
    const Value& trace = *devices->items[0];
    CHECK(trace.items.size() == e.entries);
    std::size_t allocs = 0;
    std::size_t completed = 0;
    std::int64_t alloc_bytes = 0;
    for (const auto& entry : trace.items) {
      const Value* action = entry->get("action");
      REQUIRE(action != nullptr);
      if (action->text == "alloc") {
        ++allocs;
        alloc_bytes += entry->get("size")->integer;
      }
      if (action->text == "free_completed") ++completed;
    }
    CHECK(allocs == e.allocs);
    CHECK(completed == e.free_completed);
    CHECK(alloc_bytes == e.alloc_bytes);
    REQUIRE_FALSE(trace.items.empty());
    const Value& first = *trace.items[0];
    CHECK(first.get("action")->text == "alloc");
    CHECK(first.get("addr")->integer == e.first_addr);
    CHECK(first.get("size")->integer == e.first_size);
    CHECK(first.get("time_us")->integer == e.first_time_us);
    CHECK(first.get("frames")->items.size() == e.first_frames);
  }
}

}  // namespace pickle_test
