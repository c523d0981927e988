// Times on the wire: ISO-8601 text in and out, in microseconds since the Unix epoch.
//
// Contract: format_iso_us writes UTC with six fractional digits and a trailing Z;
// parse_iso_us reads YYYY-MM-DD[(T| )HH:MM[:SS[.fraction]]][Z|(+|-)HH[:]MM] (no zone is UTC)
// and answers nullopt for anything else. Neither throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace queen::server {

std::string format_iso_us(int64_t unix_us);
// The same into `out`, which holds kIsoUsCharsMax characters; returns how many it wrote.
constexpr size_t kIsoUsCharsMax = 48;
size_t format_iso_us(int64_t unix_us, char* out);
std::optional<int64_t> parse_iso_us(std::string_view text);

}  // namespace queen::server
