// Text on the wire: UTF-8 checks, percent-decoding of paths and query strings, and the JSON
// nesting depth a body is measured by before it is parsed.
//
// Contract: every function is total: malformed input gives nullopt or false, never an
// exception. Query parameters keep their first occurrence.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace queen::server {

// Decoded query parameters; the first occurrence of a name wins.
using QueryParams = std::map<std::string, std::string>;

std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space);
std::optional<QueryParams> parse_query(std::string_view query);
bool valid_utf8(std::string_view text);
// `text` with every byte that is not part of a valid UTF-8 sequence replaced by '?'.
std::string utf8_lossy(std::string_view text);
// JSON nesting depth of `text` (brackets outside strings), capped at `limit` + 1.
size_t json_depth(std::string_view text, size_t limit);

}  // namespace queen::server
