// An IdSource for the edge's unit tests: a fixed clock and a counter for randomness, so the
// ids and timestamps a parsed request carries are the same on every run.
#pragma once

#include <cstdint>

#include "server/api/api.h"

namespace queen::server {

class FixedIds final : public IdSource {
 public:
  int64_t now_ms() override { return 1700000000000; }
  uint64_t random_u64() override { return ++n_ * 0x9E3779B97F4A7C15ull; }

 private:
  uint64_t n_ = 0;
};

}  // namespace queen::server
