// AES-256-GCM envelopes for the payloads of encrypted queues (OpenSSL). Owns the key
// (QUEEN_ENCRYPTION_KEY: 64 hex characters, 32 bytes) and the stored format, the reference
// broker's 1.x-compatible envelope, as compact JSON text:
//
//   {"encrypted":"<base64 ciphertext>","iv":"<base64, 16 bytes>","authTag":"<base64, 16 bytes>"}
//
// The plaintext is the payload's JSON text. seal() draws the 16-byte iv from RAND_bytes; as
// in the reference broker, its first 12 bytes are the GCM nonce and the last 4 are carried
// but unused. The tag is the full 16 bytes. A random 96-bit nonce keeps to NIST's bound of
// 2^32 seals per key: rotate the key well before a queue has seen four billion messages.
//
// Contract:
// - seal() returns an envelope or an error, never the plaintext.
// - open() returns the plaintext only when the tag verifies under this key: a changed byte
//   of the ciphertext, the nonce or the tag, another key, a shorter tag or another shape is
//   an error. An iv of 12 bytes (the nonce alone) is accepted too.
// - The key never appears in an error or a log line, and is wiped when the cipher is
//   destroyed. seal() and open() keep no state between calls: any thread may call them.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/common/result.h"

namespace queen::real {

constexpr size_t kPayloadKeyBytes = 32;
constexpr size_t kPayloadIvBytes = 16;     // stored
constexpr size_t kPayloadNonceBytes = 12;  // used as the GCM nonce
constexpr size_t kPayloadTagBytes = 16;

using PayloadKey = std::array<uint8_t, kPayloadKeyBytes>;

// Exactly 64 hex digits (either case) to a key; nullopt for anything else.
std::optional<PayloadKey> parse_payload_key(std::string_view hex);

class PayloadCipher {
 public:
  explicit PayloadCipher(const PayloadKey& key) : key_(key) {}
  ~PayloadCipher();
  PayloadCipher(const PayloadCipher&) = delete;
  PayloadCipher& operator=(const PayloadCipher&) = delete;

  Result<std::string> seal(std::string_view plain) const;
  Result<std::string> open(std::string_view envelope) const;

 private:
  PayloadKey key_;
};

}  // namespace queen::real
