#include "server/codec.h"

#include <xxhash.h>

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "server/json_writer.h"

namespace queen::server {

using nlohmann::json;

namespace {

// ---------- small helpers ----------

int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

void civil_from_days(int64_t z, int64_t* y, unsigned* m, unsigned* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = static_cast<int64_t>(yoe) + era * 400 + (*m <= 2);
}

std::optional<uint64_t> parse_u64(std::string_view text) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

Uuid random_uuid(IdSource& ids) {
  Uuid u;
  uint64_t a = ids.random_u64(), b = ids.random_u64();
  for (int i = 0; i < 8; ++i) {
    u.bytes[i] = static_cast<uint8_t>(a >> (8 * i));
    u.bytes[8 + i] = static_cast<uint8_t>(b >> (8 * i));
  }
  return u;
}

Parsed to_node(IdSource& ids, int64_t timeout_ms, Command command) {
  Parsed p;
  p.command = CommandEnvelope{random_uuid(ids), ids.now_ms() + timeout_ms, std::move(command)};
  return p;
}

Parsed answer_now(HttpAnswer answer) {
  Parsed p;
  p.answer = std::move(answer);
  return p;
}

Parsed bad_request(std::string_view message) {
  return answer_now(error_answer(400, "bad_request", message));
}

Parsed name_too_long(std::string_view what) {
  return answer_now(
      error_answer(413, "name_too_long",
                   std::string(what) + " longer than " + std::to_string(kNameBytesMax) + " bytes"));
}

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

// ---------- JSON bodies ----------

// Parses a request body that must be a JSON object; on failure `error` names the problem.
std::optional<json> parse_object(std::string_view body, std::string* error) {
  if (body.empty()) {
    *error = "request body is empty";
    return std::nullopt;
  }
  if (json_depth(body, kJsonDepthMax) > kJsonDepthMax) {
    *error = "request body nests deeper than " + std::to_string(kJsonDepthMax) + " levels";
    return std::nullopt;
  }
  json doc;
  try {
    doc = json::parse(body.begin(), body.end());
  } catch (const json::exception& e) {
    *error = std::string("invalid JSON: ") + e.what();
    return std::nullopt;
  }
  if (!doc.is_object()) {
    *error = "request body must be a JSON object";
    return std::nullopt;
  }
  return doc;
}

// Reads typed fields of one JSON object; the first error names the field, prefixed by `at`.
class FieldReader {
 public:
  FieldReader(const json& obj, std::string at) : obj_(obj), at_(std::move(at)) {}

  const std::string& error() const { return error_; }
  bool ok() const { return error_.empty(); }

  // Absent or null: nullopt. A string: its value. Anything else: an error.
  std::optional<std::string> opt_string(const char* key) {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_string()) {
      fail(key, "must be a string");
      return std::nullopt;
    }
    return v->get<std::string>();
  }
  std::string required_string(const char* key, bool allow_empty) {
    const json* v = find(key);
    if (v == nullptr) {
      fail(key, "is required");
      return {};
    }
    if (!v->is_string() || (!allow_empty && v->get_ref<const std::string&>().empty())) {
      fail(key, allow_empty ? "must be a string" : "must be a non-empty string");
      return {};
    }
    return v->get<std::string>();
  }
  std::optional<int64_t> opt_non_negative(const char* key) {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (v->is_number_unsigned() && v->get<uint64_t>() <= INT64_MAX) return v->get<int64_t>();
    if (v->is_number_integer() && v->get<int64_t>() >= 0) return v->get<int64_t>();
    if (v->is_number_float()) {
      double d = v->get<double>();
      if (d >= 0 && d <= 9.0e18 && d == static_cast<double>(static_cast<int64_t>(d))) {
        return static_cast<int64_t>(d);
      }
    }
    fail(key, "must be a non-negative integer");
    return std::nullopt;
  }
  std::optional<bool> opt_bool(const char* key) {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_boolean()) {
      fail(key, "must be a boolean");
      return std::nullopt;
    }
    return v->get<bool>();
  }
  void fail(const char* key, std::string_view what) {
    if (!error_.empty()) return;
    error_ = at_.empty() ? key : at_ + "." + key;
    error_ += " ";
    error_ += what;
  }

