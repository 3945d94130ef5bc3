// Self-describing component parameters. Each component lists its ParamDocs (the one place where
// defaults live); Params is a checked view of the JSON object given for that component: unknown
// keys are rejected at construction with the list of valid keys, and typed getters fall back to
// the documented default.
#pragma once

#include <nlohmann/json.hpp>

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

// A JSON value as an error message shows it: compact JSON text, U+FFFD for bytes that are not
// UTF-8 (only command-line text can hold them), cut like excerpt() (text.hpp) so a huge value
// stays a short line.
template <class Json>
std::string shown_json(const Json& v) {
  return excerpt(v.dump(-1, ' ', false, Json::error_handler_t::replace));
}

// The value of a command-line "key=value": JSON scalars (numbers, true/false, null, quoted
// strings) are taken as such, anything else (sizes like 8GiB, names, numbers beyond a double such
// as 1e999) as a plain string.
nlohmann::json parse_override_value(const std::string& text);

// Parse a duration: "10us", "2.5ms", "1s", "100ns", plain number = ns. nullopt when malformed.
std::optional<SimTime> parse_time(std::string_view text);

}  // namespace coopsim
