// Retention: which messages a partition no longer keeps, decided on the leader and logged as
// EffRetention (watermarks that only move up; every node applies the same ones).
//
// Per partition of a queue:
// - retentionEnabled + retentionSeconds: every message older than that goes, consumed or not;
// - maxWaitTimeSeconds (whatever retentionEnabled says): likewise, for unconsumed messages
//   that waited that long;
// - retentionEnabled + completedRetentionSeconds: messages older than that which every group
//   of the queue has consumed (below the lowest committed cursor; nothing while a group of
//   the queue has no cursor on the partition, or the queue has no group).
// log_start is the first message kept. An append row (its transactionId hashes) stays for the
// longest of the queue's dedup window, completedRetentionSeconds and kRowsWindowMinS, so a
// retried push inside the window is still recognised: rows_start trails log_start.
//
// A watermark passes at most kRetentionRowsPerStepMax append rows per step; the next pass goes
// on. The scanner visits at most `visit_max` partitions per pass, resuming where it stopped, so
// one pass costs the same whatever the number of partitions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/state/entry.h"
#include "core/state/store.h"

namespace queen {

inline constexpr int64_t kRowsWindowMinS = 900;  // QUEEN_RAFT_TXN_WINDOW_MIN_S
// RETENTION_BATCH_SIZE: a watermark passes at most this many append rows per step.
inline constexpr size_t kRetentionRowsPerStepMax = 1000;

// The watermarks retention would move `p` to at `now_us` (the current ones when nothing goes);
// `rows_window_min_s` stands for kRowsWindowMinS (QUEEN_RAFT_TXN_WINDOW_MIN_S).
EffRetention retention_marks(const Store& store, const QueueState& q, const PartitionState& p,
                             const std::vector<std::string>& groups, int64_t now_us,
                             int64_t rows_window_min_s = kRowsWindowMinS);

// Whether `p` is idle and empty enough to be deleted: no message kept, no append row left
// (the dedup window has passed), no dead letter, and nothing appended or created for
// `idle_us`. Live leases and appends in flight are the caller's to check (the engine and the
// planner know them before the store does).
bool partition_idle(const Store& store, const PartitionState& p, int64_t now_us, int64_t idle_us);

struct RetentionPass {
  std::vector<Effect> effects;    // watermarks that move
  std::vector<PartitionId> idle;  // partitions to delete (see partition_idle)
};

class RetentionScanner {
 public:
  // A pass over at most `visit_max` partitions; `idle_us` 0 finds no idle partition.
  RetentionPass scan(const Store& store, int64_t now_us, uint32_t visit_max, int64_t idle_us,
                     int64_t rows_window_min_s = kRowsWindowMinS);

 private:
  PartitionId last_visited_;
};

}  // namespace queen
