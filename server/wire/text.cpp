// UTF-8, percent-decoding, query strings and JSON depth (server/wire/text.h).
#include "server/wire/text.h"

#include <algorithm>

namespace queen::server {

size_t json_depth(std::string_view text, size_t limit) {
  size_t depth = 0, depth_max = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      depth_max = std::max(depth_max, ++depth);
      if (depth_max > limit) return depth_max;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return depth_max;
}

std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%') {
      if (i + 2 >= text.size()) return std::nullopt;
      int h = hex(text[i + 1]), l = hex(text[i + 2]);
      if (h < 0 || l < 0) return std::nullopt;
      out.push_back(static_cast<char>(h * 16 + l));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::optional<QueryParams> parse_query(std::string_view query) {
  QueryParams params;
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    auto key = percent_decode(pair.substr(0, eq), true);
    auto value = percent_decode(eq == std::string_view::npos ? "" : pair.substr(eq + 1), true);
    if (!key || !value || !valid_utf8(*key) || !valid_utf8(*value)) return std::nullopt;
    params.emplace(std::move(*key), std::move(*value));
  }
  return params;
}

bool valid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  size_t n = text.size(), i = 0;
  while (i < n) {
    unsigned char c = s[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

std::string utf8_lossy(std::string_view text) {
  if (valid_utf8(text)) return std::string(text);
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    // Keeps every valid sequence; each byte of an invalid one becomes '?'.
    for (size_t len = 4; len >= 1; --len) {
      if (i + len <= text.size() && valid_utf8(text.substr(i, len))) {
        out.append(text.substr(i, len));
        i += len - 1;
        break;
      }
      if (len == 1) out.push_back('?');
    }
  }
  return out;
}

}  // namespace queen::server
