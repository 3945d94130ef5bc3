// Text helpers for what comes from inputs: error messages that quote input bytes, and strings
// that must be UTF-8 before they reach JSON or a trace file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace coopsim {

// `s` with every control character (below 0x20, and 0x7F) written as \xNN, so that text taken
// from an input (e.g. a JSON library's "last read" token) keeps an error message on one line.
std::string one_line(std::string_view s);

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
