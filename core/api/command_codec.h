// The binary form of a prepared command and of its reply, as a follower forwards a command it
// prepared at its edge to the leader and the leader's answer comes back (QUEEN_RAFT_FWD_STREAMS).
// Both ends run the same build; the format is not stored.
//
// Contract:
// - Every field of every command and reply travels; decode(encode(x)) == x.
// - A decoder never reads past its input and refuses trailing bytes, an unknown kind, an
//   enum out of range, a bool that is not 0 or 1 and a count that cannot fit: nullopt.
// - MetricsReply does not travel (metrics are answered by the node asked): encode_reply
//   sends an ErrorReply in its place.
#pragma once

#include <optional>
#include <string>

#include "core/api/replies.h"
#include "core/common/bytes.h"

namespace queen {

// A command forwarded under the request id the follower's edge gave it; the leader's deadline
// is its own clock plus `remaining_ms`.
struct ForwardedCommand {
  RequestId request_id;
  int64_t remaining_ms = 0;
  Command command;
};

Bytes encode_command(const ForwardedCommand& command);
// The same bytes, from a command that stays where it is (a forward shares, not copies, it).
Bytes encode_command(const RequestId& request_id, int64_t remaining_ms, const Command& command);
std::optional<ForwardedCommand> decode_command(const uint8_t* data, size_t size);

Bytes encode_reply(const Reply& reply);
std::optional<Reply> decode_reply(const uint8_t* data, size_t size);

}  // namespace queen
