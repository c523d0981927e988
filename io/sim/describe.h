// Short, deterministic one-line renderings of commands and replies for the simulator's
// trace: enough to follow a run (ids abbreviated, offsets and statuses in full), never an
// address or a wall-clock time.
#pragma once

#include <string>

#include "core/api/replies.h"

namespace queen::sim {

// The first 8 hex digits of a UUID's random tail (enough to tell ids apart in a trace).
std::string short_id(const Uuid& id);
std::string describe(const Command& command);
std::string describe(const Reply& reply);

}  // namespace queen::sim
