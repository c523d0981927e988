#include "core/api/command_codec.h"

#include <limits>
#include <type_traits>
#include <variant>

#include "core/api/binary.h"
#include "core/api/walk.h"

namespace queen {
template <class C>
void walk(C& c, ForwardedCommand& x) {
  c(x.request_id, x.remaining_ms, x.command);
}

// The same fields, borrowed: a command is encoded where it lies, payloads not copied.
struct ForwardedCommandRefs {
  RequestId& request_id;
  int64_t& remaining_ms;
  Command& command;
};
template <class C>
void walk(C& c, ForwardedCommandRefs& x) {
  c(x.request_id, x.remaining_ms, x.command);
}

namespace {

constexpr uint8_t kFormat = 1;

template <class T>
Bytes put(uint8_t tag, T& value, bool* refused) {
  Bytes out;
  ByteWriter w(&out);
  w.u8(kFormat);
  w.u8(tag);
  *refused = !put_walked(w, value);
  return out;
}

template <class T>
bool get(const uint8_t* data, size_t size, uint8_t tag, T* value) {
  ByteReader r(data, size);
  if (r.u8() != kFormat || r.u8() != tag) return false;
  return get_walked(r, value) && r.left() == 0;
}

constexpr uint8_t kCommandTag = 1;
constexpr uint8_t kReplyTag = 2;

}  // namespace

Bytes encode_command(const ForwardedCommand& command) {
  return encode_command(command.request_id, command.remaining_ms, command.command);
}

Bytes encode_command(const RequestId& request_id, int64_t remaining_ms, const Command& command) {
  bool refused = false;
  // The walk takes fields by reference for Get's sake; Put only reads them.
  ForwardedCommandRefs refs{const_cast<RequestId&>(request_id), remaining_ms,
                            const_cast<Command&>(command)};
  return put(kCommandTag, refs, &refused);
}

std::optional<ForwardedCommand> decode_command(const uint8_t* data, size_t size) {
  ForwardedCommand command;
  if (!get(data, size, kCommandTag, &command)) return std::nullopt;
  return command;
}

Bytes encode_reply(const Reply& reply) {
  bool refused = false;
  Bytes out = put(kReplyTag, const_cast<Reply&>(reply).body, &refused);
  if (!refused) return out;
  Reply error{ErrorReply{api::Errc::internal, "this answer is not forwarded", 0, 0}};
  return put(kReplyTag, error.body, &refused);
}

std::optional<Reply> decode_reply(const uint8_t* data, size_t size) {
  Reply reply;
  if (!get(data, size, kReplyTag, &reply.body)) return std::nullopt;
  return reply;
}

}  // namespace queen
