// The pop family: GET /api/v1/pop[/queue/:queue[/partition/:partition]] and lease renewal.
#include "server/api/common.h"

namespace queen::server {

namespace {

// The pop route's 400 keeps the shape of a pop answer.
Parsed pop_bad_request(std::string_view message) {
  JsonWriter w;
  w.begin_object();
  w.key("success").boolean(false);
  w.key("error").string(utf8_lossy(message));
  w.key("code").string("bad_request");
  w.key("messages").begin_array().end_array();
  w.end_object();
  return answer_now(HttpAnswer{400, w.take(), 0});
}

}  // namespace

namespace {

// Reads the subscription of a named group; queue mode always reads everything.
std::string read_subscription(const QueryParams& q, const EdgeSettings& settings, PopCmd* cmd) {
  cmd->subscription_mode = settings.subscription_mode_default;
  if (cmd->group == kQueueModeGroup) {
    cmd->subscription_mode = SubscriptionMode::all;
    return {};
  }
  if (const std::string* from = query_text(q, "subscriptionFrom")) {
    if (*from == "now") {
      cmd->subscription_mode = SubscriptionMode::new_only;
      return {};
    }
    auto us = parse_iso_us(*from);
    if (!us) return "subscriptionFrom must be \"now\" or an ISO-8601 time";
    cmd->subscription_mode = SubscriptionMode::from_time;
    cmd->subscription_from_us = *us;
    return {};
  }
  if (const std::string* mode = query_text(q, "subscriptionMode")) {
    if (*mode == "new" || *mode == "new-only" || *mode == "new_only" || *mode == "newonly") {
      cmd->subscription_mode = SubscriptionMode::new_only;
    } else if (*mode == "all" || *mode == "from_beginning") {
      cmd->subscription_mode = SubscriptionMode::all;
    } else {
      return "subscriptionMode must be new or all";
    }
  }
  return {};
}

// Reads batch, wait, timeout, autoAck/commitOnDelivery and leaseSeconds.
std::string read_pop_numbers(const QueryParams& q, const EdgeSettings& settings, PopCmd* cmd,
                             int64_t* timeout_ms) {
  std::string error;
  cmd->batch = kPopBatchDefault;
  if (const std::string* batch = query_text(q, "batch")) {
    auto v = parse_u64(*batch);
    if (!v || *v < 1 || *v > kPopBatchMax) {
      return "batch must be an integer from 1 to " + std::to_string(kPopBatchMax);
    }
    cmd->batch = static_cast<uint32_t>(*v);
  }
  *timeout_ms = settings.pop_timeout_ms_default;
  if (const std::string* timeout = query_text(q, "timeout")) {
    auto v = parse_u64(*timeout);
    if (!v) return "timeout must be a non-negative integer (milliseconds)";
    *timeout_ms = static_cast<int64_t>(std::min<uint64_t>(*v, kTimeoutMsMax));
  }
  if (const std::string* partitions = query_text(q, "partitions")) {
    auto v = parse_u64(*partitions);
    if (!v || *v < 1 || *v > kPopPartitionsMax) {
      return "partitions must be an integer from 1 to " + std::to_string(kPopPartitionsMax);
    }
    cmd->partitions = static_cast<uint32_t>(*v);
  }
  if (const std::string* lease = query_text(q, "leaseSeconds")) {
    auto v = parse_u64(*lease);
    if (!v || *v < 1 || *v > 86400 * 365) return "leaseSeconds must be a positive integer";
    cmd->lease_time_s = static_cast<int64_t>(*v);
  }
  cmd->wait = query_bool(q, "wait", false, &error);
  // autopilot: the broker picks what the client left unset (batch 200, 4 partitions).
  if (query_bool(q, "autopilot", false, &error)) {
    if (query_text(q, "batch") == nullptr) cmd->batch = kAutopilotBatch;
    if (query_text(q, "partitions") == nullptr) cmd->partitions = kAutopilotPartitions;
  }
  cmd->conflation = query_bool(q, "conflation", false, &error);
  // commitOnDelivery, or its older name autoAck: either one true commits at delivery.
  bool auto_ack = query_bool(q, "autoAck", false, &error);
  cmd->auto_ack = query_bool(q, "commitOnDelivery", false, &error) || auto_ack;
  if (error.empty() && cmd->auto_ack && cmd->conflation)
    return "commitOnDelivery (autoAck) cannot be combined with conflation";
  return error;
}

}  // namespace

namespace {

constexpr char kCreatedKey[] = "\"createdAt\":\"";
constexpr size_t kCreatedKeyChars = sizeof kCreatedKey - 1;

// What consecutive messages of a pop answer share, rendered once: their partition's members,
// their append's creation time, their lease and group.
struct PopRenderCache {
  std::optional<PartitionId> pid;
  std::string partition;  // "partitionId":..,"partition":..,"queue":..
  std::optional<int64_t> created_us;
  char created[kCreatedKeyChars + kIsoUsCharsMax + 1];  // "createdAt":"..." (needs no escape)
  size_t created_chars = 0;
  std::optional<LeaseId> lease;
  std::string lease_and_group;  // "leaseId":..,"consumerGroup":..
};

void render_pop_message(const PopMessage& m, const std::string& group, PopRenderCache& c,
                        JsonWriter& w) {
  if (c.pid != m.partition_id) {
    c.pid = m.partition_id;
    c.partition = JsonWriter::members_of([&](JsonWriter& f) {
      f.key("partitionId").decimal_string(m.partition_id.value);
      f.key("partition").string(m.partition);
      f.key("queue").string(m.queue);
    });
  }
  if (c.created_us != m.created_us) {
    c.created_us = m.created_us;
    std::memcpy(c.created, kCreatedKey, kCreatedKeyChars);
    size_t chars = format_iso_us(m.created_us, c.created + kCreatedKeyChars);
    c.created[kCreatedKeyChars + chars] = '"';
    c.created_chars = kCreatedKeyChars + chars + 1;
  }
  if (c.lease != m.lease_id) {
    c.lease = m.lease_id;
    c.lease_and_group = JsonWriter::members_of([&](JsonWriter& f) {
      f.key("leaseId");
      render_lease(m.lease_id, f);
      f.key("consumerGroup").string(group);
    });
  }
  w.begin_object();
  w.key("id").uuid(m.message_id);
  w.key("messageId").uuid(m.message_id);
  w.key("transactionId").string(m.transaction_id);
  w.key("traceId").string_or_null(m.trace_id);
  w.members(c.partition);
  w.key("offset").number(m.offset.value);
  w.key("deliveryAttempt").number(m.delivery_attempt);
  w.key("data").raw(m.payload);
  w.members(std::string_view(c.created, c.created_chars));
  w.members(c.lease_and_group);
  w.key("producerSub").string_or_null(m.producer_sub);
  w.end_object();
}

// A conflating pop says so in its answer, and answers an empty pop 200 with a body too: the
// client checks the echo.
HttpAnswer render_pop(const PopReply& reply, bool conflation) {
  if (reply.messages.empty()) {
    if (!conflation) return HttpAnswer{204, "", 0};
    if (reply.empty_reason == "paused")  // pop maintenance
      return HttpAnswer{200, R"({"success":true,"messages":[],"paused":true})", 0};
    return HttpAnswer{200, R"({"success":true,"messages":[],"conflation":true})", 0};
  }
  const PopMessage& first = reply.messages.front();
  size_t bytes = 256;
  for (const PopMessage& m : reply.messages) {
    bytes += kRenderedItemBytes + 2 * kUuidChars + m.transaction_id.size() + m.payload.size() +
             m.partition.size() + m.queue.size() + reply.group.size();
  }
  JsonWriter w;
  w.reserve(bytes);
  w.begin_object();
  w.key("success").boolean(true);
  w.key("queue").string(reply.queue.empty() ? first.queue : reply.queue);
  w.key("partition").string(first.partition);
  w.key("partitionId").decimal_string(first.partition_id.value);
  w.key("leaseId").string(lease_text(reply.lease_id));
  w.key("consumerGroup").string(reply.group);
  w.key("partitionsClaimed").number(reply.partitions_claimed);
  w.key("messages").begin_array();
  PopRenderCache cache;
  for (const PopMessage& m : reply.messages) render_pop_message(m, reply.group, cache, w);
  w.end_array();
  if (conflation) w.key("conflation").boolean(true);
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

}  // namespace

namespace {

// The pop of a named queue (`queue` set) or of every queue of a namespace and task.
Parsed parse_pop_command(const std::string& queue, const std::optional<std::string>& partition,
                         const QueryParams& query, const EdgeSettings& settings, IdSource& ids) {
  if (partition && (partition->empty() || !valid_utf8(*partition))) {
    return pop_bad_request("partition must be a non-empty UTF-8 name");
  }
  PopCmd cmd;
  cmd.queue = queue;
  cmd.partition = partition;
  if (queue.empty()) {
    if (const std::string* ns = query_text(query, "namespace")) cmd.ns = *ns;
    if (const std::string* task = query_text(query, "task")) cmd.task = *task;
  }
  if (const std::string* group = query_text(query, "consumerGroup")) cmd.group = *group;
  int64_t timeout_ms = 0;
  std::string error = read_pop_numbers(query, settings, &cmd, &timeout_ms);
  if (error.empty()) error = read_subscription(query, settings, &cmd);
  if (!error.empty()) return pop_bad_request(error);
  size_t second_name = std::max(partition ? partition->size() : 0, cmd.group.size());
  if (queue.size() + second_name > kNameBytesMax) {
    return name_too_long("queue and partition or consumerGroup are");
  }
  if (has_control_char(queue)) return pop_bad_request("queue " + kNoControlChars);
  if (partition && has_control_char(*partition))
    return pop_bad_request("partition " + kNoControlChars);
  if (has_control_char(cmd.group)) return pop_bad_request("consumerGroup " + kNoControlChars);
  bool conflation = cmd.conflation;
  Parsed p = to_node(ids, cmd.wait ? timeout_ms : settings.stmt_timeout_ms, std::move(cmd));
  if (conflation) p.render = RenderAs::pop_conflation;
  return p;
}

// The renew answer, an object: the SDK reads success, renewed and the new expiry under any of
// its three names.
void render_lease_extend(const LeaseExtendReply& reply, JsonWriter& w) {
  std::string expires = reply.success ? format_iso_us(reply.expires_us) : std::string();
  w.begin_object();
  w.key("leaseId").uuid(reply.lease_id);
  w.key("success").boolean(reply.success);
  w.key("renewed").number(reply.renewed);
  w.key("error").string_or_null(reply.error);
  w.key("newExpiresAt").string_or_null(expires);
  w.key("expiresAt").string_or_null(expires);
  w.key("lease_expires_at").string_or_null(expires);
  w.end_object();
}

}  // namespace

Parsed parse_pop(const std::string& queue, const std::optional<std::string>& partition,
                 const QueryParams& query, const EdgeSettings& settings, IdSource& ids) {
  if (queue.empty() || !valid_utf8(queue)) {
    return pop_bad_request("queue must be a non-empty UTF-8 name");
  }
  return parse_pop_command(queue, partition, query, settings, ids);
}

Parsed parse_discovery_pop(const QueryParams& query, const EdgeSettings& settings, IdSource& ids) {
  const std::string* ns = query_text(query, "namespace");
  const std::string* task = query_text(query, "task");
  if (ns == nullptr && task == nullptr) {
    return pop_bad_request("namespace or task is required to pop without a queue");
  }
  return parse_pop_command("", std::nullopt, query, settings, ids);
}

Parsed parse_lease_extend(const std::string& lease_id, std::string_view body,
                          const EdgeSettings& settings, IdSource& ids) {
  LeaseExtendCmd cmd;
  if (!uuid_from_string(lease_id, &cmd.lease_id)) return bad_request("leaseId must be a UUID");
  std::string error;
  auto doc = parse_object(body.empty() ? std::string_view("{}") : body, &error);
  if (!doc) return bad_request(error);
  FieldReader r(*doc, "");
  auto seconds = r.opt_non_negative("seconds");
  if (!r.ok()) return bad_request(r.error());
  if (seconds) {
    if (*seconds < 1 || *seconds > kLeaseExtendSecondsMax) {
      return bad_request("seconds must be an integer from 1 to " +
                         std::to_string(kLeaseExtendSecondsMax));
    }
    cmd.seconds = *seconds;
  }
  return to_node(ids, settings.stmt_timeout_ms, std::move(cmd));
}

HttpAnswer render_body(const PopReply& reply, RenderAs as) {
  return render_pop(reply, as == RenderAs::pop_conflation);
}

HttpAnswer render_body(const LeaseExtendReply& reply, RenderAs) {
  JsonWriter w;
  render_lease_extend(reply, w);
  return HttpAnswer{200, w.take(), 0};
}

}  // namespace queen::server
