// Base64 of RFC 4648: the standard alphabet with '=' padding (payload envelopes) and the
// URL-safe alphabet without padding (JSON Web Tokens).
//
// Contract: decode() is strict. It refuses characters outside the alphabet, padding where
// the variant has none or in the wrong place, and trailing bits that are not zero, so every
// byte string has exactly one accepted text.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace queen::real {

enum class Base64 { standard, url };

std::string base64_encode(std::string_view bytes, Base64 variant = Base64::standard);
std::optional<std::string> base64_decode(std::string_view text, Base64 variant = Base64::standard);

}  // namespace queen::real
