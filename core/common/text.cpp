#include "core/common/text.h"

#include <charconv>

namespace queen {

std::string hex_u64(uint64_t v) {
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) out[static_cast<size_t>(i)] = "0123456789abcdef"[v & 15];
  return out;
}

bool split_host_port(std::string_view text, std::string* host, uint16_t* port) {
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  unsigned value = 0;
  const char* first = text.data() + colon + 1;
  const char* last = text.data() + text.size();
  auto [end, ec] = std::from_chars(first, last, value);
  if (ec != std::errc() || end != last || value == 0 || value > 65535) return false;
  *host = std::string(text.substr(0, colon));
  *port = static_cast<uint16_t>(value);
  return true;
}

}  // namespace queen
