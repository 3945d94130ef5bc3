// Text helpers for what comes from inputs: error messages that quote input bytes, and strings
// that must be UTF-8 before they reach JSON or a trace file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace coopsim {

// `s` with every control character (below 0x20, and 0x7F) and every byte that begins no
// well-formed UTF-8 sequence written as \xNN, so that text taken from an input (e.g. a JSON
// library's "last read" token) keeps an error message on one line, in UTF-8.
std::string one_line(std::string_view s);

// How much of an input an error message quotes (quote_excerpt, excerpt): enough to recognise the
// value, never the whole of a 10 MB line.
inline constexpr std::size_t kExcerptBytes = 80;

// `s` for an error message: control characters as \xNN (one_line) and, when `s` is longer than
// `max` bytes, its first `max` bytes (cut on a UTF-8 boundary) followed by "... (N bytes)" with
// N the full length. The result never depends on more than the first `max` bytes plus the size.
std::string excerpt(std::string_view s, std::size_t max = kExcerptBytes);

// `message` with the token a JSON library quotes from its input ("...; last read: '<token>'",
// nlohmann's parse errors, and "number overflow parsing '<literal>'" for a number beyond a double)
// cut like excerpt() when it is longer than kExcerptBytes: for an unterminated string that token
// is the rest of the line, for a 100,000-digit number the whole number. Other text is left as it is.
std::string cut_last_read(std::string_view message);

// Optimal-string-alignment distance (Levenshtein plus adjacent transpositions), ignoring ASCII
// case: "swep" -> "sweep" is 1, "plna" -> "plan" is 1, "JSON" -> "json" is 0.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate `word` most likely mistypes, for "did you mean ...?": the nearest by
// edit_distance when that distance is at most 2 and at most a third of the candidate's length
// (so "-x" suggests nothing among one-letter options), else the one candidate that `word` (3
// characters or more after leading dashes) begins. Empty when none is close, and when two are
// equally close: a guess between them would mislead half the time.
std::string closest_name(std::string_view word, const std::vector<std::string>& candidates);

// 1-based line of byte `offset` in `text` (offsets past the end count to the end).
std::uint64_t line_of_offset(std::string_view text, std::size_t offset);

// A JSON library's message without its "[json.exception.parse_error.101] " prefix.
std::string_view json_message(std::string_view what);

// A JSON library's message about a number too large for a double ("[json.exception.out_of_range.
// 406] number overflow parsing '1e999'"), which carries no position: the message without its
// "[json.exception...] " prefix, and the offset in `text` where that literal first appears (0
// when it cannot be found).
std::pair<std::string, std::size_t> locate_json_overflow(std::string_view what, std::string_view text);

// Length (1 to 4) of the well-formed UTF-8 sequence that starts s[i], or 0 when none does.
std::size_t utf8_length(std::string_view s, std::size_t i);
// Whether `s` is well-formed UTF-8 (RFC 3629: no overlong forms, surrogates or code points
// above U+10FFFF).
bool is_utf8(std::string_view s);
// `s` with every byte that does not begin a well-formed UTF-8 sequence replaced by U+FFFD, as
// Python's errors="replace" decoder does per byte. Identity on well-formed input.
std::string to_utf8(std::string_view s);

}  // namespace coopsim