 private:
  const json* find(const char* key) const {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  const json& obj_;
  std::string at_;
  std::string error_;
};

std::string indexed(std::string_view array, size_t i) {
  return std::string(array) + "[" + std::to_string(i) + "]";
}

// ---------- push ----------

std::optional<std::string> compact_payload(const json& item) {
  auto it = item.find("payload");
  if (it == item.end()) return std::string("null");
  try {
    return it->dump();
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

// Fills `out` from items[i]; returns an answer to send at once when the item is refused.
std::optional<Parsed> read_push_item(const json& item, size_t i, int64_t now_ms, IdSource& ids,
                                     PushItem* out) {
  std::string at = indexed("items", i);
  if (!item.is_object()) return bad_request(at + " must be an object");
  FieldReader r(item, at);
  out->queue = r.required_string("queue", /*allow_empty=*/false);
  auto partition = r.opt_string("partition");
  auto transaction_id = r.opt_string("transactionId");
  auto trace_id = r.opt_string("traceId");
  if (!r.ok()) return bad_request(r.error());
  if (partition && !partition->empty()) out->partition = *partition;
  if (out->queue.size() + out->partition.size() > kNameBytesMax) {
    return name_too_long(at + ".queue and partition are");
  }
  if (transaction_id && transaction_id->size() > kTransactionIdBytesMax) {
    return bad_request(at + ".transactionId is longer than " +
                       std::to_string(kTransactionIdBytesMax) + " bytes");
  }
  auto payload = compact_payload(item);
  if (!payload) return bad_request(at + ".payload cannot be encoded as JSON");
  out->payload = std::move(*payload);
  out->message_id = make_uuid_v7(now_ms, ids.random_u64(), ids.random_u64());
  bool has_txn = transaction_id && !transaction_id->empty();
  out->transaction_id = has_txn ? std::move(*transaction_id) : uuid_to_string(out->message_id);
  out->txn_hash = hash_transaction_id(out->transaction_id);
  if (trace_id) out->trace_id = std::move(*trace_id);
  return std::nullopt;
}

// ---------- pop ----------

// A boolean query parameter: absent or empty gives `fallback`.
bool query_bool(const QueryParams& q, const char* name, bool fallback, std::string* error) {
  auto it = q.find(name);
  if (it == q.end() || it->second.empty()) return fallback;
  auto v = parse_bool(it->second);
  if (!v) {
    *error = std::string(name) + " must be true or false";
    return fallback;
  }
  return *v;
}

const std::string* query_text(const QueryParams& q, const char* name) {
  auto it = q.find(name);
  if (it == q.end() || it->second.empty()) return nullptr;
  return &it->second;
}

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
  cmd->conflation = query_bool(q, "conflation", false, &error);
  bool auto_ack = query_bool(q, "autoAck", false, &error);
  cmd->auto_ack = query_bool(q, "commitOnDelivery", auto_ack, &error);
  return error;
}

// ---------- ack ----------

std::optional<AckStatus> ack_status(const std::string& text) {
  if (text == "completed" || text == "success") return AckStatus::completed;
  if (text == "failed") return AckStatus::failed;
  if (text == "retry") return AckStatus::retry;
  if (text == "dlq") return AckStatus::dlq;
  return std::nullopt;
}

// Reads one acknowledgment; `group_override` (the batch's consumerGroup) wins over the item's.
std::string read_ack_item(const json& obj, const std::string& at,
                          const std::optional<std::string>& group_override, AckItem* out) {
  if (!obj.is_object())
    return (at.empty() ? std::string("request body") : at) + " must be an object";
  FieldReader r(obj, at);
  out->transaction_id = r.required_string("transactionId", /*allow_empty=*/false);
  std::string partition_id = r.required_string("partitionId", /*allow_empty=*/false);
  auto status = r.opt_string("status");
  auto lease_id = r.opt_string("leaseId");
  auto group = r.opt_string("consumerGroup");
  auto error = r.opt_string("error");
  if (!r.ok()) return r.error();
  std::string prefix = at.empty() ? "" : at + ".";
  auto pid = partition_id.find_first_not_of("0123456789") == std::string::npos
                 ? parse_u64(partition_id)
                 : std::nullopt;
  if (!pid) return prefix + "partitionId must be a string of decimal digits";
  out->partition_id = PartitionId(*pid);
  if (out->transaction_id.size() > kTransactionIdBytesMax) {
    return prefix + "transactionId is longer than " + std::to_string(kTransactionIdBytesMax) +
           " bytes";
  }
  out->txn_hash = hash_transaction_id(out->transaction_id);
  if (status) {
    auto s = ack_status(*status);
    if (!s) return prefix + "status must be one of completed, success, failed, retry, dlq";
    out->status = *s;
  }
  if (lease_id && !lease_id->empty()) {
    Uuid id;
    if (!uuid_from_string(*lease_id, &id)) return prefix + "leaseId must be a UUID";
    out->lease_id = id;
  }
  const auto& g = group_override ? group_override : group;
  out->group = g && !g->empty() ? *g : kQueueModeGroup;
  if (error) out->error = std::move(*error);
  return {};
}

// ---------- configure ----------

void read_options(FieldReader& r, QueueOptionsPatch* p) {
  p->lease_time_s = r.opt_non_negative("leaseTime");
  p->retry_limit = r.opt_non_negative("retryLimit");
  p->retry_delay_ms = r.opt_non_negative("retryDelay");
  p->priority = r.opt_non_negative("priority");
  p->max_size = r.opt_non_negative("maxSize");
  p->ttl_s = r.opt_non_negative("ttl");
  p->dead_letter_queue = r.opt_bool("deadLetterQueue");
  p->dlq_after_max_retries = r.opt_bool("dlqAfterMaxRetries");
  p->dedup_window_s = r.opt_non_negative("dedupWindowSeconds");
  p->delayed_processing_s = r.opt_non_negative("delayedProcessing");
  p->window_buffer_s = r.opt_non_negative("windowBuffer");
  p->retention_enabled = r.opt_bool("retentionEnabled");
  p->retention_s = r.opt_non_negative("retentionSeconds");
  p->completed_retention_s = r.opt_non_negative("completedRetentionSeconds");
  p->max_wait_time_s = r.opt_non_negative("maxWaitTimeSeconds");
  p->encryption_enabled = r.opt_bool("encryptionEnabled");
}

// ---------- rendering ----------

void render_push(const PushReply& reply, JsonWriter& w) {
  w.begin_array();
  for (const PushResult& r : reply.results) {
    w.begin_object();
    w.key("index").number(r.index);
    w.key("message_id").string(uuid_to_string(r.message_id));
    w.key("transaction_id").string(r.transaction_id);
    w.key("queueName").string(r.queue);
    w.key("partition").string(r.partition);
    w.key("partitionId").string(std::to_string(r.partition_id.value));
    switch (r.status) {
      case PushStatus::queued:
      case PushStatus::duplicate:
        w.key("status").string(r.status == PushStatus::queued ? "queued" : "duplicate");
        w.key("offset").number(r.offset.value);
        break;
      case PushStatus::error:
        w.key("status").string("error");
        w.key("error").string(r.error);
        break;
    }
    w.end_object();
  }
  w.end_array();
}

std::string lease_text(const LeaseId& id) {
  return id.is_nil() ? "" : uuid_to_string(id);
}

void render_pop_message(const PopMessage& m, const std::string& group, JsonWriter& w) {
  std::string id = uuid_to_string(m.message_id);
  w.begin_object();
  w.key("id").string(id);
  w.key("messageId").string(id);
  w.key("transactionId").string(m.transaction_id);
  w.key("traceId").string_or_null(m.trace_id);
  w.key("partitionId").string(std::to_string(m.partition_id.value));
  w.key("partition").string(m.partition);
  w.key("queue").string(m.queue);
  w.key("offset").number(m.offset.value);
  w.key("deliveryAttempt").number(m.delivery_attempt);
  w.key("data").raw(m.payload);
  w.key("createdAt").string(format_iso_us(m.created_us));
  w.key("leaseId").string(lease_text(m.lease_id));
  w.key("consumerGroup").string(group);
  w.key("producerSub").null();
  w.end_object();
}

HttpAnswer render_pop(const PopReply& reply) {
  if (reply.messages.empty()) return HttpAnswer{204, "", 0};
  const PopMessage& first = reply.messages.front();
  JsonWriter w;
  w.begin_object();
  w.key("success").boolean(true);
  w.key("queue").string(reply.queue.empty() ? first.queue : reply.queue);
  w.key("partition").string(first.partition);
  w.key("partitionId").string(std::to_string(first.partition_id.value));
  w.key("leaseId").string(lease_text(reply.lease_id));
  w.key("consumerGroup").string(reply.group);
  w.key("partitionsClaimed").number(reply.partitions_claimed);
  w.key("messages").begin_array();
  for (const PopMessage& m : reply.messages) render_pop_message(m, reply.group, w);
  w.end_array();
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

void render_ack(const AckReply& reply, JsonWriter& w) {
  w.begin_array();
  for (const AckResult& r : reply.results) {
    w.begin_object();
    w.key("index").number(r.index);
    w.key("transactionId").string(r.transaction_id);
    w.key("success").boolean(r.success);
    w.key("error").string_or_null(r.error);
    w.key("leaseReleased").boolean(r.lease_released);
    w.key("dlq").boolean(r.dlq);
    w.key("noop").boolean(r.noop);
    w.key("queueName").string_or_null(r.queue);
    w.key("partitionName").string_or_null(r.partition);
    w.end_object();
  }
  w.end_array();
}

void render_options(const QueueOptions& o, JsonWriter& w) {
  w.begin_object();
  w.key("leaseTime").number(o.lease_time_s);
  w.key("retryLimit").number(o.retry_limit);
  w.key("retryDelay").number(o.retry_delay_ms);
  w.key("priority").number(o.priority);
  w.key("maxSize").number(o.max_size);
  w.key("ttl").number(o.ttl_s);
  w.key("deadLetterQueue").boolean(o.dead_letter_queue);
  w.key("dlqAfterMaxRetries").boolean(o.dlq_after_max_retries);
  w.key("dedupWindowSeconds").number(o.dedup_window_s);
  w.key("delayedProcessing").number(o.delayed_processing_s);
  w.key("windowBuffer").number(o.window_buffer_s);
  w.key("retentionEnabled").boolean(o.retention_enabled);
  w.key("retentionSeconds").number(o.retention_s);
  w.key("completedRetentionSeconds").number(o.completed_retention_s);
  w.key("maxWaitTimeSeconds").number(o.max_wait_time_s);
  w.key("encryptionEnabled").boolean(o.encryption_enabled);
  w.end_object();
}

void render_configure(const ConfigureReply& reply, JsonWriter& w) {
  w.begin_object();
  w.key("configured").boolean(true);
  w.key("queue").string(reply.queue);
  w.key("queueId").string(std::to_string(reply.queue_id.value));
  w.key("partitionId").string(std::to_string(reply.default_partition_id.value));
  w.key("namespace").string(reply.options.ns);
  w.key("task").string(reply.options.task);
  w.key("options");
  render_options(reply.options, w);
  w.end_object();
}

void render_health(const HealthReply& reply, JsonWriter& w) {
  w.begin_object();
  w.key("status").string("healthy");
  w.key("engine").string("raft");
  w.key("version").string(kVersion);
  w.key("raft").begin_object();
  w.key("role").string(reply.role);
  w.key("leader").number(1);
  w.key("term").number(reply.term);
  w.key("applied").number(reply.applied_index);
  w.key("commit").number(reply.commit_index);
  w.key("lag").number(0);
  w.key("storageReady").boolean(true);
  w.end_object();
  w.key("queues").number(reply.queues);
  w.key("partitions").number(reply.partitions);
  w.end_object();
}

void render_dlq(const DlqReply& reply, JsonWriter& w) {
  w.begin_object();
  w.key("messages").begin_array();
  for (const DlqRecord& r : reply.records) {
    std::string id = uuid_to_string(r.message_id);
    w.begin_object();
    w.key("id").string(id);
    w.key("messageId").string(id);
    w.key("transactionId").string(r.transaction_id);
    w.key("partitionId").string(std::to_string(r.partition_id.value));
    w.key("queue").string(r.queue);
    w.key("partition").string(r.partition);
    w.key("consumerGroup").string(r.group);
    w.key("offset").number(r.offset.value);
    w.key("errorMessage").string_or_null(r.error);
    w.key("retryCount").number(r.retry_count);
    w.key("data").raw(r.payload);
    w.key("producerSub").null();
    w.key("createdAt").string(format_iso_us(r.created_us));
    w.key("failedAt").string(format_iso_us(r.failed_at_us));
    w.end_object();
  }
  w.end_array();
  w.key("total").number(reply.total);
  w.end_object();
}

// ---------- pop command ----------

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
  return to_node(ids, cmd.wait ? timeout_ms : settings.stmt_timeout_ms, std::move(cmd));
}

void render_lease_extend(const LeaseExtendReply& reply, JsonWriter& w) {
  w.begin_array().begin_object();
  w.key("index").number(0);
  w.key("leaseId").string(uuid_to_string(reply.lease_id));
  w.key("success").boolean(reply.success);
  w.key("error").string_or_null(reply.error);
  w.key("expiresAt");
  if (reply.success) {
    w.string(format_iso_us(reply.expires_us));
  } else {
    w.null();
  }
  w.end_object().end_array();
}

}  // namespace

// ---------- public: helpers ----------

EdgeSettings edge_settings(const ServerConfig& config) {
  return EdgeSettings{config.stmt_timeout_ms, config.pop_timeout_ms_default,
                      config.subscription_mode_default};
}

HttpAnswer error_answer(unsigned status, std::string_view code, std::string_view message) {
  JsonWriter w;
  w.begin_object().key("error").string(utf8_lossy(message)).key("code").string(code).end_object();
  return HttpAnswer{status, w.take(), 0};
}

Hash128 hash_transaction_id(std::string_view transaction_id) {
  XXH128_hash_t h = XXH3_128bits(transaction_id.data(), transaction_id.size());
  return Hash128{h.low64, h.high64};
}

size_t json_depth(std::string_view text, size_t limit) {
  size_t depth = 0, depth_max = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      depth_max = std::max(depth_max, ++depth);
      if (depth_max > limit) return depth_max;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return depth_max;
}

std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%') {
      if (i + 2 >= text.size()) return std::nullopt;
      int h = hex(text[i + 1]), l = hex(text[i + 2]);
      if (h < 0 || l < 0) return std::nullopt;
      out.push_back(static_cast<char>(h * 16 + l));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::optional<QueryParams> parse_query(std::string_view query) {
  QueryParams params;
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    auto key = percent_decode(pair.substr(0, eq), true);
    auto value = percent_decode(eq == std::string_view::npos ? "" : pair.substr(eq + 1), true);
    if (!key || !value || !valid_utf8(*key) || !valid_utf8(*value)) return std::nullopt;
    params.emplace(std::move(*key), std::move(*value));
  }
  return params;
}

