// Checked component parameters: unknown keys and mistyped values are ConfigErrors naming the
// key ("pytorch.max_split_size"); defaults come from the ParamDoc list only.
#include "coopsim/base/params.hpp"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <string_view>

#include "coopsim/base/error.hpp"
#include "coopsim/base/text.hpp"

namespace coopsim {

std::string_view to_string(ParamType t) {
  switch (t) {
    case ParamType::Bytes: return "bytes";
    case ParamType::Int: return "int";
    case ParamType::Float: return "float";
    case ParamType::Bool: return "bool";
    case ParamType::String: return "string";
    case ParamType::Time: return "time";
  }
  return "?";
}

std::optional<SimTime> parse_time(std::string_view text) {
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) return std::nullopt;
  double v = 0;
  try {
    v = std::stod(std::string(text.substr(0, i)));
  } catch (...) {
    return std::nullopt;
  }
  std::string_view unit = text.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  double scale = 1;
  if (unit.empty() || unit == "ns")
    scale = 1;
  else if (unit == "us")
    scale = 1e3;
  else if (unit == "ms")
    scale = 1e6;
  else if (unit == "s")
    scale = 1e9;
  else
    return std::nullopt;
  const double ns = v * scale;
  if (!std::isfinite(ns) || ns > 9.2e18) return std::nullopt;
  return SimTime{static_cast<std::int64_t>(std::llround(ns))};
}

nlohmann::json parse_override_value(const std::string& text) {
  // Parsed without exceptions: most values are bare words ("simrd", "dtr-eq"), and a thrown
  // parse error costs more than the rest of a short run's start. A number beyond double ("1e999")
  // fails too and is kept as text, so the parameter's type check names the key ("expected a number
  // within the range of a double") instead of the JSON reader failing.
  nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!value.is_discarded() && !value.is_object() && !value.is_array()) return value;
  return text;
}

namespace {

std::string shown(const nlohmann::json& v) { return shown_json(v); }

constexpr std::int64_t kIntMin = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kIntMax = std::numeric_limits<std::int64_t>::max();

// An integer that fits int64, from a JSON integer or decimal text; nullopt otherwise. `too_big`
// tells a value out of range (2^63, "99999999999999999999") from one that is no integer.
std::optional<std::int64_t> int_value(const nlohmann::json& v, bool& too_big) {
  too_big = false;
  if (v.is_number_unsigned()) {
    too_big = v.get<std::uint64_t>() > static_cast<std::uint64_t>(kIntMax);
    if (too_big) return std::nullopt;
  }
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_number_float()) {
    // 1e30 parses as a double: out of range, not "not an integer", when it is whole.
    const double d = v.get<double>();
    too_big = d == std::floor(d) && (d >= 9223372036854775808.0 || d < -9223372036854775808.0);
    return std::nullopt;
  }
  if (!v.is_string()) return std::nullopt;
  const auto& s = v.get_ref<const std::string&>();
  std::int64_t x = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (end != s.data() + s.size()) return std::nullopt;
  too_big = ec == std::errc::result_out_of_range;
  if (ec != std::errc{}) return std::nullopt;
  return x;
}

std::string valid_keys(std::span<const ParamDoc> docs) {
  std::string out;
  for (const auto& d : docs) {
    if (!out.empty()) out += ", ";
    out += d.key;
  }
  return out.empty() ? "none" : out;
}

