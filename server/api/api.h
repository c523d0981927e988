// The HTTP API's families (server/api/<family>.cpp): request bodies and query strings in,
// prepared commands out; typed replies in, status codes and JSON bodies out. No sockets here
// (server/http_server.h); which route reaches which parser is the route table's
// (server/api/routes.h); times, UTF-8 and URLs are server/wire's.
//
// Contract:
// - A parse either yields a command envelope for the node (ids minted, transactionIds hashed
//   with xxh3-128, payloads as compact JSON text, a deadline) or an answer to send at once
//   (400 naming the offending field, 413 name_too_long, an empty push's 201 []).
// - Malformed input of any size or shape gives a 400, never an exception past this module;
//   JSON nesting deeper than kJsonDepthMax is refused before it is parsed.
// - Rendering splices stored payloads raw; it never parses them again. render_reply covers
//   every reply kind (a std::visit: a kind without a renderer does not compile), and maps
//   the core's error codes (core/api/errc.h) to HTTP statuses in one table.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/api/replies.h"
#include "server/config.h"
#include "server/wire/text.h"
#include "server/wire/time.h"

namespace queen::server {

constexpr size_t kJsonDepthMax = 256;
// Queue plus the longer of partition and group, as 2.x counts it: 447 bytes including the
// 36-byte tenant prefix it keeps in front of every queue name.
constexpr size_t kTenantPrefixBytes = 36;
constexpr size_t kNameBytesMax = 447 - kTenantPrefixBytes;
constexpr size_t kTransactionIdBytesMax = 65535;
constexpr uint32_t kPopBatchMax = 10000;
constexpr uint32_t kPopBatchDefault = 200;
constexpr uint32_t kPopPartitionsMax = 64;
// What a pop with autopilot=true uses for batch and partitions when the client leaves them unset.
constexpr uint32_t kAutopilotBatch = 200;
constexpr uint32_t kAutopilotPartitions = 4;
constexpr uint32_t kDlqLimitDefault = 100;
constexpr int64_t kLeaseExtendSecondsMax = 86400;
constexpr uint32_t kDlqLimitMax = 10000;
constexpr const char* kQueueModeGroup = "__QUEUE_MODE__";
constexpr const char* kVersion = "0.1.0";
constexpr size_t kTraceNamesMax = 16;  // names on one trace
constexpr size_t kTraceNameBytesMax = 255;
constexpr uint32_t kTraceQueryLimitMax = 10000;

// Time and randomness for the ids an edge thread mints.
class IdSource {
 public:
  virtual ~IdSource() = default;
  virtual int64_t now_ms() = 0;
  virtual uint64_t random_u64() = 0;
};

struct HttpAnswer {
  HttpAnswer(unsigned status_ = 200, std::string body_ = {}, int retry_after_s_ = 0)
      : status(status_), body(std::move(body_)), retry_after_s(retry_after_s_) {}

