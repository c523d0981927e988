// Commands a node accepts from its edge (HTTP server, simulated clients) and the replies it
// hands back. The edge has already parsed and validated them, minted message ids and hashed
// transactionIds; the node plans, orders, logs and answers. Replies are typed: the edge
// renders them (JSON and status codes), the simulator's checker reads them directly.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/common/types.h"
#include "core/node/metrics.h"
#include "core/state/queue_options.h"

namespace queen {

// ---- commands ----

struct PushItem {
  std::string queue;
  std::string partition = "Default";
  std::string transaction_id;  // the edge sets it to the message id's text when absent
  Hash128 txn_hash;            // xxh3-128 of transaction_id
  Uuid message_id;             // UUIDv7 minted at the edge
  std::string payload;         // compact JSON text, stored as sent
  std::string trace_id;        // optional
  // The payload is sealed already (a timer's, sealed when it was scheduled): never sealed
  // twice. Set only by the node, never by the edge.
  bool payload_sealed = false;
  std::string producer_sub;  // the pusher's JWT sub (POST /api/v1/push with auth on)
};

struct PushCmd {
  std::vector<PushItem> items;
};

enum class SubscriptionMode : uint8_t { all = 0, new_only = 1, from_time = 2 };

struct PopCmd {
  std::string queue;     // empty: a discovery pop over the queues of `ns` (and `task`)
  std::string ns, task;  // discovery pop filter
  std::optional<std::string> partition;  // the .../partition/:partition route
  std::string group = "__QUEUE_MODE__";
  uint32_t batch = 1;
  bool wait = false;  // long poll until the envelope's deadline
  SubscriptionMode subscription_mode = SubscriptionMode::new_only;
  int64_t subscription_from_us = 0;  // for from_time
  bool auto_ack = false;             // commitOnDelivery: no lease, the cursor moves on delivery
  std::optional<int64_t> lease_time_s;
  uint32_t partitions = 1;  // claim up to this many partitions (1-64), one lease id
  bool conflation = false;  // deliver only the newest pending message per partition
};

enum class AckStatus : uint8_t { completed = 0, failed = 1, retry = 2, dlq = 3 };

struct AckItem {
  std::string transaction_id;
  Hash128 txn_hash;
  PartitionId partition_id;
  std::optional<LeaseId> lease_id;
  AckStatus status = AckStatus::completed;
  std::string error;
  std::string group = "__QUEUE_MODE__";
};

struct AckCmd {
  std::vector<AckItem> items;
};

struct ConfigureCmd {
  std::string queue;
  QueueOptionsPatch patch;
  bool replace = false;
};

struct HealthCmd {};

struct DlqQueryCmd {
  std::string queue;  // empty: every queue
  std::string group;  // empty: every group
  uint32_t limit = 100;
  std::string partition;           // empty: every partition
  int64_t from_us = 0, to_us = 0;  // failed in [from, to]; 0: unbounded
  uint32_t offset = 0;             // rows skipped, newest first
};

// ---- KV, locks, timers, transactions ----

enum class KvOpKind : uint8_t { get, get_many, get_prefix, put, put_if_absent, del, incr, check };

struct KvOp {
  KvOpKind op = KvOpKind::get;
  std::string ns;
  std::string key;
  std::vector<std::string> keys;  // getMany
  std::string value = "null";     // put: compact JSON text
  int64_t ttl_s = 0;              // writes: exactly one of ttl_s > 0 or forever
  bool forever = false;
  std::optional<uint64_t> expect;   // 0: must be absent; N: must be version N
  bool required = false;            // a lost precondition aborts the whole call
  int64_t delta = 1;                // incr
  std::optional<int64_t> min, max;  // incr bounds
  std::string prefix, after;        // getPrefix
  uint32_t limit = 100;
  bool keys_only = false;
};

struct KvCmd {
  std::vector<KvOp> ops;
};

enum class LockOpKind : uint8_t { acquire, renew, release, get };

struct LockOp {
  LockOpKind op = LockOpKind::acquire;
  std::string name;
  std::string owner;  // the edge mints one when the client gives none
  int64_t ttl_s = 30;
  uint32_t limit = 1;  // a semaphore of N slots
  std::optional<uint32_t> slot;
  uint64_t token = 0;
};

struct LockCmd {
  std::vector<LockOp> ops;
};

enum class TimerOpKind : uint8_t { schedule, reschedule, cancel };

struct TimerOp {
  TimerOpKind op = TimerOpKind::schedule;
  std::string queue;
  std::string timer_key;
  std::string partition = "Default";
  int64_t delay_ms = 0;
  std::string txn;  // the fired message's transactionId (dedup key)
  Hash128 txn_hash;
  Uuid message_id;  // minted at the edge for the fired message
  std::string payload = "null";
  bool check_txn = false;  // cancel only when the stored txn equals `txn`
};

struct TimerCmd {
  std::vector<TimerOp> ops;
};

enum class TimerQueryKind : uint8_t { peek, list, count };

struct TimerQueryCmd {
  TimerQueryKind kind = TimerQueryKind::peek;
  std::string queue;
  std::string timer_key;  // peek
  std::string after;      // list
  std::string prefix;     // count
  uint32_t limit = 100;
};

struct PositionOp {
  std::string queue;
  std::string group = "__QUEUE_MODE__";
  std::string partition = "Default";
  std::optional<Offset> offset;  // every message at or below it is consumed; none: reset
};

// An ack inside a transaction: the same fields as a standalone ack.
using TxnAck = AckItem;

// One operation of the call's `operations` array: an ack or a push of several items.
struct TxnOperation {
  bool is_ack = false;
  TxnAck ack;
  std::vector<PushItem> items;
};

struct TxnCmd {
  Uuid transaction_id;  // minted for the call; not a dedup key
  std::vector<TxnOperation> operations;
  std::vector<KvOp> kv;
  std::vector<TimerOp> timers;
  std::vector<PositionOp> positions;
  std::vector<LeaseId> required_leases;
};

// ---- leases, consumer groups, DLQ, queues, messages ----

struct LeaseExtendCmd {
  LeaseId lease_id;
  int64_t seconds = 60;
};

struct GroupListCmd {
  // GET /api/v1/consumer-groups/lagging: every group's partitions whose oldest unconsumed
  // message is older than this.
  std::optional<int64_t> lagging_min_s;
};

struct GroupDetailsCmd {
  std::string group;
};

struct GroupDeleteCmd {
  std::string group;
  std::string queue;  // empty: every queue
  bool delete_metadata = true;
};

struct SeekCmd {
  std::string group;
  std::string queue;
  std::string partition;  // empty: every partition of the queue
  bool to_end = false;
  int64_t timestamp_us = 0;  // when !to_end: the cursor goes past messages created at or before
};

struct SubscriptionCmd {
  std::string group;
  int64_t timestamp_us = 0;
};

// Re-pushes a dead letter, named by its dlqId, or else by the id its listing shows (its
// message's), or else by its message's partition and transactionId.
struct DlqReplayCmd {
  uint64_t dlq_id = 0;
  Uuid message_id;  // minted at the edge for the re-pushed message
  Uuid listed_id;
  PartitionId partition_id;
  Hash128 txn_hash;
};

struct QueueListCmd {
  std::string ns, task;  // filters; empty: any
};

struct QueueGetCmd {
  std::string queue;
};

struct QueueDeleteCmd {
  std::string queue;
};

struct MessageGetCmd {
  PartitionId partition_id;
  std::string transaction_id;
  Hash128 txn_hash;
};

struct MessageBrowseCmd {
  std::string queue;      // empty: any
  std::string partition;  // empty: any
  std::string ns, task;
  std::string status;  // empty: any; pending | processing | completed | dead_letter
  uint32_t limit = 200;
  int64_t from_us = 0, to_us = 0;  // 0: unbounded
};

// Push and pop maintenance (core/kv/maintenance.h): a read when `enabled` is unset, else a
// logged switch of one of them.
struct MaintenanceCmd {
  bool pop = false;  // the pop switch; else the push switch
  std::optional<bool> enabled;
};

// ---- reads by offset: no lease, no cursor, served from the node's applied state ----

struct FetchEntry {
  std::string queue;
  std::string partition = "Default";
  Offset offset;
  uint32_t max_bytes = 1 << 20;
};

// maxWaitMs and minBytes are the edge's: it asks again until the records reach min_bytes
// or max_wait_ms passes (the node answers each fetch at once).
struct FetchCmd {
  std::vector<FetchEntry> entries;
  uint64_t min_bytes = 0;
  int64_t max_wait_ms = 0;
};

struct FetchOffsetsEntry {
  std::string queue;
  std::string partition = "Default";
  int64_t timestamp_us = 0;
};

struct FetchOffsetsCmd {
  std::vector<FetchOffsetsEntry> entries;
};

// Partitions written after `since_us`, by partition id after `after` (the cursor).
struct PartitionsChangedCmd {
  std::string queue;  // empty: every queue
  int64_t since_us = 0;
  uint64_t after = 0;
  uint32_t limit = 1000;
};

// Deletes the (first live) message of the partition with this transactionId: a logged effect
// (EffMessageDelete), so every node applies it and recovery replays it.
struct MessageDeleteCmd {
  PartitionId partition_id;
  std::string transaction_id;
  Hash128 txn_hash;
};

// Records a trace event on a stored message (POST /api/v1/traces): a logged effect
// (EffTrace), kept for the trace retention.
struct TraceRecordCmd {
  PartitionId partition_id;
  std::string transaction_id;
  Hash128 txn_hash;
  Uuid trace_id;  // minted at the edge
  std::string event_type = "info";
  std::string data;  // compact JSON
  std::string group = "__QUEUE_MODE__";
  std::string worker_id;
  std::vector<std::string> names;
};

enum class TraceQueryKind : uint8_t { message, by_name, names };

struct TraceQueryCmd {
  TraceQueryKind kind = TraceQueryKind::message;
  PartitionId partition_id;    // message
  std::string transaction_id;  // message
  std::string name;            // by_name
  uint32_t limit = 100;
  uint32_t offset = 0;
};

using Command =
    std::variant<PushCmd, PopCmd, AckCmd, ConfigureCmd, HealthCmd, DlqQueryCmd, KvCmd, LockCmd,
                 TimerCmd, TimerQueryCmd, TxnCmd, LeaseExtendCmd, GroupListCmd, GroupDetailsCmd,
                 GroupDeleteCmd, SeekCmd, SubscriptionCmd, DlqReplayCmd, QueueListCmd, QueueGetCmd,
                 QueueDeleteCmd, MessageGetCmd, MessageBrowseCmd, MetricsCmd, MessageDeleteCmd,
                 TraceRecordCmd, TraceQueryCmd, MaintenanceCmd, FetchCmd, FetchOffsetsCmd,
                 PartitionsChangedCmd>;

// How the node treats a kind of command. Every kind states its traits (a new one without an
// overload does not compile):
// - logged: it may plan a logged effect, so its answer is kept under its request id;
// - consumes: it reads or changes consumption state, served only under the consumption lease;
// - any_node: answered by whichever node receives it, leader or not.
struct CommandTraits {
  bool logged = false;
  bool consumes = false;
  bool any_node = false;
};

namespace command_traits_of {
constexpr CommandTraits kLogged{true, false, false};
constexpr CommandTraits kConsumes{false, true, false};
constexpr CommandTraits kRead{false, false, false};
constexpr CommandTraits kAnyNode{false, false, true};  // a stale read of the applied state
constexpr CommandTraits traits(const PushCmd&) {
  return kLogged;
}
constexpr CommandTraits traits(const PopCmd&) {
  return kConsumes;
}
constexpr CommandTraits traits(const AckCmd&) {
  return kConsumes;
}
constexpr CommandTraits traits(const ConfigureCmd&) {
  return kLogged;
}
constexpr CommandTraits traits(const HealthCmd&) {
  return {false, false, true};
}
constexpr CommandTraits traits(const DlqQueryCmd&) {
  return kRead;
}
constexpr CommandTraits traits(const KvCmd&) {
  return kLogged;
}
constexpr CommandTraits traits(const LockCmd&) {
  return kLogged;
}
constexpr CommandTraits traits(const TimerCmd&) {
  return kLogged;
}
constexpr CommandTraits traits(const TimerQueryCmd&) {
  return kRead;
}
constexpr CommandTraits traits(const TxnCmd&) {
  return {true, true, false};
}
constexpr CommandTraits traits(const LeaseExtendCmd&) {
  return kConsumes;
}
constexpr CommandTraits traits(const GroupListCmd&) {
  return kConsumes;
}
constexpr CommandTraits traits(const GroupDetailsCmd&) {
  return kConsumes;
}
constexpr CommandTraits traits(const GroupDeleteCmd&) {
  return kConsumes;
}
constexpr CommandTraits traits(const SeekCmd&) {
  return kConsumes;
}
constexpr CommandTraits traits(const SubscriptionCmd&) {
  return kConsumes;
}
constexpr CommandTraits traits(const DlqReplayCmd&) {
  return kLogged;
}
constexpr CommandTraits traits(const QueueListCmd&) {
  return kRead;
}
constexpr CommandTraits traits(const QueueGetCmd&) {
  return kRead;
}
constexpr CommandTraits traits(const QueueDeleteCmd&) {
  return kLogged;
}
constexpr CommandTraits traits(const MessageGetCmd&) {
  return kRead;
}
constexpr CommandTraits traits(const MessageBrowseCmd&) {
  return kRead;
}
constexpr CommandTraits traits(const MetricsCmd&) {
  return {false, false, true};
}
constexpr CommandTraits traits(const MessageDeleteCmd&) {
  return kLogged;
}
constexpr CommandTraits traits(const TraceRecordCmd&) {
  return kLogged;
}
constexpr CommandTraits traits(const TraceQueryCmd&) {
  return kRead;
}
constexpr CommandTraits traits(const MaintenanceCmd&) {
  return kLogged;
}
constexpr CommandTraits traits(const FetchCmd&) {
  return kAnyNode;
}
constexpr CommandTraits traits(const FetchOffsetsCmd&) {
  return kAnyNode;
}
constexpr CommandTraits traits(const PartitionsChangedCmd&) {
  return kAnyNode;
}
}  // namespace command_traits_of

inline CommandTraits traits_of(const Command& c) {
  return std::visit([](const auto& x) { return command_traits_of::traits(x); }, c);
}

struct CommandEnvelope {
  RequestId request_id;
  int64_t deadline_ms = 0;  // node-local wall clock (Env::now_ms) past which the answer is 503
  Command command;
};

// ---- replies ----

struct ErrorReply {
  int http_status = 500;
  std::string code;     // "timeout", "no_leader", "bad_request", ...
  std::string message;  // names the field or the reason
  int retry_after_s = 0;
  uint64_t leader = 0;  // 503 retry from a node that is not the leader: who is (0: unknown)
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
  std::vector<PopMessage> messages;  // empty: 204
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
  std::vector<GroupPartitionView> partitions;  // details only
};

struct GroupsReply {
  std::vector<GroupView> groups;
  bool lagging = false;  // an answer to GroupListCmd::lagging_min_s: partitions that lag
};

struct GroupChangeReply {
  std::string group;  // empty: a queue deletion
  std::string queue;
  uint32_t partitions = 0;  // cursors deleted or moved
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
  std::vector<PartitionStatsView> partitions;  // a get only
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

struct Reply {
  std::variant<ErrorReply, PushReply, PopReply, AckReply, ConfigureReply, HealthReply, DlqReply,
               KvReply, LockReply, TimerReply, TimerQueryReply, TxnReply, LeaseExtendReply,
               GroupsReply, GroupChangeReply, DlqReplayReply, QueuesReply, MessagesReply,
               MetricsReply, MessageDeleteReply, TraceReply, MaintenanceReply, FetchReply,
               FetchOffsetsReply, PartitionsChangedReply>
      body;
};

}  // namespace queen
