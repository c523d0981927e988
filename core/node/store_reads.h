// Read-only queries over the node's applied store: messages by offset, message state per
// consumer group, dead letters, browsing, reads by offset (fetch), partition change feeds and
// the count behind push maintenance. Nothing here changes state or is logged; a follower
// answers from what it applied (a stale read), the leader from what it committed.
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "core/api/replies.h"
#include "core/common/result.h"
#include "core/qlog/row_hashes.h"
#include "core/state/store.h"
#include "io/env.h"

namespace queen {

class StoreReads {
 public:
  // Reads answer at most this many records per fetched partition, and this many bytes in all.
  static constexpr uint32_t kFetchRecordsMax = 10000;
  static constexpr uint64_t kFetchBytesMax = 64ull << 20;

  StoreReads(Env& env, const Store& store, RowHashes& hashes)
      : env_(env), store_(store), hashes_(hashes) {}

  // Up to `max` kept messages of the partition from offset `from` (retention's start at least).
  Result<std::vector<PopMessage>> read(PartitionId pid, Offset from, uint32_t max) const;
  // The offset of the first live (not deleted, not past retention) message with this hash
  // (none when a row's hashes cannot be read, as with a record that cannot be).
  std::optional<Offset> live_message(const PartitionState& p, const Hash128& txn_hash) const;

  DlqReply dlq(const DlqQueryCmd& cmd) const;
  MessagesReply message(const MessageGetCmd& cmd) const;
  // Newest first, across the matching partitions.
  MessagesReply browse(const MessageBrowseCmd& cmd) const;
  FetchReply fetch(const FetchCmd& cmd) const;
  FetchOffsetsReply fetch_offsets(const FetchOffsetsCmd& cmd) const;
  PartitionsChangedReply partitions_changed(const PartitionsChangedCmd& cmd) const;
  // The id of the dead letter of the partition's message with this transactionId, if any.
  std::optional<uint64_t> dlq_id_at(PartitionId pid, const Hash128& txn_hash) const;
  // The id of the dead letter whose message has this id, if any.
  std::optional<uint64_t> dlq_id_of(const Uuid& message_id) const;
  // The queue-mode group's dead letters of each partition of queue `q` that has any, counted
  // in one pass over the queue's dead letters.
  using DeadLetterCounts = std::map<PartitionId, uint64_t>;
  DeadLetterCounts dead_letters(QueueId q) const;
  // A partition's counts as the queue-mode group sees them; its dead letters from `dead`.
  PartitionStatsView partition_stats(const PartitionState& p, const DeadLetterCounts& dead) const;
  // Only the counts a queue sums (total, pending, processing): no dead letters, no times.
  PartitionStatsView partition_counts(const PartitionState& p) const;
  // Messages stored at or after `since_us` (push maintenance holds them back).
  uint64_t created_since(int64_t since_us) const;

 private:
  // Where the queue-mode group and every group with a cursor on the partition stand on `o`.
  MessageStateView state_of(const PartitionState& p, Offset o) const;

  Env& env_;
  const Store& store_;
  RowHashes& hashes_;
};

}  // namespace queen
