// Fuzz target: what a peer sends. The Raft message decoder, the snapshot manifest a chunk
// carries, and forwarded commands and replies: never a crash; whatever is accepted
// round-trips (a forwarded command or reply to the very same bytes).
#include <cstddef>
#include <cstdint>

#include "core/api/command_codec.h"
#include "core/common/assert.h"
#include "core/node/snapshot.h"
#include "core/raft/raft.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace queen::raft;
  Message m;
  if (decode_message(data, size, &m)) {
    queen::Bytes again = encode_message(m);
    Message twice;
    QUEEN_ASSERT(decode_message(again.data(), again.size(), &twice) && twice == m,
                 "message does not round-trip");
  }
  auto manifest = queen::decode_manifest(data, size);
  if (manifest.ok()) {
    queen::Bytes again = queen::encode_manifest(manifest.value());
    auto twice = queen::decode_manifest(again.data(), again.size());
    QUEEN_ASSERT(twice.ok() && twice.value() == manifest.value(), "manifest does not round-trip");
    (void)queen::chunk_parts(manifest.value(), 0, 1u << 20);  // sizes may overflow: no crash
  }
  if (auto command = queen::decode_command(data, size)) {
    queen::Bytes again = queen::encode_command(*command);
    QUEEN_ASSERT(again == queen::Bytes(data, data + size), "command does not round-trip");
  }
  if (auto reply = queen::decode_reply(data, size)) {
    queen::Bytes again = queen::encode_reply(*reply);
    QUEEN_ASSERT(again == queen::Bytes(data, data + size), "reply does not round-trip");
  }
  return 0;
}