bool valid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  size_t n = text.size(), i = 0;
  while (i < n) {
    unsigned char c = s[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

std::string utf8_lossy(std::string_view text) {
  if (valid_utf8(text)) return std::string(text);
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    // Keeps every valid sequence; each byte of an invalid one becomes '?'.
    for (size_t len = 4; len >= 1; --len) {
      if (i + len <= text.size() && valid_utf8(text.substr(i, len))) {
        out.append(text.substr(i, len));
        i += len - 1;
        break;
      }
      if (len == 1) out.push_back('?');
    }
  }
  return out;
}

std::string format_iso_us(int64_t unix_us) {
  int64_t secs = unix_us >= 0 ? unix_us / 1000000 : -((-unix_us + 999999) / 1000000);
  auto frac = static_cast<int>(unix_us - secs * 1000000);
  int64_t days = secs >= 0 ? secs / 86400 : -((-secs + 86399) / 86400);
  int64_t sod = secs - days * 86400;
  int64_t y;
  unsigned m, d;
  civil_from_days(days, &y, &m, &d);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02d:%02d:%02d.%06dZ", static_cast<long long>(y),
                m, d, static_cast<int>(sod / 3600), static_cast<int>(sod / 60 % 60),
                static_cast<int>(sod % 60), frac);
  return buf;
}

