// The dead-letter family: GET /api/v1/dlq and POST /api/v1/dlq/:id/replay.
#include "server/api/common.h"

namespace queen::server {

HttpAnswer render_body(const DlqReply& reply, RenderAs) {
  JsonWriter w;
  w.begin_object();
  w.key("messages").begin_array();
  for (const DlqRecord& r : reply.records) {
    w.begin_object();
    w.key("id").uuid(r.message_id);
    w.key("dlqId").number(r.id);  // for POST /api/v1/dlq/:dlqId/replay
    w.key("messageId").uuid(r.message_id);
    w.key("transactionId").string(r.transaction_id);
    w.key("partitionId").decimal_string(r.partition_id.value);
    w.key("queue").string(r.queue);
    w.key("partition").string(r.partition);
    w.key("consumerGroup").string(r.group);
    w.key("offset").number(r.offset.value);
    w.key("errorMessage").string_or_null(r.error);
    w.key("retryCount").number(r.retry_count);
    w.key("data").raw(r.payload);
    w.key("producerSub").string_or_null(r.producer_sub);
    w.key("createdAt").string(format_iso_us(r.created_us));
    w.key("failedAt").string(format_iso_us(r.failed_at_us));
    w.end_object();
  }
  w.end_array();
  w.key("total").number(reply.total);
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

HttpAnswer render_body(const DlqReplayReply& r, RenderAs) {
  JsonWriter w;
  w.begin_object();
  w.key("success").boolean(r.success);
  if (!r.success) {
    w.key("error").string(r.error);
    w.key("code").string("dlq_not_found");
    w.end_object();
    return HttpAnswer{404, w.take(), 0};
  }
  w.key("messageId").uuid(r.push.message_id);
  w.key("transactionId").string(r.push.transaction_id);
  w.key("queue").string(r.push.queue);
  w.key("partition").string(r.push.partition);
  w.key("partitionId").decimal_string(r.push.partition_id.value);
  w.key("offset").number(r.push.offset.value);
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

Parsed parse_dlq_query(const QueryParams& query, const EdgeSettings& settings, IdSource& ids) {
  DlqQueryCmd cmd;
  if (const std::string* queue = query_text(query, "queue")) cmd.queue = *queue;
  if (const std::string* group = query_text(query, "consumerGroup")) cmd.group = *group;
  cmd.limit = kDlqLimitDefault;
  if (const std::string* limit = query_text(query, "limit")) {
    auto v = parse_u64(*limit);
    if (!v || *v < 1 || *v > kDlqLimitMax) {
      return bad_request("limit must be an integer from 1 to " + std::to_string(kDlqLimitMax));
    }
    cmd.limit = static_cast<uint32_t>(*v);
  }
  if (const std::string* partition = query_text(query, "partition")) cmd.partition = *partition;
  if (const std::string* offset = query_text(query, "offset")) {
    auto v = parse_u64(*offset);
    if (!v || *v > UINT32_MAX) return bad_request("offset must be a non-negative integer");
    cmd.offset = static_cast<uint32_t>(*v);
  }
  const std::pair<const char*, int64_t*> times[] = {{"from", &cmd.from_us}, {"to", &cmd.to_us}};
  for (const auto& [key, slot] : times) {
    if (const std::string* v = query_text(query, key)) {
      auto us = parse_iso_us(*v);
      if (!us) return bad_request(std::string(key) + " must be an ISO-8601 time");
      *slot = *us;
    }
  }
  return to_node(ids, settings.stmt_timeout_ms, std::move(cmd));
}

// The dead letter is named by the `id` its listing shows (its message's id) or its `dlqId`.
Parsed parse_dlq_replay(const std::string& id, const EdgeSettings& settings, IdSource& ids) {
  auto v = id.find_first_not_of("0123456789") == std::string::npos ? parse_u64(id) : std::nullopt;
  DlqReplayCmd cmd;
  if ((!v || *v == 0) && !uuid_from_string(id, &cmd.listed_id))
    return bad_request("the dead letter id must be its listed id (a UUID) or its dlqId");
  cmd.dlq_id = v.value_or(0);
  cmd.message_id = make_uuid_v7(ids.now_ms(), ids.random_u64(), ids.random_u64());
  return to_node(ids, settings.stmt_timeout_ms, cmd);
}

}  // namespace queen::server