  unsigned status = 200;
  std::string body;  // empty for 204
  int retry_after_s = 0;
  std::string etag;          // sent as the ETag header when not empty
  std::string content_type;  // empty: application/json
};

// How a reply is rendered when its type alone does not say (a single-key KV route).
enum class RenderAs : uint8_t {
  standard,
  kv_single,
  group_details,
  message_get,
  namespaces,          // the queue list rolled up by namespace
  tasks,               // the queue list rolled up by task
  metrics_json,        // GET /metrics: the reference's fixed JSON shape
  timer_single,        // DELETE /api/v1/timers/:queue/:key: the one result, bare
  timer_peek,          // GET /api/v1/timers/:queue/:key: the timer, bare
  timer_list,          // GET /api/v1/timers/:queue: {rows, truncated, nextAfter}
  pop_conflation,      // a pop with conflation=true: an empty one answers 200 with the echo
  group_subscription,  // POST /api/v1/consumer-groups/:group/subscription
  group_seek,          // POST .../queues/:queue/seek
  partition_seek,      // POST .../queues/:queue/partitions/:partition/seek
  maintenance_push,    // /api/v1/system/maintenance
  maintenance_pop,     // /api/v1/system/maintenance/pop
  membership,          // /api/v1/system/raft/...: errors as {ok:false, code, error}
  status,              // GET /api/v1/status: the queue list and the status history
  overview,            // GET /api/v1/resources/overview
  status_queues,       // GET /api/v1/status/queues: a page of the queue list
  status_queue,        // GET /api/v1/status/queues/:queue: a page of its partitions
  status_messages,     // GET /api/v1/status/queues/:queue/messages: a bare array
  group_page,          // GET /api/v1/consumer-groups/:group?limit=: each queue's partitions paged
};

// What a paged or timed read asks for beyond its command (the status family,
// server/api/status.cpp): a page of the list, a name filter and a time range in buckets.
struct ViewArgs {
  uint64_t offset = 0;
  uint64_t limit = 100;
  std::string search;  // a substring the names listed contain (empty: any)
  std::string queue;   // only this queue (empty: any)
  int64_t from_ms = 0, to_ms = 0, bucket_ms = 0;
};

// What the edge does with a request: hand `command` to the node, or send `answer` now.
struct Parsed {
  std::optional<CommandEnvelope> command;
  HttpAnswer answer;
  RenderAs render = RenderAs::standard;  // hand it back to render_reply with the node's reply
  ViewArgs view;                         // and this
};

// The per-server settings the parsers need.
struct EdgeSettings {
  int64_t stmt_timeout_ms = 30000;
  int64_t pop_timeout_ms_default = 30000;
  SubscriptionMode subscription_mode_default = SubscriptionMode::new_only;
  std::shared_ptr<const Authenticator> auth;  // JWT (server/auth.h); null: every route is open
  std::string console_dir;                    // QUEEN_CONSOLE_DIR (server/console.h)
  uint16_t http_port = 0;                     // PORT, as the analytics routes report it
};
EdgeSettings edge_settings(const ServerConfig& config);

// One request as the route table hands it to its row's parser: `params` are the pattern's
// :names and *rest, percent-decoded, in order.
struct RouteCall {
  std::string_view method;
  const std::vector<std::string>& params;
  const QueryParams& query;
  bool has_query = false;
  std::string_view body;
  const EdgeSettings& settings;
  IdSource& ids;
};

Parsed parse_push(std::string_view body, const EdgeSettings& settings, IdSource& ids);
Parsed parse_pop(const std::string& queue, const std::optional<std::string>& partition,
                 const QueryParams& query, const EdgeSettings& settings, IdSource& ids);
// GET /api/v1/pop?namespace=&task=: the pop over every queue of a namespace and task.
Parsed parse_discovery_pop(const QueryParams& query, const EdgeSettings& settings, IdSource& ids);
Parsed parse_ack(std::string_view body, const EdgeSettings& settings, IdSource& ids);
Parsed parse_ack_batch(std::string_view body, const EdgeSettings& settings, IdSource& ids);
Parsed parse_configure(std::string_view body, const EdgeSettings& settings, IdSource& ids);
// POST /api/v1/lease/:leaseId/extend {"seconds"?: 60}
Parsed parse_lease_extend(const std::string& lease_id, std::string_view body,
                          const EdgeSettings& settings, IdSource& ids);
Parsed parse_dlq_query(const QueryParams& query, const EdgeSettings& settings, IdSource& ids);
Parsed parse_health(const EdgeSettings& settings, IdSource& ids);
// The membership routes (server/api/membership.cpp): `what` is the last path segment
// (membership, learners, promote, voters), `id` the member of a DELETE.
Parsed parse_membership(std::string_view method, std::string_view what, const std::string& id,
                        std::string_view body, const QueryParams& query,
                        const EdgeSettings& settings, IdSource& ids);
// GET and POST /api/v1/system/maintenance (`pop` false) and .../maintenance/pop.
Parsed parse_maintenance(std::string_view method, bool pop, std::string_view body,
                         const EdgeSettings& settings, IdSource& ids);
// POST /api/v1/fetch, /api/v1/fetch/offsets and /api/v1/partitions/changed.
Parsed parse_fetch(std::string_view body, const EdgeSettings& settings, IdSource& ids);
Parsed parse_fetch_offsets(std::string_view body, const EdgeSettings& settings, IdSource& ids);
Parsed parse_partitions_changed(std::string_view body, const EdgeSettings& settings, IdSource& ids);

// POST /api/v1/transaction: operations (ack, push), kv, timers, positions, requiredLeases.
Parsed parse_transaction(std::string_view body, const EdgeSettings& settings, IdSource& ids);
// POST /api/v1/kv {"operations":[...]}; errors {"error":"kv_bad_request","reason","detail"}.
Parsed parse_kv(std::string_view body, const EdgeSettings& settings, IdSource& ids);
// GET, PUT and DELETE /api/v1/kv/:ns/:key (rendered with RenderAs::kv_single).
Parsed parse_kv_single(std::string_view method, const std::string& ns, const std::string& key,
                       bool has_query, std::string_view body, const EdgeSettings& settings,
                       IdSource& ids);
// POST /api/v1/locks {"operations":[...]}.
Parsed parse_locks(std::string_view body, const EdgeSettings& settings, IdSource& ids);
// POST /api/v1/timers {"operations":[...]}; payloads are base64 of the message's JSON.
Parsed parse_timers(std::string_view body, const EdgeSettings& settings, IdSource& ids);
// DELETE /api/v1/timers/:queue/:timerKey?txn=
Parsed parse_timer_delete(const std::string& queue, const std::string& timer_key,
                          const QueryParams& query, const EdgeSettings& settings, IdSource& ids);
// GET /api/v1/timers/:queue/:timerKey (peek) and GET /api/v1/timers/:queue (list or count).
Parsed parse_timer_query(const std::string& queue, const std::optional<std::string>& timer_key,
                         const QueryParams& query, const EdgeSettings& settings, IdSource& ids);

// /api/v1/consumer-groups: the list, the lagging rows, one group's details, deletes,
// subscription and seeks; `params` as the route table matched them.
Parsed parse_group_list(const RouteCall& c);
Parsed parse_group_lagging(const RouteCall& c);
Parsed parse_group_details(const RouteCall& c);
Parsed parse_group_delete(const RouteCall& c);  // :group[, :queue]
Parsed parse_group_subscription(const RouteCall& c);
Parsed parse_group_seek(const RouteCall& c);
Parsed parse_partition_seek(const RouteCall& c);
// POST /api/v1/dlq/:id/replay
Parsed parse_dlq_replay(const std::string& id, const EdgeSettings& settings, IdSource& ids);
// GET /api/v1/resources/queues (queue empty), GET and DELETE /api/v1/resources/queues/:queue.
Parsed parse_queue_route(std::string_view method, const std::string& queue,
                         const QueryParams& query, const EdgeSettings& settings, IdSource& ids);

// GET /api/v1/messages (newest first; limit clamped to 1-1000).
Parsed parse_message_browse(const QueryParams& query, const EdgeSettings& settings, IdSource& ids);
// GET /api/v1/messages/:partitionId/:transactionId (rendered with RenderAs::message_get).
Parsed parse_message_get(const std::string& partition_id, const std::string& transaction_id,
                         const EdgeSettings& settings, IdSource& ids);
// DELETE /api/v1/messages/:partitionId/:transactionId
// POST /api/v1/messages/:partitionId/:transactionId/retry: re-pushes its dead letter.
Parsed parse_message_retry(const std::string& partition_id, const std::string& transaction_id,
                           const EdgeSettings& settings, IdSource& ids);
Parsed parse_message_delete(const std::string& partition_id, const std::string& transaction_id,
                            const EdgeSettings& settings, IdSource& ids);
// GET /api/v1/resources/namespaces and /tasks: the queue list rendered `as` its roll-up.
Parsed parse_queue_rollup(RenderAs as, const EdgeSettings& settings, IdSource& ids);

// The status and analytics family (server/api/status.cpp), the console's feeds. `route` is
// the path below /api/v1/ ("status", "status/queues", "resources/overview",
// "analytics/queue-lag", ...); `queue` the :queue of the routes that have one.
Parsed parse_status(std::string_view route, const std::string& queue, const QueryParams& query,
                    const EdgeSettings& settings, IdSource& ids);
// The queue list rendered as one of the status kinds.
HttpAnswer render_status(const QueuesReply& reply, RenderAs as, const ViewArgs& view);
HttpAnswer render_status_messages(const MessagesReply& reply);
// A page (limit 100, 1-1000; offset 0) and the `search` filter from a query string; the
// refusal's text naming the field.
std::optional<std::string> read_page(const QueryParams& query, ViewArgs* view);
// GET /api/v1/consumer-groups/:group with `limit`: each queue's partitions paged.
HttpAnswer render_group_page(const GroupsReply& reply, const ViewArgs& view);
// Traces: POST /api/v1/traces, GET /api/v1/traces/:partitionId/:transactionId,
// /api/v1/traces/by-name/:name and /api/v1/traces/names (limit, offset).
Parsed parse_trace_record(std::string_view body, const EdgeSettings& settings, IdSource& ids);
Parsed parse_trace_query(TraceQueryKind kind, const std::vector<std::string>& segments,
                         const QueryParams& query, const EdgeSettings& settings, IdSource& ids);
// GET /metrics/prometheus (rendered by server/observability.h).
Parsed parse_metrics(const EdgeSettings& settings, IdSource& ids, RenderAs as = RenderAs::standard);

HttpAnswer render_reply(const Reply& reply, RenderAs as = RenderAs::standard,
                        const ViewArgs& view = {});
// How many partitions `reply` lists (the rows whose rendering grows with a queue's size).
size_t rendered_rows(const Reply& reply);
// {"error": message, "code": code} with `status`.
HttpAnswer error_answer(unsigned status, std::string_view code, std::string_view message);

Hash128 hash_transaction_id(std::string_view transaction_id);
// The reference's code string of one of the core's error codes (its wire table's).
std::string_view errc_code(api::Errc e);

}  // namespace queen::server