// YYYY-MM-DD[(T| )HH:MM[:SS[.fraction]]][Z|(+|-)HH[:]MM]; no zone means UTC.
std::optional<int64_t> parse_iso_us(std::string_view t) {
  size_t i = 0;
  auto digits = [&](size_t count) -> std::optional<int> {
    if (i + count > t.size()) return std::nullopt;
    int v = 0;
    for (size_t k = 0; k < count; ++k) {
      char c = t[i + k];
      if (c < '0' || c > '9') return std::nullopt;
      v = v * 10 + (c - '0');
    }
    i += count;
    return v;
  };
  auto expect = [&](char c) {
    if (i < t.size() && t[i] == c) {
      ++i;
      return true;
    }
    return false;
  };
  auto year = digits(4);
  if (!year || !expect('-')) return std::nullopt;
  auto month = digits(2);
  if (!month || !expect('-')) return std::nullopt;
  auto day = digits(2);
  if (!day || *month < 1 || *month > 12 || *day < 1 || *day > 31) return std::nullopt;
  int hour = 0, minute = 0, second = 0;
  int64_t frac_us = 0;
  if (i < t.size() && (t[i] == 'T' || t[i] == 't' || t[i] == ' ')) {
    ++i;
    auto h = digits(2);
    if (!h || !expect(':')) return std::nullopt;
    auto mi = digits(2);
    if (!mi) return std::nullopt;
    hour = *h, minute = *mi;
    if (expect(':')) {
      auto s = digits(2);
      if (!s) return std::nullopt;
      second = *s;
      if (expect('.') || expect(',')) {
        int64_t scale = 100000;
        size_t start = i;
        while (i < t.size() && t[i] >= '0' && t[i] <= '9') {
          frac_us += (t[i] - '0') * scale;
          scale /= 10;
          ++i;
        }
        if (i == start) return std::nullopt;
      }
    }
    if (hour > 23 || minute > 59 || second > 60) return std::nullopt;
  }
  int64_t offset_s = 0;
  if (i < t.size()) {
    if (t[i] == 'Z' || t[i] == 'z') {
      ++i;
    } else if (t[i] == '+' || t[i] == '-') {
      int sign = t[i] == '-' ? -1 : 1;
      ++i;
      auto oh = digits(2);
      if (!oh) return std::nullopt;
      expect(':');
      auto om = digits(2);
      if (!om || *oh > 23 || *om > 59) return std::nullopt;
      offset_s = sign * (*oh * 3600 + *om * 60);
    }
  }
  if (i != t.size()) return std::nullopt;
  int64_t days = days_from_civil(*year, static_cast<unsigned>(*month), static_cast<unsigned>(*day));
  int64_t secs = days * 86400 + hour * 3600 + minute * 60 + second - offset_s;
  return secs * 1000000 + frac_us;
}

