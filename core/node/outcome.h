// The binary form of a command's answer kept under its request id (EffRequestOutcome), so a
// retry under that id is answered the same after a restart or a leader change. Push,
// transaction, KV, lock and timer answers are kept; other kinds encode to nothing and stay in
// the leader's memory only (they are idempotent: configure, deletes, DLQ replay).
#pragma once

#include <optional>
#include <string>

#include "core/api/replies.h"

namespace queen {

// Empty when the reply's kind is not kept. A push answer keeps each run of results that
// follow each other (next message id, next offset, same partition and status) as the first
// one's status, message id, partition id, offset and error and a count (41 bytes a run); the
// names come back from the retried command. The other kinds keep every field of their reply.
// Every form is a walk of core/api/binary.h.
std::string encode_outcome(const Reply& reply);
std::optional<Reply> decode_outcome(const std::string& bytes);
// Fills the names a decoded push outcome left out from the command retried under its id.
void fill_outcome_names(const PushCmd& retried, Reply* reply);

}  // namespace queen
