// Self-describing component parameters. Each component lists its ParamDocs (the one place where
// defaults live); Params is a checked view of the JSON object given for that component: unknown
// keys are rejected at construction with the list of valid keys, and typed getters fall back to
// the documented default.
#pragma once

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "coopsim/base/text.hpp"
#include "coopsim/base/units.hpp"

namespace coopsim {

enum class ParamType : std::uint8_t { Bytes, Int, Float, Bool, String, Time };

struct ParamDoc {
  std::string key;
  ParamType type = ParamType::String;
  std::string default_value;  // textual, as a user would write it ("512MiB", "true", "0")
  std::string help;
  std::vector<std::string> choices;  // for String: the allowed values (empty = any)
};

std::string_view to_string(ParamType t);

class Params {
 public:
  // `component` is used in error keys ("pytorch.max_split_size"). Throws ConfigError on an
  // unknown key, listing the valid ones, or on a value of the wrong type.
  Params(std::string component, const nlohmann::json& object, std::span<const ParamDoc> docs);
  // No parameters given: all defaults.
  Params(std::string component, std::span<const ParamDoc> docs);

  [[nodiscard]] Bytes get_bytes(std::string_view key) const;
  [[nodiscard]] std::int64_t get_int(std::string_view key) const;
  [[nodiscard]] double get_float(std::string_view key) const;
  [[nodiscard]] bool get_bool(std::string_view key) const;
  [[nodiscard]] std::string get_string(std::string_view key) const;
  [[nodiscard]] SimTime get_time(std::string_view key) const;  // "10us", "2ms", plain = ns
  [[nodiscard]] bool is_set(std::string_view key) const;       // given explicitly by the user

  // Every documented key with its effective value (given or default), for the report.
  [[nodiscard]] nlohmann::json resolved() const;
  [[nodiscard]] const std::string& component() const { return component_; }

 private:
  const ParamDoc& doc(std::string_view key) const;
  nlohmann::json value_of(const ParamDoc& d) const;  // given or parsed default, type-checked

  std::string component_;
  nlohmann::json given_;
  std::vector<ParamDoc> docs_;
};

namespace params_detail {
// Compact JSON text of `v`, except that a float that is not finite (a pickle's or Python json's
// NaN, inf) is written NaN, Infinity or -Infinity, as Python writes it, where JSON would say null.
template <class Json>
void render(const Json& v, std::string& out) {
  if (v.is_number_float() && !std::isfinite(v.template get<double>())) {
    const double d = v.template get<double>();
    out += std::isnan(d) ? "NaN" : d > 0 ? "Infinity" : "-Infinity";
  } else if (v.is_array()) {
    out += '[';
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i > 0) out += ',';
      render(v[i], out);
    }
    out += ']';
  } else if (v.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [key, value] : v.items()) {
      if (!first) out += ',';
      first = false;
      out += Json(key).dump(-1, ' ', false, Json::error_handler_t::replace) + ':';
      render(value, out);
    }
    out += '}';
  } else {
    out += v.dump(-1, ' ', false, Json::error_handler_t::replace);
  }
}
}  // namespace params_detail

// A JSON value as an error message shows it: compact JSON text (a float that is not finite as
// NaN, Infinity or -Infinity, never JSON's null), U+FFFD for bytes that are not UTF-8 (only
// command-line text can hold them), cut like excerpt() (text.hpp) so a huge value stays a short
// line.
template <class Json>
std::string shown_json(const Json& v) {
  std::string out;
  params_detail::render(v, out);
  return excerpt(out);
}

// The value of a command-line "key=value": JSON scalars (numbers, true/false, null, quoted
// strings) are taken as such, anything else (sizes like 8GiB, names, numbers beyond a double such
// as 1e999) as a plain string.
nlohmann::json parse_override_value(const std::string& text);

// Parse a duration: "10us", "2.5ms", "1s", "100ns", plain number = ns. nullopt when malformed.
std::optional<SimTime> parse_time(std::string_view text);

}  // namespace coopsim
