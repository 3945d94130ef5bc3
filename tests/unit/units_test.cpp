#include <catch2/catch.hpp>

#include "coopsim/params.hpp"
#include "coopsim/units.hpp"

using namespace coopsim;

TEST_CASE("sizes parse in binary, SI and plain forms", "[units]") {
  CHECK(parse_bytes("8GiB")->value == 8ULL << 30);
  CHECK(parse_bytes("512MB")->value == 512'000'000ULL);
  CHECK(parse_bytes("4096")->value == 4096);
  CHECK(parse_bytes(" 64 KiB ")->value == 65536);
  CHECK(parse_bytes("1.5GiB")->value == 3ULL << 29);
  CHECK(parse_bytes("0")->value == 0);
}

TEST_CASE("malformed or overflowing sizes are rejected", "[units]") {
  CHECK_FALSE(parse_bytes(""));
  CHECK_FALSE(parse_bytes("GiB"));
  CHECK_FALSE(parse_bytes("-5"));
  CHECK_FALSE(parse_bytes("12XB"));
  CHECK_FALSE(parse_bytes("1.2.3"));
  CHECK_FALSE(parse_bytes("99999999999999999999999"));
  CHECK_FALSE(parse_bytes("20000000TiB"));
}

TEST_CASE("round_up rounds to the unit and saturates", "[units]") {
  CHECK(round_up(1, 512) == 512);
  CHECK(round_up(512, 512) == 512);
  CHECK(round_up(513, 512) == 1024);
  CHECK(round_up(~0ULL - 3, 512) == ~0ULL);
}

TEST_CASE("sizes and times print with units", "[units]") {
  CHECK(format_bytes(Bytes{512}) == "512 B");
  CHECK(format_bytes(Bytes{3ULL << 29}) == "1.50 GiB");
  CHECK(format_time(SimTime{1500}) == "1.500 us");
  CHECK(format_time(SimTime{2'000'000'000}) == "2.000 s");
}

TEST_CASE("durations parse with units", "[units]") {
  CHECK(parse_time("10us")->count() == 10'000);
  CHECK(parse_time("2.5ms")->count() == 2'500'000);
  CHECK(parse_time("7")->count() == 7);
  CHECK_FALSE(parse_time("5 parsecs"));
  CHECK_FALSE(parse_time("x"));
}
