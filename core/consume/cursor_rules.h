// What settles a message for a consumer group, and how a cursor moves over settled offsets:
// rules the engine's pops, acks and transactions share.
#pragma once

#include "core/state/cursor.h"

namespace queen {

inline bool is_done(const MsgState* s) {
  return s && (*s == MsgState::acked || *s == MsgState::dlq);
}

// Moves the cursor over the settled prefix: it never stops before an offset already done.
inline void advance_cursor(CursorRow& row) {
  bool moved = false;
  while (is_done(row.state_of(row.next))) {
    row.next = row.next.next();
    ++row.consumed_total;
    moved = true;
  }
  if (moved) row.handed_back.clear();
}

}  // namespace queen
