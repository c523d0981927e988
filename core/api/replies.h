// The typed replies a node hands back for the commands of core/api/commands.h: the edge
// renders them (JSON and status codes, server/api), the simulator's checker reads them
// directly. An ErrorReply carries an error code of core/api/errc.h, never an HTTP status.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/api/commands.h"
#include "core/api/errc.h"

namespace queen {

// ---- replies ----

struct ErrorReply {
  api::Errc code = api::Errc::internal;
  std::string message;  // names the field or the reason
  int retry_after_s = 0;
  uint64_t leader = 0;  // a retry from a node that is not the leader: who is (0: unknown)
};

// buffered: stored while push maintenance is on, delivered once it is off.
enum class PushStatus : uint8_t { queued, duplicate, error, buffered };

struct PushResult {
  uint32_t index = 0;
  PushStatus status = PushStatus::queued;
  Uuid message_id;
  std::string transaction_id;
  std::string queue;
  std::string partition;
  PartitionId partition_id;
  Offset offset;
  std::string error;
};

struct PushReply {
  std::vector<PushResult> results;
  // The whole push was refused and nothing of it planned (a payload of an encrypted queue
  // that cannot be sealed); every result is then an error. Answered as this error.
  std::optional<ErrorReply> refused;
};

struct PopMessage {
  std::string queue;
  std::string partition;
  PartitionId partition_id;
  Offset offset;
  std::string transaction_id;
  Uuid message_id;
  std::string trace_id;
  int64_t created_us = 0;
  std::string payload;
  uint32_t delivery_attempt = 1;
  LeaseId lease_id;          // nil when auto-acked
  std::string producer_sub;  // empty: none
};

struct PopReply {
  std::string queue;
  std::string group;
  LeaseId lease_id;  // nil when auto-acked or empty
  uint32_t partitions_claimed = 0;
  std::vector<PopMessage> messages;  // empty: nothing to deliver
  std::string empty_reason;          // "no_available_partition", "partition_not_found", ...
};

struct AckResult {
  uint32_t index = 0;
  std::string transaction_id;
  bool success = false;
  std::string error;  // empty when none
  bool lease_released = false;
  bool dlq = false;
  bool noop = false;  // at or below the group's cursor already
  std::string queue;
  std::string partition;
};

struct AckReply {
  std::vector<AckResult> results;
};

struct ConfigureReply {
  std::string queue;
  QueueId queue_id;
  PartitionId default_partition_id;
  QueueOptions options;
};

struct HealthReply {
  std::string role;  // "leader" on a single node once recovered; follower, candidate
  uint64_t node_id = 0;
  uint64_t leader = 0;  // 0: none known
  bool settled = true;  // false while no leader is known or the leader is not yet serving
  uint64_t term = 0;
  uint64_t commit_index = 0;
  uint64_t applied_index = 0;
  uint64_t queues = 0;
  uint64_t partitions = 0;
  uint32_t cluster_version = 1;  // the cluster format entries are written in
  uint32_t format_max = 1;       // the highest this node reads
  bool fenced = false;           // its disk is not the one the cluster admitted it with
};

struct DlqRecord {
  uint64_t id = 0;
  std::string queue;
  std::string partition;
  PartitionId partition_id;
  std::string group;
  Offset offset;
  Uuid message_id;
  std::string transaction_id;
  std::string error;
  uint32_t retry_count = 0;
  int64_t failed_at_us = 0;
  std::string payload;
  int64_t created_us = 0;
  std::string producer_sub;
};

struct DlqReply {
  std::vector<DlqRecord> records;
  uint64_t total = 0;
};

struct KvRowView {
  std::string key;
  std::string value = "null";
  uint64_t version = 0;
  int64_t expires_us = 0;  // 0: forever
  int64_t updated_us = 0;
};

struct KvResult {
  uint32_t index = 0;
  KvOpKind op = KvOpKind::get;
  bool applied = false;
  std::string reason;  // exists | absent | version | limit | type
  bool found = false;
  KvRowView row;                // get, writes: the row after the op
  std::vector<KvRowView> rows;  // getMany, getPrefix
  std::vector<std::string> missing;
  bool truncated = false;
  std::string next_after;
};

struct KvReply {
  bool ok = true;  // false: a required precondition failed and nothing applied
  std::vector<KvResult> results;
  uint32_t failed_index = 0;
  std::string kv_reason;
  KvRowView failed_row;
};

struct LockHolder {
  uint32_t slot = 0;
  std::string owner;
  uint64_t token = 0;
  int64_t expires_us = 0;
  int64_t since_us = 0;    // when the permit was acquired (0: unknown)
  int64_t renewed_us = 0;  // when it was last written
};

struct LockResult {
  uint32_t index = 0;
  LockOpKind op = LockOpKind::acquire;
  bool ok = false;  // acquired / renewed / released
  bool already = false;
  std::string reason;  // held (every permit taken) | lost (the token no longer holds)
  std::string name;
  uint32_t slot = 0;
  uint64_t token = 0;
  std::string owner;
  int64_t expires_us = 0;
  std::vector<LockHolder> holders;
};

struct LockReply {
  std::vector<LockResult> results;
};

struct TimerResult {
  uint32_t index = 0;
  bool ok = false;
  std::string status;  // scheduled | rescheduled | cancelled | absent
  std::string queue;
  std::string timer_key;
  std::string txn;
  Uuid message_id;
  int64_t deliver_at_us = 0;
};

struct TimerReply {
  std::vector<TimerResult> results;
};

struct TimerView {
  std::string queue;
  std::string timer_key;
  std::string partition;
  std::string txn;
  Uuid message_id;
  int64_t deliver_at_us = 0;
  uint32_t attempts = 0;
  std::string payload;
};

struct TimerQueryReply {
  std::vector<TimerView> timers;
  uint64_t count = 0;
  bool found = false;
  bool truncated = false;  // a list stopped at its limit with more timers after it
};

enum class TxnResultType : uint8_t { ack, push, kv, timer, position };

struct TxnResult {
  uint32_t index = 0;
  TxnResultType type = TxnResultType::ack;
  uint32_t op_index = 0;
  bool success = true;
  AckResult ack;
  std::vector<PushResult> pushes;  // one per item of a push operation
  KvResult kv;
  TimerResult timer;
};

struct TxnReply {
  Uuid transaction_id;
  bool success = false;
  std::string reason;  // rejected_ack | duplicate | queue_not_found | kv_precondition | ...
  std::string error;   // starts with a code, e.g. "QDUP ..."
  std::vector<TxnResult> results;
  uint32_t failed_index = 0;  // kv_precondition
  std::string kv_reason;
  KvRowView failed_row;
};

struct LeaseExtendReply {
  LeaseId lease_id;
  bool success = false;
  std::string error;       // "Lease not found" | "Lease already expired"
  int64_t expires_us = 0;  // the earliest new expiry among the renewed partitions
  uint32_t renewed = 0;    // partitions of the lease renewed
};

struct GroupPartitionView {
  std::string queue;
  std::string partition;
  PartitionId partition_id;
  Offset cursor;            // next offset to consume
  uint64_t offset_lag = 0;  // messages not consumed yet
  int64_t time_lag_s = 0;   // age of the oldest unconsumed message
  bool lease_active = false;
  LeaseId lease_id;
  uint64_t total_consumed = 0;
  int64_t last_consumed_us = 0;
  int64_t oldest_unconsumed_us = 0;  // 0: nothing unconsumed
};

struct GroupView {
  std::string group;
  std::string queue;
  SubscriptionMode mode = SubscriptionMode::all;
  int64_t subscription_us = 0;
  uint32_t members = 0;  // partitions with a cursor row
  uint32_t partitions_with_lag = 0;
  uint64_t total_lag = 0;
  int64_t max_time_lag_s = 0;
  std::vector<GroupPartitionView> partitions;  // details only (a paged answer: the page)
  uint64_t partitions_matched = 0;             // a paged answer: the partitions its search matched
};

struct GroupsReply {
  std::vector<GroupView> groups;
  bool lagging = false;  // an answer to GroupListCmd::lagging_min_s: partitions that lag
};

struct GroupChangeReply {
  std::string group;  // empty: a queue deletion
  std::string queue;
  uint32_t partitions = 0;        // cursors deleted or moved
  bool metadata_deleted = false;  // a queue deletion: whether the queue existed
  // A seek's target (one partition's, to its end; else to the end or to a time).
  std::string partition;
  bool to_end = false;
  int64_t timestamp_us = 0;
  int64_t moved_to = -1;  // a partition seek: the offset the cursor was moved past (-1: none)
};

struct DlqReplayReply {
  bool success = false;
  std::string error;
  PushResult push;
};

// One partition's counts as the queue-mode group sees them (a queue get).
struct PartitionStatsView {
  std::string name;
  PartitionId id;
  int64_t created_us = 0;
  uint64_t total = 0;       // kept
  uint64_t pending = 0;     // not consumed and not leased
  uint64_t processing = 0;  // in a live lease
  uint64_t completed = 0;   // kept and consumed
  uint64_t dead_letter = 0;
  int64_t oldest_us = 0, newest_us = 0;  // creation of the oldest and newest kept (0: none)
};

struct QueueView {
  std::string name;
  QueueId id;
  QueueOptions options;
  int64_t created_us = 0;
  uint32_t partition_count = 0;
  uint64_t messages = 0;    // kept: appended, less deleted and past retention
  uint64_t pending = 0;     // not consumed by queue mode
  uint64_t processing = 0;  // of those, in a live queue-mode lease
  uint64_t dlq = 0;
  std::vector<PartitionStatsView> partitions;  // a get only (a paged get: the page)
  uint64_t partitions_matched = 0;             // a paged get: the partitions its search matched
};

struct QueuesReply {
  std::vector<QueueView> queues;
};

// Where one consumer group stands on a message.
struct MessageGroupView {
  std::string group;
  bool consumed = false;         // the group's cursor passed it (or it is settled)
  int64_t lease_expires_us = 0;  // a live lease on it, else 0
};

// A message's state: as the queue-mode group sees it, and for every group on its partition.
struct MessageStateView {
  std::string status = "pending";  // pending | processing | completed | dead_letter
  int64_t lease_expires_us = 0;
  std::string error;  // its dead letter's error, if any
  uint32_t retry_count = 0;
  std::vector<MessageGroupView> groups;
  std::string ns, task;  // its queue's
};

struct MessagesReply {
  std::vector<PopMessage> messages;
  std::vector<MessageStateView> states;  // one per message
  bool found = false;
  QueueOptions options;  // a single message's queue (get only)
};

struct MaintenanceReply {
  bool push = false;
  bool pop = false;
  uint64_t buffered = 0;  // messages stored under push maintenance, not yet visible
};

// One fetched partition: its records from the offset asked, and its bounds.
struct FetchEntryReply {
  std::string queue;
  std::string partition;
  PartitionId partition_id;
  std::string error;            // UNKNOWN_TOPIC_OR_PARTITION | OFFSET_OUT_OF_RANGE; empty: none
  uint64_t high_watermark = 0;  // one past the last message
  uint64_t log_start = 0;       // the first message still kept
  std::vector<PopMessage> records;
};

struct FetchReply {
  std::vector<FetchEntryReply> entries;
};

struct FetchOffsetsEntryReply {
  std::string queue;
  std::string partition;
  std::string error;
  int64_t offset = -1;  // the first message created at or after the time; -1: none yet
  uint64_t high_watermark = 0;
};

struct FetchOffsetsReply {
  std::vector<FetchOffsetsEntryReply> entries;
};

struct PartitionChange {
  std::string queue;
  std::string partition;
  PartitionId partition_id;
  uint64_t last_offset = 0;  // one past the last message
  uint64_t log_start = 0;
  int64_t last_write_us = 0;
};

struct PartitionsChangedReply {
  std::vector<PartitionChange> partitions;
  uint64_t next_after = 0;  // the cursor for the next page; 0: no more
};

struct MessageDeleteReply {
  bool deleted = false;  // false: no live message with that transactionId in the partition
  PartitionId partition_id;
  std::string transaction_id;
};

struct TraceView {
  Uuid id;
  PartitionId partition_id;
  std::string transaction_id;
  std::string event_type;
  std::string data;  // compact JSON
  std::string group;
  std::string worker_id;
  std::vector<std::string> names;
  int64_t created_us = 0;
  // by_name only: where the message is, and its payload (empty when it is gone)
  std::string queue, partition, payload;
};

struct TraceNameView {
  std::string name;
  uint64_t traces = 0;
  uint64_t messages = 0;  // distinct (partition, transactionId)
  int64_t last_seen_us = 0;
};

struct TraceReply {
  TraceQueryKind kind = TraceQueryKind::message;
  Uuid recorded;  // a record: the new trace's id
  std::vector<TraceView> traces;
  std::vector<TraceNameView> names;
  uint64_t total = 0;  // by_name, names: before limit and offset
  uint32_t limit = 0, offset = 0;
};

// One member as the leader sees it: role, address and how far its log has come.
struct MemberView {
  NodeId id;
  bool voter = false;
  std::string raft_addr;
  std::string http_addr;
  uint64_t match = 0;  // its durable log end as the leader last heard (the leader's own: its own)
  uint64_t disk = 0;   // the disk it is pinned to (0: none yet)
  uint64_t heard_disk = 0;  // the disk its messages last came from (0: not heard from)
  uint32_t kinds = 0;       // the highest cluster format it said it reads (0: not heard from)
};

// The configuration in use and, for a refused change, why (code empty: none refused). The codes
// are the reference's: bad_request, not_a_learner, not_a_member, in_flight, no_quorum,
// last_voter, learner_behind, already_voter, address_mismatch, membership_changed.
struct MembershipReply {
  std::string cluster_id;
  std::string code;
  std::string error;
  uint64_t leader = 0;
  uint64_t term = 0;
  uint64_t commit = 0;
  uint64_t index = 0;      // the configuration's entry (0: the first boot's peer list)
  bool committed = false;  // that entry has committed
  uint32_t cluster_version = 1;  // the cluster format every member reads (entries written in it)
  uint32_t format_max = 0;       // the highest this node reads
  bool fenced = false;           // this node's disk is not the one its configuration pins
  std::vector<MemberView> members;
};

struct Reply {
  std::variant<ErrorReply, PushReply, PopReply, AckReply, ConfigureReply, HealthReply, DlqReply,
               KvReply, LockReply, TimerReply, TimerQueryReply, TxnReply, LeaseExtendReply,
               GroupsReply, GroupChangeReply, DlqReplayReply, QueuesReply, MessagesReply,
               MetricsReply, MessageDeleteReply, TraceReply, MaintenanceReply, FetchReply,
               FetchOffsetsReply, PartitionsChangedReply, MembershipReply>
      body;
};

}  // namespace queen
