#include <catch2/catch.hpp>

#include "coopsim/error.hpp"
#include "coopsim/params.hpp"

using namespace coopsim;

namespace {
std::vector<ParamDoc> docs() {
  return {{"size", ParamType::Bytes, "2MiB", "a size", {}},
          {"count", ParamType::Int, "3", "a count", {}},
          {"ratio", ParamType::Float, "0.5", "a ratio", {}},
          {"on", ParamType::Bool, "false", "a flag", {}},
          {"mode", ParamType::String, "a", "a mode", {"a", "b"}},
          {"delay", ParamType::Time, "10us", "a delay", {}}};
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
  CHECK_THROWS_WITH(Params("comp", nlohmann::json{{"sise", 1}}, d),
                    "comp.sise: unknown parameter (valid for comp: size, count, ratio, on, mode, delay)");
  CHECK_THROWS_WITH(Params("comp", nlohmann::json{{"size", "lots"}}, d),
                    "comp.size: expected a size such as 512MiB, 8GiB or plain bytes, got \"lots\"");
  CHECK_THROWS_WITH(Params("comp", nlohmann::json{{"mode", "c"}}, d), "comp.mode: invalid value 'c' (valid: a, b)");
  CHECK_THROWS_WITH(Params("comp", nlohmann::json{{"on", 3}}, d), "comp.on: expected true or false, got 3");
  CHECK_THROWS_AS(Params("comp", nlohmann::json::array(), d), ConfigError);
}
