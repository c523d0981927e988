// The commands a node accepts from its edge (HTTP server, simulated clients, a follower that
// forwards), with each kind's traits. The edge has already parsed and validated them, minted
// message ids and hashed transactionIds; the node plans, orders, logs and answers
// (core/api/replies.h). Nothing here names HTTP: the edge maps the core's error codes
// (core/api/errc.h) to statuses.
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
  // The edge minted transaction_id for this request (the client sent none): a new id, so
  // the planner does not look it up as a duplicate (it still records it, for a later push
  // that names it). A node that forwards the command clears it (core/node/node_forward.cpp):
  // a forwarded command may be planned more than once.
  bool txn_minted = false;
};

// Items in one push: the edge refuses more (400, naming `items`), and a stored push answer
// claiming more results is corrupt. Far above what clients send (hundreds to thousands).
constexpr size_t kPushItemsMax = size_t{1} << 20;

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
  // message is older than this (in id order per group, read a slice at a time).
  std::optional<int64_t> lagging_min_s;
};

struct GroupDetailsCmd {
  std::string group;
  // With `limit`, each queue's partitions a page at a time by name (those whose name contains
  // `search`, from the `offset`-th, at most `limit`), and only queue `queue` when named; the
  // lag still counts every partition. Without: every partition of every queue of the group,
  // in id order (read a slice at a time; the edge orders them by name).
  std::string queue;
  uint64_t offset = 0;
  uint64_t limit = 0;
  std::string search;
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
  // With `limit`, a page of the partitions by name (the status view): those whose name
  // contains `search`, from the `offset`-th, at most `limit`; the queue's counts are then the
  // store's sums, as in a queue list. Without: every partition in id order (read a slice at
  // a time; the edge orders them by name), and their counts summed.
  uint64_t offset = 0;
  uint64_t limit = 0;
  std::string search;
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

// The cluster's membership (GET/POST/PUT/DELETE /api/v1/system/raft/...): a read, or one
// change proposed by the leader (core/raft/raft.h: one voter at a time). A change is answered
// once its entry commits, with the configuration it made.
enum class MembershipOp : uint8_t { get, add_learner, promote, set_voters, remove };
constexpr MembershipOp enum_last(MembershipOp) {
  return MembershipOp::remove;
}

struct MembershipCmd {
  MembershipOp op = MembershipOp::get;
  std::vector<NodeId> ids;  // promote: the learners; set_voters: the voters; remove: one member
  NodeId id;                // add_learner: the new member and where it is reached
  std::string raft_addr;
  std::string http_addr;
};

using Command =
    std::variant<PushCmd, PopCmd, AckCmd, ConfigureCmd, HealthCmd, DlqQueryCmd, KvCmd, LockCmd,
                 TimerCmd, TimerQueryCmd, TxnCmd, LeaseExtendCmd, GroupListCmd, GroupDetailsCmd,
                 GroupDeleteCmd, SeekCmd, SubscriptionCmd, DlqReplayCmd, QueueListCmd, QueueGetCmd,
                 QueueDeleteCmd, MessageGetCmd, MessageBrowseCmd, MetricsCmd, MessageDeleteCmd,
                 TraceRecordCmd, TraceQueryCmd, MaintenanceCmd, FetchCmd, FetchOffsetsCmd,
                 PartitionsChangedCmd, MembershipCmd>;

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
constexpr CommandTraits traits(const MembershipCmd&) {
  return kRead;  // served by the leader; its entry carries no request outcome
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
  int64_t deadline_ms =
      0;  // node-local wall clock (Env::now_ms) past which the answer is a timeout
  Command command;
  bool forwarded = false;  // a follower sent it: answered where it lands, never forwarded on
};

}  // namespace queen