// ---------- public: parsers ----------

Parsed parse_push(std::string_view body, const EdgeSettings& settings, IdSource& ids) {
  std::string error;
  auto doc = parse_object(body, &error);
  if (!doc) return bad_request(error);
  auto items = doc->find("items");
  if (items == doc->end() || !items->is_array()) return bad_request("items must be an array");
  if (items->empty()) return answer_now(HttpAnswer{201, "[]", 0});
  PushCmd cmd;
  cmd.items.resize(items->size());
  int64_t now_ms = ids.now_ms();
  for (size_t i = 0; i < items->size(); ++i) {
    if (auto refused = read_push_item((*items)[i], i, now_ms, ids, &cmd.items[i])) {
      return std::move(*refused);
    }
  }
  return to_node(ids, settings.pop_timeout_ms_default, std::move(cmd));
}

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

Parsed parse_ack(std::string_view body, const EdgeSettings& settings, IdSource& ids) {
  std::string error;
  auto doc = parse_object(body, &error);
  if (!doc) return bad_request(error);
  AckCmd cmd;
  cmd.items.resize(1);
  error = read_ack_item(*doc, "", std::nullopt, &cmd.items[0]);
  if (!error.empty()) return bad_request(error);
  return to_node(ids, settings.stmt_timeout_ms, std::move(cmd));
}

