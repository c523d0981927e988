// A consumer group's cursor row on one partition: the cursor, the live (or last) lease, the
// retry counter and the settled offsets of the current batch. The consumption engine changes
// rows on the leader (a copy of each changed row, until the store applies it); checkpoints
// log rows and every node applies them to the store.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/api/replies.h"
#include "core/common/compact_vector.h"
#include "core/common/types.h"

namespace queen {

enum class MsgState : uint8_t {
  acked = 1,   // completed
  dlq = 2,     // moved to the dead-letter list
  failed = 3,  // failed within budget: the batch was handed back
  retried = 4  // status retry: the batch was handed back, no budget spent
};

struct CursorRow {
  Offset next;                  // every offset below is consumed by the group
  LeaseId lease_id;             // the live lease, or the last one (kept for repeated acks)
  int64_t lease_expires_us = 0; // 0 when released; live while now < lease_expires_us
  Offset batch_start;           // the current (or last) leased batch is [batch_start, batch_end)
  Offset batch_end;
  uint32_t retry_count = 0;     // failed acks spent on the current run of batches
  uint32_t delivery_attempt = 0;  // deliveries of the current batch's first offset
  // Sorted; offsets of the batch settled. Both lists are CompactVectors (8 bytes each where a
  // std::vector takes 24): a group on a million partitions holds a million rows, nearly all
  // with both lists empty.
  CompactVector<std::pair<Offset, MsgState>> settled;
  // Leases a failed or retry ack handed back since the cursor last moved, with the offset the
  // ack named: a repeat of that ack is answered as applied even after the partition was
  // leased again. At most kHandedBackMax, oldest dropped.
  CompactVector<std::pair<LeaseId, Offset>> handed_back;
  static constexpr size_t kHandedBackMax = 16;
  uint64_t consumed_total = 0;
  int64_t last_consumed_us = 0;

  bool lease_live(int64_t now_us) const {
    return lease_expires_us != 0 && now_us < lease_expires_us;
  }
  const MsgState* state_of(Offset o) const;
  void set_state(Offset o, MsgState s);
  bool operator==(const CursorRow&) const = default;
};

struct GroupMeta {
  SubscriptionMode mode = SubscriptionMode::all;
  int64_t from_us = 0;  // new_only / from_time: messages created at or after this instant
  bool operator==(const GroupMeta&) const = default;
};

}  // namespace queen
