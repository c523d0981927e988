// Fuzz target: the Raft peer-message decoder. Never a crash; an accepted message round-trips.
#include <cstddef>
#include <cstdint>

#include "core/common/assert.h"
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
  return 0;
}
