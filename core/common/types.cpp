#include "core/common/types.h"

namespace queen {

void uuid_to_chars(const Uuid& u, char* out) {
  static const char* kHex = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) *out++ = '-';
    *out++ = kHex[u.bytes[i] >> 4];
    *out++ = kHex[u.bytes[i] & 15];
  }
}

std::string uuid_to_string(const Uuid& u) {
  std::string s(kUuidChars, '\0');
  uuid_to_chars(u, s.data());
  return s;
}

static int hex_val(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool uuid_from_string(const std::string& s, Uuid* out) {
  if (s.size() != 36) return false;
  int bi = 0;
  for (size_t i = 0; i < s.size();) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (s[i] != '-') return false;
      ++i;
      continue;
    }
    int h = hex_val(s[i]), l = hex_val(s[i + 1]);
    if (h < 0 || l < 0) return false;
    out->bytes[bi++] = static_cast<uint8_t>(h * 16 + l);
    i += 2;
  }
  return bi == 16;
}

Uuid make_uuid_v7(int64_t unix_ms, uint64_t rand_a, uint64_t rand_b) {
  Uuid u;
  auto ms = static_cast<uint64_t>(unix_ms);
  for (int i = 0; i < 6; ++i) u.bytes[i] = static_cast<uint8_t>(ms >> (40 - 8 * i));
  u.bytes[6] = static_cast<uint8_t>(0x70 | ((rand_a >> 8) & 0x0f));
  u.bytes[7] = static_cast<uint8_t>(rand_a);
  u.bytes[8] = static_cast<uint8_t>(0x80 | ((rand_b >> 56) & 0x3f));
  for (int i = 9; i < 16; ++i) u.bytes[i] = static_cast<uint8_t>(rand_b >> (8 * (15 - i)));
  return u;
}

bool uuid_successor(const Uuid& u, Uuid* out) {
  *out = u;
  for (int i = 15; i >= 9; --i) {
    if (++out->bytes[i] != 0) return true;
  }
  uint8_t low = static_cast<uint8_t>((out->bytes[8] & 0x3f) + 1);
  if (low > 0x3f) return false;
  out->bytes[8] = static_cast<uint8_t>((out->bytes[8] & 0xc0) | low);
  return true;
}

}  // namespace queen
