#include <catch2/catch.hpp>

#include "coopsim/base/error.hpp"
#include "coopsim/base/params.hpp"

using namespace coopsim;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace params_test {

namespace {
std::vector<ParamDoc> docs() {
  return {{"size", ParamType::Bytes, "2MiB", "a size", {}},       {"count", ParamType::Int, "3", "a count", {}},
          {"ratio", ParamType::Float, "0.5", "a ratio", {}},      {"on", ParamType::Bool, "false", "a flag", {}},
          {"mode", ParamType::String, "a", "a mode", {"a", "b"}}, {"delay", ParamType::Time, "10us", "a delay", {}}};
}
}  // namespace

TEST_CASE("defaults come from the docs", "[params]") {
  const auto d = docs();
  Params p("comp", d);
  CHECK(p.get_bytes("size").value == 2ULL << 20);
  CHECK(p.get_int("count") == 3);
  CHECK(p.get_float("ratio") == 0.5);
  CHECK_FALSE(p.get_bool("on"));
  CHECK(p.get_string("mode") == "a");
  CHECK(p.get_time("delay").count() == 10'000);
  CHECK_FALSE(p.is_set("size"));
}

TEST_CASE("given values are converted and reported as resolved", "[params]") {
  const auto d = docs();
  Params p("comp", nlohmann::json{{"size", "1KiB"}, {"count", "7"}, {"on", "yes"}, {"mode", "b"}}, d);
  CHECK(p.get_bytes("size").value == 1024);
  CHECK(p.get_int("count") == 7);
  CHECK(p.get_bool("on"));
  CHECK(p.is_set("mode"));
  const auto r = p.resolved();
  CHECK(r["size"] == 1024);
  CHECK(r["ratio"] == 0.5);
}

TEST_CASE("unknown keys and bad values name the key", "[params]") {
  const auto d = docs();
  CHECK_THROWS_WITH(
      Params("comp", nlohmann::json{{"sise", 1}}, d),
      "comp.sise: unknown parameter (valid for comp: size, count, ratio, on, mode, delay); did you mean 'size'?");
  CHECK_THROWS_WITH(Params("comp", nlohmann::json{{"size", "lots"}}, d),
                    "comp.size: expected a size such as 512MiB, 8GiB or plain bytes, got \"lots\"");
  CHECK_THROWS_WITH(Params("comp", nlohmann::json{{"mode", "c"}}, d), "comp.mode: invalid value 'c' (valid: a, b)");
  CHECK_THROWS_WITH(Params("comp", nlohmann::json{{"on", 3}}, d), "comp.on: expected true or false, got 3");
  CHECK_THROWS_AS(Params("comp", nlohmann::json::array(), d), ConfigError);
}

TEST_CASE("numbers out of range name the key and never wrap", "[params]") {
  const auto d = docs();
  const auto error = [&](const nlohmann::json& given) {
    try {
      (void)Params("comp", given, d);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string int_range = "expected an integer from -9223372036854775808 to 9223372036854775807, got ";
  CHECK(error({{"count", 18446744073709551615ULL}}) == "comp.count: " + int_range + "18446744073709551615");
  CHECK(error({{"count", "99999999999999999999"}}) == "comp.count: " + int_range + "\"99999999999999999999\"");
  CHECK(error({{"count", 1e30}}) == "comp.count: " + int_range + "1e+30");
  CHECK(error({{"count", 2.5}}) == "comp.count: expected an integer, got 2.5");
  CHECK(error({{"ratio", "1e400"}}) == "comp.ratio: expected a number within the range of a double, got \"1e400\"");
  CHECK(error({{"ratio", "inf"}}) == "comp.ratio: expected a number, got \"inf\"");
  CHECK(error({{"size", -1}}) == "comp.size: expected a non-negative size, got -1");
  CHECK(error({{"size", 1e30}}) ==
        "comp.size: expected a size of at most 18446744073709551615 bytes (16 EiB), got 1e+30");
  CHECK(error({{"delay", 9223372036854775808ULL}}) ==
        "comp.delay: expected a duration of at most 9223372036854775807 ns (about 292 years), got 9223372036854775808");
  CHECK(error({{"delay", -5}}) == "comp.delay: expected a non-negative duration, got -5");
  // A value quoted in full would be a 10 MB line: the message shows 80 bytes and the length.
  CHECK(error({{"mode", std::string(1 << 20, 'z')}}) ==
        "comp.mode: invalid value '" + std::string(80, 'z') + "...' (1048576 bytes) (valid: a, b)");
  CHECK_THAT(
      error({{std::string(1 << 20, 'k'), 1}}),
      Catch::StartsWith("comp." + std::string(80, 'k') + "... (1048576 bytes): unknown parameter (valid for comp: "));
}

}  // namespace params_test
