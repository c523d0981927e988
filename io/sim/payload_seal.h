// The simulator's payload sealing: a deterministic, reversible stand-in for the server's
// AES-256-GCM envelope (io/real/payload_cipher.h), so that simulated runs take the same
// seal-on-push and open-on-read paths of the core with no OpenSSL and no randomness (a seed
// replays to the same bytes).
//
// Format: {"encrypted":"<hex>","iv":"<16 hex>","authTag":"<16 hex>"}, the bytes XORed with a
// keystream derived from a fixed key and the iv (the xxh3 of the plaintext), the tag an xxh3
// over key, iv and ciphertext. Not a cipher: it hides nothing from anyone who reads this file.
//
// Contract: sim_open(sim_seal(p)) == p for every p; sim_open fails on any other text, and
// on a sealed text with a changed byte (up to the tag's 64 bits).
#pragma once

#include <string>
#include <string_view>

#include "core/common/result.h"

namespace queen::sim {

std::string sim_seal(std::string_view plain);
Result<std::string> sim_open(std::string_view sealed);

}  // namespace queen::sim
