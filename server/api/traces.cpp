// The trace family: POST /api/v1/traces and its three reads.
#include "server/api/common.h"

namespace queen::server {

namespace {

// Answered 200 whether or not the message was there, as the reference does.
void render_trace_fields(const TraceView& t, bool located, JsonWriter& w) {
  w.begin_object();
  w.key("id").uuid(t.id);
  if (located) {
    w.key("transaction_id").string(t.transaction_id);
    w.key("partition_id").decimal_string(t.partition_id.value);
  }
  w.key("event_type").string(t.event_type);
  w.key("data").raw(t.data);
  w.key("consumer_group").string(t.group);
  w.key("worker_id").string_or_null(t.worker_id);
  w.key("created_at").string(format_iso_us(t.created_us));
  if (located) {
    w.key("queue_name").string_or_null(t.queue);
    w.key("partition_name").string_or_null(t.partition);
    w.key("message_payload").raw(t.payload);
  }
  w.key("trace_names").begin_array();
  for (const std::string& n : t.names) w.string(n);
  w.end_array();
  w.end_object();
}

void render_pagination(const TraceReply& r, JsonWriter& w) {
  w.key("total").number(r.total);
  w.key("pagination").begin_object();
  w.key("limit").number(r.limit).key("offset").number(r.offset);
  w.end_object();
}

HttpAnswer render_traces(const TraceReply& r) {
  JsonWriter w;
  w.begin_object();
  if (!r.recorded.is_nil()) {
    w.key("success").boolean(true).key("traceId").uuid(r.recorded);
    w.end_object();
    return HttpAnswer(201, w.take());
  }
  if (r.kind == TraceQueryKind::names) {
    w.key("trace_names").begin_array();
    for (const TraceNameView& n : r.names) {
      w.begin_object().key("trace_name").string(n.name).key("trace_count").number(n.traces);
      w.key("message_count").number(n.messages);
      w.key("last_seen").string(format_iso_us(n.last_seen_us)).end_object();
    }
    w.end_array();
    render_pagination(r, w);
    w.end_object();
    return HttpAnswer(200, w.take());
  }
  bool located = r.kind == TraceQueryKind::by_name;
  w.key("traces").begin_array();
  for (const TraceView& t : r.traces) render_trace_fields(t, located, w);
  w.end_array();
  if (located) render_pagination(r, w);
  w.end_object();
  return HttpAnswer(200, w.take());
}

}  // namespace

namespace {

std::optional<uint64_t> partition_id_of(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (!v.is_string()) return std::nullopt;
  const auto& text = v.get_ref<const std::string&>();
  if (text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return parse_u64(text);
}

// traceNames: a string or an array of strings; an error message, or nothing.
std::optional<std::string> read_trace_names(const json& doc, std::vector<std::string>* out) {
  auto it = doc.find("traceNames");
  if (it == doc.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) {
    out->push_back(it->get<std::string>());
  } else if (it->is_array()) {
    for (const json& n : *it) {
      if (!n.is_string()) return "traceNames must be a string or an array of strings";
      out->push_back(n.get<std::string>());
    }
  } else {
    return "traceNames must be a string or an array of strings";
  }
  if (out->size() > kTraceNamesMax)
    return "traceNames holds more than " + std::to_string(kTraceNamesMax) + " names";
  for (const std::string& n : *out) {
    if (n.empty() || n.size() > kTraceNameBytesMax)
      return "each trace name must have 1 to " + std::to_string(kTraceNameBytesMax) + " bytes";
  }
  return std::nullopt;
}

}  // namespace

Parsed parse_trace_record(std::string_view body, const EdgeSettings& settings, IdSource& ids) {
  std::string error;
  auto doc = parse_object(body, &error);
  if (!doc) return bad_request(error);
  auto txn = doc->find("transactionId");
  auto pid = doc->find("partitionId");
  if (txn == doc->end() || pid == doc->end() || !txn->is_string() || txn->empty())
    return bad_request("transactionId and partitionId are required");
  auto pid_value = partition_id_of(*pid);
  if (!pid_value) return bad_request("partitionId must be a string of decimal digits");
  auto data = doc->find("data");
  if (data == doc->end() || data->is_null()) return bad_request("data is required");
  TraceRecordCmd cmd;
  cmd.partition_id = PartitionId(*pid_value);
  cmd.transaction_id = txn->get<std::string>();
  if (cmd.transaction_id.size() > kTransactionIdBytesMax)
    return bad_request("transactionId longer than " + std::to_string(kTransactionIdBytesMax));
  cmd.txn_hash = hash_transaction_id(cmd.transaction_id);
  cmd.data = data->dump(-1, ' ', false, json::error_handler_t::replace);
  FieldReader r(*doc, "");
  if (auto g = r.opt_string("consumerGroup")) cmd.group = *g;
  if (auto e = r.opt_string("eventType")) cmd.event_type = *e;
  if (auto w = r.opt_string("workerId")) cmd.worker_id = *w;
  if (!r.ok()) return bad_request(r.error());
  if (cmd.group.empty() || cmd.group.size() > kNameBytesMax)
    return bad_request("consumerGroup must have 1 to " + std::to_string(kNameBytesMax) + " bytes");
  if (auto bad = read_trace_names(*doc, &cmd.names)) return bad_request(*bad);
  cmd.trace_id = make_uuid_v7(ids.now_ms(), ids.random_u64(), ids.random_u64());
  return to_node(ids, settings.stmt_timeout_ms, std::move(cmd));
}

Parsed parse_trace_query(TraceQueryKind kind, const std::vector<std::string>& segments,
                         const QueryParams& query, const EdgeSettings& settings, IdSource& ids) {
  TraceQueryCmd cmd;
  cmd.kind = kind;
  if (kind == TraceQueryKind::message) {
    const std::string& pid = segments.at(0);
    auto v =
        pid.find_first_not_of("0123456789") == std::string::npos ? parse_u64(pid) : std::nullopt;
    if (!v) return bad_request("partitionId must be a string of decimal digits");
    cmd.partition_id = PartitionId(*v);
    cmd.transaction_id = segments.at(1);
  } else if (kind == TraceQueryKind::by_name) {
    cmd.name = segments.at(0);
  }
  auto limit = bounded_param(query, "limit", kind == TraceQueryKind::names ? 50 : 100, 1,
                             kTraceQueryLimitMax);
  if (!limit)
    return bad_request("limit must be an integer from 1 to " + std::to_string(kTraceQueryLimitMax));
  auto offset = bounded_param(query, "offset", 0, 0, UINT32_MAX);
  if (!offset) return bad_request("offset must be a non-negative integer");
  cmd.limit = *limit;
  cmd.offset = *offset;
  return to_node(ids, settings.stmt_timeout_ms, std::move(cmd));
}

HttpAnswer render_body(const TraceReply& reply, RenderAs) {
  return render_traces(reply);
}

}  // namespace queen::server
