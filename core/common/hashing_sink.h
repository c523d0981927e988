// HashingSink: a ByteSink that passes each piece on and sums it (xxh3-64) on the way, so a
// file written in pieces (a store checkpoint, the dedup rings) ends with the checksum of all
// it holds without being held whole.
#pragma once

#include <xxhash.h>

#include <cstdint>

#include "core/common/assert.h"
#include "core/common/bytes.h"

namespace queen {

class HashingSink final : public ByteSink {
 public:
  explicit HashingSink(ByteSink& next) : next_(next), state_(XXH3_createState()) {
    QUEEN_ASSERT(state_ != nullptr, "xxh3 state allocated");
    XXH3_64bits_reset(state_);
  }
  ~HashingSink() override { XXH3_freeState(state_); }
  HashingSink(const HashingSink&) = delete;
  HashingSink& operator=(const HashingSink&) = delete;
  void put(const uint8_t* data, size_t size) override {
    XXH3_64bits_update(state_, data, size);
    next_.put(data, size);
  }
  uint64_t digest() const { return XXH3_64bits_digest(state_); }

 private:
  ByteSink& next_;
  XXH3_state_t* state_;
};

}  // namespace queen
