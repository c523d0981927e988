// Payload encryption at rest, the core's side of a queue's encryptionEnabled option. The
// planner seals the payload of every message it plans for an encrypted queue (pushes, the
// pushes of transactions, fired timers, DLQ replays) through Env::seal_payload before the
// message is framed; the readers (pop, message browse and get, the DLQ) hand back what
// Env::open_payload makes of a sealed payload. The cipher, its key and its randomness belong
// to the environment: the server's is AES-256-GCM (io/real/payload_cipher.h), the
// simulator's a deterministic stand-in.
//
// Contract:
// - A payload of an encrypted queue is never framed in the clear: when the environment
//   cannot seal it, the whole push is refused before anything of it is planned.
// - Opening is decided by the stored text's shape (it starts with kSealedPayloadPrefix), not
//   by the queue's current options: what was sealed still opens after encryption is turned
//   off, and what was stored before it was turned on reads as stored.
// - A sealed payload that does not open (another key, no key, a changed byte) is handed back
//   as stored, the envelope itself, as the reference broker does. Never a guess.
#pragma once

#include <string>
#include <string_view>

#include "io/env.h"

namespace queen {

inline constexpr std::string_view kSealedPayloadPrefix = "{\"encrypted\":";

inline bool looks_sealed(std::string_view stored) {
  return stored.starts_with(kSealedPayloadPrefix);
}

// The payload a reader sees for the stored text of a frame.
inline std::string readable_payload(Env& env, std::string_view stored) {
  if (!looks_sealed(stored)) return std::string(stored);
  auto opened = env.open_payload(stored);
  if (!opened.ok()) return std::string(stored);
  return std::move(opened.value());
}

// The same for a stored text the caller gives up: not sealed, it is moved, not copied.
inline std::string readable_payload(Env& env, std::string&& stored) {
  if (!looks_sealed(stored)) return std::move(stored);
  return readable_payload(env, std::string_view(stored));
}

}  // namespace queen