Parsed parse_ack_batch(std::string_view body, const EdgeSettings& settings, IdSource& ids) {
  std::string error;
  auto doc = parse_object(body, &error);
  if (!doc) return bad_request(error);
  auto acks = doc->find("acknowledgments");
  if (acks == doc->end() || !acks->is_array()) {
    return bad_request("acknowledgments must be an array");
  }
  FieldReader top(*doc, "");
  auto group = top.opt_string("consumerGroup");
  if (!top.ok()) return bad_request(top.error());
  if (group && group->empty()) group.reset();
  if (acks->empty()) return answer_now(HttpAnswer{200, "[]", 0});
  AckCmd cmd;
  cmd.items.resize(acks->size());
  for (size_t i = 0; i < acks->size(); ++i) {
    error = read_ack_item((*acks)[i], indexed("acknowledgments", i), group, &cmd.items[i]);
    if (!error.empty()) return bad_request(error);
  }
  return to_node(ids, settings.stmt_timeout_ms, std::move(cmd));
}

Parsed parse_configure(std::string_view body, const EdgeSettings& settings, IdSource& ids) {
  std::string error;
  auto doc = parse_object(body, &error);
  if (!doc) return bad_request(error);
  FieldReader top(*doc, "");
  ConfigureCmd cmd;
  cmd.queue = top.required_string("queue", /*allow_empty=*/false);
  cmd.patch.ns = top.opt_string("namespace");
  cmd.patch.task = top.opt_string("task");
  auto mode = top.opt_string("mode");
  if (!top.ok()) return bad_request(top.error());
  if (mode && *mode != "merge" && *mode != "replace") {
    return bad_request("mode must be merge or replace");
  }
  cmd.replace = mode && *mode == "replace";
  if (cmd.queue.size() > kNameBytesMax) return name_too_long("queue is");
  auto options = doc->find("options");
  if (options != doc->end() && !options->is_null()) {
    if (!options->is_object()) return bad_request("options must be an object");
    FieldReader r(*options, "options");
    read_options(r, &cmd.patch);
    if (!r.ok()) return bad_request(r.error());
  }
  return to_node(ids, settings.stmt_timeout_ms, std::move(cmd));
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
  return to_node(ids, settings.stmt_timeout_ms, std::move(cmd));
}

