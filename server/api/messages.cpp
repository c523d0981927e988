// The message family: browse, get, delete and retry of one message.
#include "server/api/common.h"

namespace queen::server {

namespace {

// A message's own fields (inside an object the caller opened).
void render_message_row(const PopMessage& m, bool with_payload, JsonWriter& w) {
  w.key("id").uuid(m.message_id);
  w.key("transactionId").string(m.transaction_id);
  w.key("partitionId").decimal_string(m.partition_id.value);
  w.key("queuePath").string(m.queue + "/" + m.partition);
  w.key("queue").string(m.queue);
  w.key("partition").string(m.partition);
  w.key("offset").number(m.offset.value);
  w.key("traceId").string_or_null(m.trace_id);
  w.key("producerSub").string_or_null(m.producer_sub);
  w.key("createdAt").string(format_iso_us(m.created_us));
  if (with_payload) w.key("payload").raw(m.payload);
}

}  // namespace

namespace {

HttpAnswer render_message_delete(const MessageDeleteReply& r) {
  JsonWriter w;
  w.begin_object();
  w.key("success").boolean(r.deleted);
  w.key("partitionId").decimal_string(r.partition_id.value);
  w.key("transactionId").string(utf8_lossy(r.transaction_id));
  w.key("message").string(r.deleted ? "Message deleted successfully" : "Message not found");
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

// How a message's partition is consumed: by the queue-mode group, named (bus) groups, both.
void render_mode(const MessageStateView* s, JsonWriter& w) {
  bool queue_mode = false;
  size_t groups = s ? s->groups.size() : 0;
  if (s) {
    for (const auto& g : s->groups) queue_mode = queue_mode || g.group == kQueueModeGroup;
  }
  size_t bus = groups - (queue_mode ? 1 : 0);
  w.key("mode").begin_object();
  w.key("hasQueueMode").boolean(queue_mode);
  w.key("busGroupsCount").number(bus);
  w.key("type").string(queue_mode ? (bus ? "hybrid" : "queue") : (bus ? "bus" : "none"));
  w.end_object();
}

// A message's state: as the queue-mode group sees it, and (in detail) per consumer group.
void render_message_state(const MessageStateView& s, bool detail, JsonWriter& w) {
  w.key("status").string(s.status);
  w.key("namespace").string_or_null(s.ns);
  w.key("task").string_or_null(s.task);
  render_mode(&s, w);
  if (!detail) return;
  w.key("errorMessage").string_or_null(s.error);
  w.key("retryCount").number(s.retry_count);
  w.key("leaseExpiresAt").string_or_null(iso_or_empty(s.lease_expires_us));
  w.key("consumerGroups").begin_array();
  for (const auto& g : s.groups) {
    w.begin_object();
    w.key("name").string(g.group);
    w.key("group").string(g.group);
    w.key("consumed").boolean(g.consumed);
    w.key("leaseExpiresAt").string_or_null(iso_or_empty(g.lease_expires_us));
    w.end_object();
  }
  w.end_array();
}

HttpAnswer render_messages(const MessagesReply& reply, RenderAs as) {
  JsonWriter w;
  bool get = as == RenderAs::message_get;
  if (get && (!reply.found || reply.messages.empty())) {
    return error_answer(404, "message_not_found", "Message not found");
  }
  if (!get) w.begin_object().key("messages").begin_array();
  for (size_t i = 0; i < reply.messages.size(); ++i) {
    const PopMessage& m = reply.messages[i];
    w.begin_object();
    render_message_row(m, get, w);
    if (get) {
      w.key("data").raw(m.payload);
      w.key("isEncrypted").boolean(reply.options.encryption_enabled);
    }
    if (i < reply.states.size()) render_message_state(reply.states[i], get, w);
    if (get) {
      w.key("queueConfig");
      render_options(reply.options, w);
    }
    w.end_object();
    if (get) break;
  }
  if (!get) {
    w.end_array();
    render_mode(reply.states.empty() ? nullptr : &reply.states.front(), w);
    w.end_object();
  }
  return HttpAnswer{200, w.take(), 0};
}

}  // namespace

Parsed parse_message_browse(const QueryParams& q, const EdgeSettings& settings, IdSource& ids) {
  MessageBrowseCmd cmd;
  if (const std::string* v = query_text(q, "queue")) cmd.queue = *v;
  if (const std::string* v = query_text(q, "partition")) cmd.partition = *v;
  if (const std::string* v = query_text(q, "ns")) cmd.ns = *v;
  if (const std::string* v = query_text(q, "namespace")) cmd.ns = *v;
  if (const std::string* v = query_text(q, "task")) cmd.task = *v;
  if (const std::string* v = query_text(q, "status")) {
    static const char* kStatuses[] = {"pending", "processing", "completed", "dead_letter"};
    if (std::find(std::begin(kStatuses), std::end(kStatuses), *v) == std::end(kStatuses))
      return bad_request("status must be one of pending, processing, completed, dead_letter");
    cmd.status = *v;
  }
  if (const std::string* v = query_text(q, "limit")) {
    auto n = v->find_first_not_of("0123456789") == std::string::npos ? parse_u64(*v) : std::nullopt;
    if (!n) return bad_request("limit must be a non-negative integer");
    cmd.limit = static_cast<uint32_t>(std::clamp<uint64_t>(*n, 1, 1000));
  }
  const std::pair<const char*, int64_t*> times[] = {{"from", &cmd.from_us}, {"to", &cmd.to_us}};
  for (const auto& [key, slot] : times) {
    if (const std::string* v = query_text(q, key)) {
      auto us = parse_iso_us(*v);
      if (!us) return bad_request(std::string(key) + " must be an ISO-8601 time");
      *slot = *us;
    }
  }
  return to_node(ids, settings.stmt_timeout_ms, cmd);
}

Parsed parse_message_get(const std::string& partition_id, const std::string& transaction_id,
                         const EdgeSettings& settings, IdSource& ids) {
  bool digits = partition_id.find_first_not_of("0123456789") == std::string::npos;
  auto pid = digits ? parse_u64(partition_id) : std::nullopt;
  if (!pid) return bad_request("partitionId must be a string of decimal digits");
  MessageGetCmd cmd{PartitionId(*pid), transaction_id, hash_transaction_id(transaction_id)};
  Parsed p = to_node(ids, settings.stmt_timeout_ms, cmd);
  p.render = RenderAs::message_get;
  return p;
}

Parsed parse_message_delete(const std::string& partition_id, const std::string& transaction_id,
                            const EdgeSettings& settings, IdSource& ids) {
  bool digits = partition_id.find_first_not_of("0123456789") == std::string::npos;
  auto pid = digits ? parse_u64(partition_id) : std::nullopt;
  if (!pid) return bad_request("partitionId must be a string of decimal digits");
  if (transaction_id.size() > kTransactionIdBytesMax)
    return bad_request("transactionId longer than " + std::to_string(kTransactionIdBytesMax));
  MessageDeleteCmd cmd{PartitionId(*pid), transaction_id, hash_transaction_id(transaction_id)};
  return to_node(ids, settings.stmt_timeout_ms, cmd);
}

Parsed parse_message_retry(const std::string& partition_id, const std::string& transaction_id,
                           const EdgeSettings& settings, IdSource& ids) {
  bool digits = partition_id.find_first_not_of("0123456789") == std::string::npos;
  auto pid = digits ? parse_u64(partition_id) : std::nullopt;
  if (!pid) return bad_request("partitionId must be a string of decimal digits");
  DlqReplayCmd cmd;
  cmd.message_id = make_uuid_v7(ids.now_ms(), ids.random_u64(), ids.random_u64());
  cmd.partition_id = PartitionId(*pid);
  cmd.txn_hash = hash_transaction_id(transaction_id);
  return to_node(ids, settings.stmt_timeout_ms, cmd);
}

HttpAnswer render_body(const MessagesReply& reply, RenderAs as) {
  return render_messages(reply, as);
}

HttpAnswer render_body(const MessageDeleteReply& reply, RenderAs) {
  return render_message_delete(reply);
}

}  // namespace queen::server
