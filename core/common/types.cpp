#include "core/common/types.h"

#include <array>

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

namespace {

// Each byte's value as a hex digit, or -1.
constexpr std::array<int8_t, 256> kHexValue = [] {
  std::array<int8_t, 256> t{};
  t.fill(-1);
  for (int c = 0; c < 10; ++c) t['0' + c] = static_cast<int8_t>(c);
  for (int c = 0; c < 6; ++c) {
    t['a' + c] = static_cast<int8_t>(10 + c);
    t['A' + c] = static_cast<int8_t>(10 + c);
  }
  return t;
}();

// Where each byte's two digits start in the 36 characters.
constexpr std::array<uint8_t, 16> kUuidDigitsAt = {0,  2,  4,  6,  9,  11, 14, 16,
                                                   19, 21, 24, 26, 28, 30, 32, 34};

}  // namespace

bool uuid_from_string(std::string_view s, Uuid* out) {
  if (s.size() != kUuidChars || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-')
    return false;
  int bad = 0;  // negative once a digit is not hex
  for (size_t i = 0; i < 16; ++i) {
    int h = kHexValue[static_cast<uint8_t>(s[kUuidDigitsAt[i]])];
    int l = kHexValue[static_cast<uint8_t>(s[kUuidDigitsAt[i] + 1])];
    bad |= h | l;
    out->bytes[i] = static_cast<uint8_t>(((h & 15) << 4) | (l & 15));
  }
  return bad >= 0;
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
