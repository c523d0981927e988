// What the edge fuzz targets share: a deterministic IdSource, so that an input replays the
// same way, and the check every parse result must pass (a command for the node, or an
// answer with a status below 600 whose non-empty body, unless it declares another content
// type, is JSON).
#pragma once

#include <nlohmann/json.hpp>

#include "core/common/assert.h"
#include "server/api/api.h"

namespace queen::fuzz {

class FixedIds final : public server::IdSource {
 public:
  int64_t now_ms() override { return 1700000000000; }
  uint64_t random_u64() override { return state_ = state_ * 6364136223846793005ull + 1; }

 private:
  uint64_t state_ = 1;
};

inline void check_parsed(const server::Parsed& parsed) {
  if (parsed.command) return;
  const server::HttpAnswer& a = parsed.answer;
  QUEEN_ASSERT(a.status >= 200 && a.status < 600, "answer with an impossible status");
  // A declared type (the console's page, plain-text metrics) is not JSON by design.
  if (a.body.empty() || !a.content_type.empty()) return;
  QUEEN_ASSERT(nlohmann::json::accept(a.body), "an answer body that is not JSON");
}

}  // namespace queen::fuzz
