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
};

struct PushCmd {
  std::vector<PushItem> items;
};

enum class SubscriptionMode : uint8_t { all = 0, new_only = 1, from_time = 2 };

struct PopCmd {
  std::string queue;
  std::optional<std::string> partition;  // the .../partition/:partition route
  std::string group = "__QUEUE_MODE__";
  uint32_t batch = 1;
  bool wait = false;  // long poll until the envelope's deadline
  SubscriptionMode subscription_mode = SubscriptionMode::new_only;
  int64_t subscription_from_us = 0;  // for from_time
  bool auto_ack = false;             // commitOnDelivery: no lease, the cursor moves on delivery
  std::optional<int64_t> lease_time_s;
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
  std::string queue;   // empty: every queue
  std::string group;   // empty: every group
  uint32_t limit = 100;
};

using Command = std::variant<PushCmd, PopCmd, AckCmd, ConfigureCmd, HealthCmd, DlqQueryCmd>;

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
};

enum class PushStatus : uint8_t { queued, duplicate, error };

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
  LeaseId lease_id;  // nil when auto-acked
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
  std::string role;  // "leader" on a single node once recovered
  uint64_t term = 0;
  uint64_t commit_index = 0;
  uint64_t applied_index = 0;
  uint64_t queues = 0;
  uint64_t partitions = 0;
};

struct DlqRecord {
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
};

struct DlqReply {
  std::vector<DlqRecord> records;
  uint64_t total = 0;
};

struct Reply {
  std::variant<ErrorReply, PushReply, PopReply, AckReply, ConfigureReply, HealthReply, DlqReply>
      body;
};

}  // namespace queen