Parsed parse_health(const EdgeSettings& settings, IdSource& ids) {
  return to_node(ids, settings.stmt_timeout_ms, HealthCmd{});
}

// ---------- public: rendering ----------

HttpAnswer render_reply(const Reply& reply) {
  JsonWriter w;
  unsigned status = 200;
  if (const auto* e = std::get_if<ErrorReply>(&reply.body)) {
    HttpAnswer a = error_answer(static_cast<unsigned>(e->http_status), e->code, e->message);
    a.retry_after_s = e->retry_after_s;
    return a;
  } else if (const auto* push = std::get_if<PushReply>(&reply.body)) {
    render_push(*push, w);
    status = 201;
  } else if (const auto* pop = std::get_if<PopReply>(&reply.body)) {
    return render_pop(*pop);
  } else if (const auto* ack = std::get_if<AckReply>(&reply.body)) {
    render_ack(*ack, w);
  } else if (const auto* conf = std::get_if<ConfigureReply>(&reply.body)) {
    render_configure(*conf, w);
  } else if (const auto* health = std::get_if<HealthReply>(&reply.body)) {
    render_health(*health, w);
  } else if (const auto* dlq = std::get_if<DlqReply>(&reply.body)) {
    render_dlq(*dlq, w);
  } else if (const auto* lease = std::get_if<LeaseExtendReply>(&reply.body)) {
    render_lease_extend(*lease, w);
  } else {
    return error_answer(500, "internal", "the node answered with a reply this route cannot render");
  }
  return HttpAnswer{status, w.take(), 0};
}

}  // namespace queen::server
