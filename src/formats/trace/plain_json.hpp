// The trace header's JSON without nlohmann's parser, for the common case. Private to
// src/formats/trace.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string_view>

namespace coopsim::trace_detail {

// Builds the value nlohmann::json::parse(line) would, for a line that is one JSON object with no
// repeated key at its top level and in which every string is printable ASCII without escapes and
// every number an integer of at most 18 digits (so that strtoull/strtoll, which nlohmann uses,
// cannot overflow). Anything else, valid or not, gives nullopt, and the caller parses the line
// with nlohmann (and its error messages). A DTR log's imported header carries tens of KB of such
// integer tables; nlohmann's parse of them was a fifth of a short simrd-profile run.
std::optional<nlohmann::json> parse_plain_json_object(std::string_view line, int max_depth);

}  // namespace coopsim::trace_detail
