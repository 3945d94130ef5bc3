// Whole JSON documents coopsim reads (a run config, a sweep config, a sweep's sweep.json, its
// results.json and journal lines): one parser for all of them, so that they refuse the same
// things the same way. Invalid JSON, a number beyond a double (1e999, a 100,000-digit integer)
// and a key given twice in one object (JSON readers differ on which one wins: coopsim takes
// neither, as the trace loader does) are each an InputError "FILE:LINE: problem" with LINE the
// line of the problem and every quoted token cut to kExcerptBytes (text.hpp):
//
//   c.json:3: duplicate key 'budget'
//   c.json:2: invalid JSON: syntax error while parsing object separator - unexpected '}'; expected ':'
//   c.json:1: invalid JSON: number overflow parsing '99999999999999999999999999999999...' (100000 bytes)
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace coopsim {

// `text` parsed as one JSON document; `source` names it in messages (a path, or a path and line
// for one line of a journal: then `first_line` is that line's number and LINE counts from it).
nlohmann::json parse_json_document(std::string_view text, const std::string& source, std::uint64_t first_line = 1);
nlohmann::ordered_json parse_ordered_json_document(std::string_view text, const std::string& source,
                                                   std::uint64_t first_line = 1);

}  // namespace coopsim
