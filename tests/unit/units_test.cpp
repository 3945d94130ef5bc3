#include <catch2/catch.hpp>

#include "coopsim/base/params.hpp"
#include "coopsim/base/units.hpp"

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
  CHECK(format_bytes(Bytes{~0ULL - 1}) == "16777216.00 TiB");
  CHECK(format_bytes(Bytes{~0ULL}) == "at least 16777216.00 TiB (saturated)");  // a saturated sum
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

TEST_CASE("a fraction of a byte is not a size", "[units]") {
  CHECK_FALSE(parse_bytes("0.5"));
  CHECK_FALSE(parse_bytes("1.5B"));
  CHECK(parse_bytes("4096.0")->value == 4096);
  CHECK(parse_bytes("0.5KiB")->value == 512);
}

TEST_CASE("budgets: plain numbers below 1024 are refused with a hint", "[units][budget]") {
  const auto problem = [](const char* text, BudgetHint hint = BudgetHint::Percent) {
    return parse_budget(text, hint).problem;
  };
  CHECK(problem("0.5") == "'0.5' has no unit; did you mean 50%? (plain numbers below 1024 are not taken as bytes)");
  CHECK(problem("1") ==
        "'1' has no unit; did you mean 100%? (plain numbers below 1024 are not taken as bytes; "
        "write 1B for 1 byte)");
  CHECK(problem("12") ==
        "'12' has no unit; did you mean 12GiB or 12%? (plain numbers below 1024 are not taken as "
        "bytes; write 12B for 12 bytes)");
  CHECK(problem("1.5") ==
        "'1.5' has no unit; did you mean 1.5GiB or 1.5%? (plain numbers below 1024 are not taken as bytes)");
  CHECK(problem("0.5", BudgetHint::Ratio) ==
        "'0.5' has no unit; did you mean {\"ratios\": [0.5]}? (plain numbers below 1024 are not taken as bytes)");
  CHECK(problem("12", BudgetHint::Ratio) ==
        "'12' has no unit; did you mean \"12GiB\"? (plain numbers below 1024 are not taken as bytes; write 12B for "
        "12 bytes)");
  CHECK(problem("2048.5") == "'2048.5' is not a whole number of bytes");
  CHECK(problem("lots") == "'lots' is not a size (e.g. 8GiB, 512MB, 1048576) or a percentage (e.g. 40%)");
  CHECK(problem("40%", BudgetHint::Ratio) == "'40%' is not a size (e.g. 8GiB, 512MB, 1048576)");
  CHECK(problem("0%") == "a percentage of the trace's peak must be greater than 0% and at most 1000000%, got '0%'");
  CHECK(problem("1e2%") == "'1e2%' is not a percentage (e.g. 40%, 12.5%)");
  CHECK(problem("-5%") == "'-5%' is not a percentage (e.g. 40%, 12.5%)");
  CHECK(parse_budget("12B", BudgetHint::Percent).bytes->value == 12);
  CHECK(parse_budget("1024", BudgetHint::Percent).bytes->value == 1024);
  CHECK(parse_budget("0", BudgetHint::Percent).bytes->value == 0);  // refused later: "must be greater than 0"
  CHECK(*parse_budget("12.5%", BudgetHint::Percent).percent == 12.5);
}

TEST_CASE("a percentage of the peak that gives no byte names the peak", "[units][budget]") {
  CHECK(percent_of_peak(50, Bytes{1000}, "--budget").value == 500);
  CHECK(percent_of_peak(0.15, Bytes{1000}, "--budget").value == 1);  // 1.5 bytes, rounded down
  CHECK_THROWS_WITH(percent_of_peak(0.0001, Bytes{123456}, "--budget"),
                    "--budget: 0.0001% of the trace's peak live bytes (123456 B) is less than one byte; give a "
                    "larger percentage or a size");
  CHECK_THROWS_WITH(percent_of_peak(1e-7, Bytes{123456}, "--budget"),  // written as typed, not 1e-07
                    "--budget: 0.0000001% of the trace's peak live bytes (123456 B) is less than one byte; give a "
                    "larger percentage or a size");
  CHECK_THROWS_WITH(percent_of_peak(1.5e-9, Bytes{123456}, "--budget"),
                    "--budget: 0.0000000015% of the trace's peak live bytes (123456 B) is less than one byte; give a "
                    "larger percentage or a size");
  CHECK_THROWS_WITH(percent_of_peak(200, Bytes{~0ULL}, "--budget"),
                    "--budget: 200% of the trace's peak live bytes (18446744073709551615 B) is more than 2^64 - 1 "
                    "bytes; give a smaller percentage or a size");
  CHECK_THROWS_WITH(percent_of_peak(50, Bytes{0}, "--budget"),
                    "--budget: the trace's peak live bytes are 0: give a size");
  CHECK_FALSE(scale_bytes(0.5, Bytes{1}));
  CHECK(scale_bytes(0.5, Bytes{3})->value == 1);
  CHECK_FALSE(scale_bytes(1000, Bytes{~0ULL}));
}
