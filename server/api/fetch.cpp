// Reads by offset: POST /api/v1/fetch, /api/v1/fetch/offsets, /api/v1/partitions/changed.
#include "server/api/common.h"

namespace queen::server {

namespace {

constexpr size_t kFetchEntriesMax = 1024;
constexpr int64_t kFetchBytesDefault = 1 << 20;
constexpr int64_t kFetchBytesMaxPerEntry = 8 << 20;
constexpr int64_t kFetchWaitMsMax = 30000;
constexpr int64_t kChangedLimitMax = 10000;

void render_record(const PopMessage& m, JsonWriter& w) {
  w.begin_object();
  w.key("offset").number(m.offset.value);
  w.key("transactionId").string(m.transaction_id);
  w.key("messageId").uuid(m.message_id);
  w.key("traceId").string_or_null(m.trace_id);
  w.key("producerSub").string_or_null(m.producer_sub);
  w.key("createdAt").string(format_iso_us(m.created_us));
  w.key("data").raw(m.payload);
  w.end_object();
}

HttpAnswer render_fetch(const FetchReply& r) {
  JsonWriter w;
  w.begin_object().key("entries").begin_array();
  for (const FetchEntryReply& e : r.entries) {
    w.begin_object();
    w.key("queue").string(e.queue);
    w.key("partition").string(e.partition);
    w.key("partitionId");
    e.error == "UNKNOWN_TOPIC_OR_PARTITION" ? w.null() : w.decimal_string(e.partition_id.value);
    w.key("error").string_or_null(e.error);
    w.key("highWatermark").number(e.high_watermark);
    w.key("logStartOffset").number(e.log_start);
    w.key("records").begin_array();
    for (const PopMessage& m : e.records) render_record(m, w);
    w.end_array();
    w.end_object();
  }
  w.end_array().end_object();
  return HttpAnswer{200, w.take(), 0};
}

HttpAnswer render_fetch_offsets(const FetchOffsetsReply& r) {
  JsonWriter w;
  w.begin_object().key("entries").begin_array();
  for (const FetchOffsetsEntryReply& e : r.entries) {
    w.begin_object();
    w.key("queue").string(e.queue);
    w.key("partition").string(e.partition);
    w.key("error").string_or_null(e.error);
    w.key("offset");
    e.offset >= 0 ? w.number(static_cast<uint64_t>(e.offset)) : w.null();
    w.key("highWatermark").number(e.high_watermark);
    w.end_object();
  }
  w.end_array().end_object();
  return HttpAnswer{200, w.take(), 0};
}

HttpAnswer render_partitions_changed(const PartitionsChangedReply& r) {
  JsonWriter w;
  w.begin_object().key("partitions").begin_array();
  for (const PartitionChange& p : r.partitions) {
    w.begin_object();
    w.key("queue").string(p.queue);
    w.key("partition").string(p.partition);
    w.key("partitionId").decimal_string(p.partition_id.value);
    w.key("lastOffset");
    p.last_offset > 0 ? w.number(p.last_offset - 1) : w.null();
    w.key("highWatermark").number(p.last_offset);
    w.key("logStart").number(p.log_start);
    w.key("lastWriteAt").string(format_iso_us(p.last_write_us));
    w.end_object();
  }
  w.end_array();
  w.key("nextCursor");
  r.next_after ? w.decimal_string(r.next_after) : w.null();
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

// A time given as an ISO-8601 string or as milliseconds since the epoch.
std::optional<int64_t> time_field(const json& v) {
  if (v.is_string()) return parse_iso_us(v.get_ref<const std::string&>());
  auto ms = json_int(v);
  if (!ms || *ms < 0 || *ms > INT64_MAX / 1000) return std::nullopt;
  return *ms * 1000;
}

// The `entries` array of a fetch body: present, 1 to 1024 objects.
std::optional<Parsed> fetch_entries(const json& doc, const json** out) {
  if (auto e = array_field(doc, "entries", out)) return bad_request(*e);
  if ((*out)->empty() || (*out)->size() > kFetchEntriesMax)
    return bad_request("entries must hold 1 to " + std::to_string(kFetchEntriesMax) + " entries");
  return std::nullopt;
}

// One entry's queue and partition (Default when left out).
std::optional<Parsed> fetch_names(FieldReader& r, std::string* queue, std::string* partition) {
  *queue = r.required_string("queue", /*allow_empty=*/false);
  *partition = r.opt_string("partition").value_or("Default");
  if (!r.ok()) return bad_request(r.error());
  if (partition->empty()) return bad_request("partition must be a non-empty string");
  return std::nullopt;
}

}  // namespace

std::optional<uint32_t> bounded_param(const QueryParams& q, const char* name, uint32_t dflt,
                                      uint32_t lo, uint32_t hi) {
  const std::string* text = query_text(q, name);
  if (!text) return dflt;
  auto v = parse_u64(*text);
  if (!v || *v < lo || *v > hi) return std::nullopt;
  return static_cast<uint32_t>(*v);
}

Parsed parse_fetch(std::string_view body, const EdgeSettings& settings, IdSource& ids) {
  std::string error;
  auto doc = parse_object(body, &error);
  if (!doc) return bad_request(error);
  FieldReader top(*doc, "");
  auto wait_ms = top.opt_non_negative("maxWaitMs");
  auto min_bytes = top.opt_non_negative("minBytes");
  if (!top.ok()) return bad_request(top.error());
  if (wait_ms && *wait_ms > kFetchWaitMsMax)
    return bad_request("maxWaitMs must be at most " + std::to_string(kFetchWaitMsMax));
  const json* entries = nullptr;
  if (auto refused = fetch_entries(*doc, &entries)) return *refused;
  FetchCmd cmd;
  for (size_t i = 0; i < entries->size(); ++i) {
    const json& e = (*entries)[i];
    std::string at = indexed("entries", i);
    if (!e.is_object()) return bad_request(at + " must be an object");
    FieldReader r(e, at);
    FetchEntry& out = cmd.entries.emplace_back();
    if (auto refused = fetch_names(r, &out.queue, &out.partition)) return *refused;
    auto offset = r.opt_non_negative("offset");
    auto max_bytes = r.opt_non_negative("maxBytes");
    if (!r.ok()) return bad_request(r.error());
    if (!offset) return bad_request(at + ".offset is required");
    if (max_bytes && (*max_bytes < 1 || *max_bytes > kFetchBytesMaxPerEntry))
      return bad_request(at + ".maxBytes must be from 1 to " +
                         std::to_string(kFetchBytesMaxPerEntry));
    out.offset = Offset(static_cast<uint64_t>(*offset));
    out.max_bytes = static_cast<uint32_t>(max_bytes.value_or(kFetchBytesDefault));
  }
  cmd.min_bytes = static_cast<uint64_t>(min_bytes.value_or(0));
  cmd.max_wait_ms = wait_ms.value_or(0);
  return to_node(ids, settings.stmt_timeout_ms, std::move(cmd));
}

Parsed parse_fetch_offsets(std::string_view body, const EdgeSettings& settings, IdSource& ids) {
  std::string error;
  auto doc = parse_object(body, &error);
  if (!doc) return bad_request(error);
  const json* entries = nullptr;
  if (auto refused = fetch_entries(*doc, &entries)) return *refused;
  FetchOffsetsCmd cmd;
  for (size_t i = 0; i < entries->size(); ++i) {
    const json& e = (*entries)[i];
    std::string at = indexed("entries", i);
    if (!e.is_object()) return bad_request(at + " must be an object");
    FieldReader r(e, at);
    FetchOffsetsEntry& out = cmd.entries.emplace_back();
    if (auto refused = fetch_names(r, &out.queue, &out.partition)) return *refused;
    const json* ts = field(e, "timestamp");
    auto us = ts ? time_field(*ts) : std::nullopt;
    if (!us) return bad_request(at + ".timestamp must be an ISO-8601 time or epoch milliseconds");
    out.timestamp_us = *us;
  }
  return to_node(ids, settings.stmt_timeout_ms, std::move(cmd));
}

Parsed parse_partitions_changed(std::string_view body, const EdgeSettings& settings,
                                IdSource& ids) {
  std::string error;
  auto doc = parse_object(body.empty() ? std::string_view("{}") : body, &error);
  if (!doc) return bad_request(error);
  FieldReader r(*doc, "");
  PartitionsChangedCmd cmd;
  cmd.queue = r.opt_string("queue").value_or("");
  auto cursor = r.opt_string("cursor");
  auto limit = r.opt_non_negative("limit");
  if (!r.ok()) return bad_request(r.error());
  if (const json* since = field(*doc, "since")) {
    auto us = time_field(*since);
    if (!us) return bad_request("since must be an ISO-8601 time or epoch milliseconds");
    cmd.since_us = *us;
  }
  if (cursor && !cursor->empty()) {
    bool digits = cursor->find_first_not_of("0123456789") == std::string::npos;
    auto v = digits ? parse_u64(*cursor) : std::nullopt;
    if (!v) return answer_now(error_answer(400, "BAD_CURSOR", "cursor is not one this node gave"));
    cmd.after = *v;
  }
  if (limit && (*limit < 1 || *limit > kChangedLimitMax))
    return bad_request("limit must be from 1 to " + std::to_string(kChangedLimitMax));
  cmd.limit = static_cast<uint32_t>(limit.value_or(1000));
  return to_node(ids, settings.stmt_timeout_ms, std::move(cmd));
}

HttpAnswer render_body(const FetchReply& r, RenderAs) {
  return render_fetch(r);
}

HttpAnswer render_body(const FetchOffsetsReply& r, RenderAs) {
  return render_fetch_offsets(r);
}

HttpAnswer render_body(const PartitionsChangedReply& r, RenderAs) {
  return render_partitions_changed(r);
}

}  // namespace queen::server
