#include "io/sim/payload_seal.h"

#include <xxhash.h>

#include <cstdint>

#include "io/sim/sim_env.h"

namespace queen::sim {
namespace {

constexpr uint64_t kSimKey = 0x5eed5ea1c0ffee11ull;
constexpr std::string_view kHead = "{\"encrypted\":\"";
constexpr std::string_view kIv = "\",\"iv\":\"";
constexpr std::string_view kTag = "\",\"authTag\":\"";
constexpr std::string_view kTail = "\"}";
constexpr size_t kWordHex = 16;

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void xor_stream(uint64_t iv, std::string* bytes) {
  for (size_t i = 0; i < bytes->size(); ++i) {
    uint64_t word = splitmix(kSimKey ^ iv ^ (i / 8));
    (*bytes)[i] = static_cast<char>((*bytes)[i] ^ static_cast<char>(word >> (8 * (i % 8))));
  }
}

uint64_t tag_of(uint64_t iv, std::string_view cipher) {
  return XXH3_64bits_withSeed(cipher.data(), cipher.size(), kSimKey ^ splitmix(iv));
}

std::string hex(std::string_view bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

std::string hex_word(uint64_t v) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(v >> (56 - 8 * i));
  return hex(bytes);
}

int nibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

bool unhex(std::string_view text, std::string* out) {
  if (text.size() % 2 != 0) return false;
  out->clear();
  for (size_t i = 0; i < text.size(); i += 2) {
    int hi = nibble(text[i]), lo = nibble(text[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi << 4 | lo));
  }
  return true;
}

bool unhex_word(std::string_view text, uint64_t* v) {
  std::string bytes;
  if (text.size() != kWordHex || !unhex(text, &bytes)) return false;
  *v = 0;
  for (unsigned char c : bytes) *v = *v << 8 | c;
  return true;
}

}  // namespace

std::string sim_seal(std::string_view plain) {
  uint64_t iv = XXH3_64bits(plain.data(), plain.size());
  std::string cipher(plain);
  xor_stream(iv, &cipher);
  return std::string(kHead) + hex(cipher) + std::string(kIv) + hex_word(iv) + std::string(kTag) +
         hex_word(tag_of(iv, cipher)) + std::string(kTail);
}

Result<std::string> sim_open(std::string_view sealed) {
  auto bad = [] { return make_error(Errc::corrupt, "not a sealed payload of the simulator"); };
  size_t fixed = kHead.size() + kIv.size() + kTag.size() + kTail.size() + 2 * kWordHex;
  if (sealed.size() < fixed || !sealed.starts_with(kHead) || !sealed.ends_with(kTail)) return bad();
  std::string_view body = sealed.substr(kHead.size(), sealed.size() - fixed);
  std::string_view rest = sealed.substr(kHead.size() + body.size());
  if (!rest.starts_with(kIv) || rest.substr(kIv.size() + kWordHex, kTag.size()) != kTag)
    return bad();
  uint64_t iv = 0, tag = 0;
  std::string cipher;
  if (!unhex(body, &cipher) || !unhex_word(rest.substr(kIv.size(), kWordHex), &iv) ||
      !unhex_word(rest.substr(kIv.size() + kWordHex + kTag.size(), kWordHex), &tag) ||
      tag_of(iv, cipher) != tag) {
    return bad();
  }
  xor_stream(iv, &cipher);
  return cipher;
}

Result<std::string> SimEnv::seal_payload(std::string_view plain) {
  return sim_seal(plain);
}

Result<std::string> SimEnv::open_payload(std::string_view sealed) {
  return sim_open(sealed);
}

}  // namespace queen::sim
