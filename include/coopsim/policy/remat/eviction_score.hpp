// The names of the eviction scores (their formulas: victim.hpp), apart from the victim search so
// that the Policy interface can name one (RuntimeRules) without the search.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace coopsim {

enum class EvictionScore : std::uint8_t { Dtr, DtrEq, DtrLocal, Lru, Largest, Msps, Random, Dte, Coop };

std::optional<EvictionScore> parse_eviction_score(std::string_view name);
std::string_view to_string(EvictionScore s);

}  // namespace coopsim