// Convert a JSON value (given by the user or parsed from a default string) to the canonical
// JSON form of its type; throws ConfigError naming `key`.
nlohmann::json canonical(const ParamDoc& d, const nlohmann::json& v, const std::string& key) {
  auto bad = [&](const std::string& what) { return ConfigError(key, "expected " + what + ", got " + shown(v)); };
  switch (d.type) {
    case ParamType::Bytes: {
      if (v.is_number_unsigned()) return v.get<std::uint64_t>();
      if (v.is_number_integer()) {
        if (v.get<std::int64_t>() < 0) throw bad("a non-negative size");
        return v.get<std::uint64_t>();
      }
      if (v.is_string()) {
        if (auto b = parse_bytes(v.get<std::string>())) return b->value;
      }
      if (v.is_number_float() && v.get<double>() >= 18446744073709551616.0) {
        throw bad("a size of at most 18446744073709551615 bytes (16 EiB)");
      }
      throw bad("a size such as 512MiB, 8GiB or plain bytes");
    }
    case ParamType::Int: {
      bool too_big = false;
      if (const auto x = int_value(v, too_big)) return *x;
      if (too_big) throw bad(fmt::format("an integer from {} to {}", kIntMin, kIntMax));
      throw bad("an integer");
    }
    case ParamType::Float: {
      if (v.is_number()) return v.get<double>();  // always finite: the JSON reader refuses 1e999
      if (v.is_string()) {
        const auto& s = v.get_ref<const std::string&>();
        double x = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
        if (end == s.data() + s.size() && ec == std::errc::result_out_of_range)
          throw bad("a number within the range of a double");
        if (end == s.data() + s.size() && ec == std::errc{} && std::isfinite(x)) return x;
      }
      throw bad("a number");
    }
    case ParamType::Bool: {
      if (v.is_boolean()) return v.get<bool>();
      if (v.is_string()) {
        const auto s = v.get<std::string>();
        if (s == "true" || s == "1" || s == "on" || s == "yes") return true;
        if (s == "false" || s == "0" || s == "off" || s == "no") return false;
      }
      throw bad("true or false");
    }
    case ParamType::Time: {
      bool too_big = false;
      if (const auto x = int_value(v, too_big); x && !v.is_string()) {
        if (*x >= 0) return *x;
        throw bad("a non-negative duration");
      }
      if (v.is_string()) {
        if (auto t = parse_time(v.get<std::string>())) return t->count();
      }
      if (too_big || (v.is_number() && v.get<double>() > 9.2e18)) {
        throw bad(fmt::format("a duration of at most {} ns (about 292 years)", kIntMax));
      }
      throw bad("a duration such as 10us, 2ms or plain nanoseconds");
    }
    case ParamType::String: {
      if (!v.is_string()) throw bad("a string");
      const auto s = v.get<std::string>();
      if (!d.choices.empty()) {
        bool ok = false;
        std::string list;
        for (const auto& c : d.choices) {
          ok = ok || c == s;
          list += (list.empty() ? "" : ", ") + c;
        }
        if (!ok) throw ConfigError(key, "invalid value " + quote_excerpt(s) + " (valid: " + list + ")");
      }
      return s;
    }
  }
  throw bad("a value");
}

}  // namespace

Params::Params(std::string component, std::span<const ParamDoc> docs)
    : Params(std::move(component), nlohmann::json::object(), docs) {}

Params::Params(std::string component, const nlohmann::json& object, std::span<const ParamDoc> docs)
    : component_(std::move(component)), given_(nlohmann::json::object()), docs_(docs.begin(), docs.end()) {
  if (!object.is_null() && !object.is_object()) {
    throw ConfigError(component_, "expected an object of parameters, got " + shown(object));
  }
  if (object.is_null()) return;
  for (const auto& [k, v] : object.items()) {
    const ParamDoc* found = nullptr;
    for (const auto& d : docs_) {
      if (d.key == k) found = &d;
    }
    const std::string key = component_.empty() ? excerpt(k) : component_ + "." + excerpt(k);
    if (found == nullptr) {
      // Keys renamed so that each word has one meaning (docs/architecture.md, "Names").
      static constexpr std::array<std::array<std::string_view, 3>, 1> kRenamed{{{"engine", "plan_checks", "residency_checks"}}};
      for (const auto& [component, old_key, new_key] : kRenamed) {
        if (component_ == component && k == old_key) {
          throw ConfigError(key, fmt::format("unknown parameter: renamed {}.{}", component, new_key));
        }
      }
      std::vector<std::string> names;
      for (const auto& d : docs_) names.emplace_back(d.key);
      const std::string guess = closest_name(k, names);
      throw ConfigError(key, "unknown parameter (valid for " + component_ + ": " + valid_keys(docs_) + ")" +
                                 (guess.empty() ? "" : "; did you mean '" + guess + "'?"));
    }
    given_[k] = canonical(*found, v, key);
  }
}

const ParamDoc& Params::doc(std::string_view key) const {
  for (const auto& d : docs_) {
    if (d.key == key) return d;
  }
  throw std::logic_error("undocumented parameter " + component_ + "." + std::string(key));
}

nlohmann::json Params::value_of(const ParamDoc& d) const {
  if (auto it = given_.find(d.key); it != given_.end()) return *it;
  return canonical(d, nlohmann::json(d.default_value), component_.empty() ? d.key : component_ + "." + d.key);
}

bool Params::is_set(std::string_view key) const { return given_.contains(std::string(key)); }

Bytes Params::get_bytes(std::string_view key) const { return Bytes{value_of(doc(key)).get<std::uint64_t>()}; }
std::int64_t Params::get_int(std::string_view key) const { return value_of(doc(key)).get<std::int64_t>(); }
double Params::get_float(std::string_view key) const { return value_of(doc(key)).get<double>(); }
bool Params::get_bool(std::string_view key) const { return value_of(doc(key)).get<bool>(); }
std::string Params::get_string(std::string_view key) const { return value_of(doc(key)).get<std::string>(); }
SimTime Params::get_time(std::string_view key) const { return SimTime{value_of(doc(key)).get<std::int64_t>()}; }

nlohmann::json Params::resolved() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& d : docs_) out[d.key] = value_of(d);
  return out;
}

}  // namespace coopsim
