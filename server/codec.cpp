#include "server/codec.h"

#include <xxhash.h>

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>
#include <set>

#include "server/json_scan.h"
#include "server/json_writer.h"
#include "server/observability.h"

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

// Queue, partition and group names: any bytes but the C0 controls (NUL included) and DEL.
const std::string kNoControlChars = "must not contain control characters (NUL, C0, DEL)";

bool has_control_char(std::string_view name) {
  return std::any_of(name.begin(), name.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
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

// The fields of one push item, however they were read.
struct PushItemFields {
  std::string queue;
  std::optional<std::string> partition, transaction_id, trace_id;
  std::string payload = "null";  // compact JSON
};

// Why an item is refused, after its name: the name is built only then, off the hot path.
struct ItemRefusal {
  bool name_too_long = false;  // 413, else 400
  std::string what;
};

Parsed refuse_item(const std::string& at, const ItemRefusal& r) {
  std::string message = at + "." + r.what;
  return r.name_too_long ? name_too_long(message) : bad_request(message);
}

// A message id for a request's item: the one after `prev`'s (the request's item before, if
// any), so one request's ids run on and its recorded answer keeps them as a run
// (core/node/outcome.h); a random UUIDv7 for the first, or when the run cannot go on.
Uuid mint_message_id(int64_t now_ms, IdSource& ids, const PushItem* prev) {
  Uuid next;
  if (prev && uuid_successor(prev->message_id, &next)) return next;
  return make_uuid_v7(now_ms, ids.random_u64(), ids.random_u64());
}

// Checks the fields and fills `out`; says why when the item is refused. `prev` is the
// request's item before (nullptr for the first).
std::optional<ItemRefusal> finish_push_item(PushItemFields f, int64_t now_ms, IdSource& ids,
                                            const PushItem* prev, PushItem* out) {
  out->queue = std::move(f.queue);
  if (f.partition && !f.partition->empty()) out->partition = std::move(*f.partition);
  if (out->queue.size() + out->partition.size() > kNameBytesMax) {
    return ItemRefusal{true, "queue and partition are"};
  }
  if (has_control_char(out->queue)) return ItemRefusal{false, "queue " + kNoControlChars};
  if (has_control_char(out->partition)) return ItemRefusal{false, "partition " + kNoControlChars};
  auto& transaction_id = f.transaction_id;
  if (transaction_id && transaction_id->size() > kTransactionIdBytesMax) {
    return ItemRefusal{
        false, "transactionId is longer than " + std::to_string(kTransactionIdBytesMax) + " bytes"};
  }
  out->payload = std::move(f.payload);
  out->message_id = mint_message_id(now_ms, ids, prev);
  bool has_txn = transaction_id && !transaction_id->empty();
  out->transaction_id = has_txn ? std::move(*transaction_id) : uuid_to_string(out->message_id);
  out->txn_hash = hash_transaction_id(out->transaction_id);
  if (f.trace_id) out->trace_id = std::move(*f.trace_id);
  return std::nullopt;
}

// Fills `out` from items[i]; returns an answer to send at once when the item is refused.
std::optional<Parsed> read_push_item(const json& item, const std::string& at, int64_t now_ms,
                                     IdSource& ids, const PushItem* prev, PushItem* out) {
  if (!item.is_object()) return bad_request(at + " must be an object");
  FieldReader r(item, at);
  PushItemFields f;
  f.queue = r.required_string("queue", /*allow_empty=*/false);
  f.partition = r.opt_string("partition");
  f.transaction_id = r.opt_string("transactionId");
  f.trace_id = r.opt_string("traceId");
  if (!r.ok()) return bad_request(r.error());
  auto payload = compact_payload(item);
  if (!payload) return bad_request(at + ".payload cannot be encoded as JSON");
  f.payload = std::move(*payload);
  if (auto refused = finish_push_item(std::move(f), now_ms, ids, prev, out)) {
    return refuse_item(at, *refused);
  }
  return std::nullopt;
}

// ---------- push without a tree ----------
// The hot path: a push body is scanned (server/json_scan.h), each payload kept as sent. Any
// body it does not take as is (an error, a repeated key, a field of an unexpected type) goes
// to the general parser, which names the error.

// A string-or-null field, read once: null leaves `out` empty.
bool scan_opt_string(JsonScan& s, std::optional<std::string>* out, bool* seen) {
  if (*seen) return false;
  *seen = true;
  if (s.next_is('n')) {
    std::string_view raw;
    return s.value(&raw) && raw == "null";
  }
  std::string v;
  if (!s.string(&v)) return false;
  *out = std::move(v);
  return true;
}

// Any value, skipped (validated all the same).
bool scan_skip(JsonScan& s) {
  std::string_view raw;
  return s.value(&raw);
}

// An object: `member(key)` reads each member's value, returning false to give up.
template <class F>
bool scan_members(JsonScan& s, F&& member) {
  if (!s.eat('{')) return false;
  if (s.eat('}')) return true;
  std::string key;
  do {
    if (!s.string(&key) || !s.eat(':') || !member(key)) return false;
  } while (s.eat(','));
  return s.eat('}');
}

// An array: `element()` reads each element, returning false to give up.
template <class F>
bool scan_elements(JsonScan& s, F&& element) {
  if (!s.eat('[')) return false;
  if (s.eat(']')) return true;
  do {
    if (!element()) return false;
  } while (s.eat(','));
  return s.eat(']');
}

// A payload's bytes as sent, read once.
bool scan_payload(JsonScan& s, std::string* out, bool* seen) {
  std::string_view raw;
  if (*seen || !s.value(&raw)) return false;
  *seen = true;
  out->assign(raw);
  return true;
}

bool scan_push_item(JsonScan& s, PushItemFields* f) {
  std::optional<std::string> queue;
  bool seen[5] = {};
  bool ok = scan_members(s, [&](const std::string& key) {
    if (key == "queue") return scan_opt_string(s, &queue, &seen[0]);
    if (key == "partition") return scan_opt_string(s, &f->partition, &seen[1]);
    if (key == "transactionId") return scan_opt_string(s, &f->transaction_id, &seen[2]);
    if (key == "traceId") return scan_opt_string(s, &f->trace_id, &seen[3]);
    if (key == "payload") return scan_payload(s, &f->payload, &seen[4]);
    return scan_skip(s);
  });
  if (!ok || !queue || queue->empty()) return false;  // no queue: the general parser names it
  f->queue = std::move(*queue);
  return true;
}

std::optional<std::vector<PushItemFields>> scan_push(std::string_view body) {
  JsonScan s(body, kJsonDepthMax);
  std::vector<PushItemFields> items;
  bool seen_items = false;
  bool ok = scan_members(s, [&](const std::string& key) {
    if (key != "items") return scan_skip(s);
    if (seen_items) return false;
    seen_items = true;
    return scan_elements(s, [&] { return scan_push_item(s, &items.emplace_back()); });
  });
  if (!ok || !seen_items || !s.at_end()) return std::nullopt;
  return items;
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

// ---------- ack ----------

std::optional<AckStatus> ack_status(const std::string& text) {
  if (text == "completed" || text == "success") return AckStatus::completed;
  if (text == "failed") return AckStatus::failed;
  if (text == "retry") return AckStatus::retry;
  if (text == "dlq") return AckStatus::dlq;
  return std::nullopt;
}

// Reads one acknowledgment; `group_override` (the batch's consumerGroup) wins over the item's.
// The fields of one ack item, however they were read.
struct AckItemFields {
  std::string transaction_id, partition_id;
  std::optional<std::string> status, lease_id, group, error;
};

// Checks the fields and fills `out`; returns why the item is refused (after its name), or
// empty.
std::string finish_ack_item(AckItemFields f, const std::optional<std::string>& group_override,
                            AckItem* out) {
  auto pid = f.partition_id.find_first_not_of("0123456789") == std::string::npos
                 ? parse_u64(f.partition_id)
                 : std::nullopt;
  if (!pid) return "partitionId must be a string of decimal digits";
  out->partition_id = PartitionId(*pid);
  out->transaction_id = std::move(f.transaction_id);
  if (out->transaction_id.size() > kTransactionIdBytesMax) {
    return "transactionId is longer than " + std::to_string(kTransactionIdBytesMax) + " bytes";
  }
  out->txn_hash = hash_transaction_id(out->transaction_id);
  if (f.status) {
    auto s = ack_status(*f.status);
    if (!s) return "status must be one of completed, success, failed, retry, dlq";
    out->status = *s;
  }
  if (f.lease_id && !f.lease_id->empty()) {
    Uuid id;
    if (!uuid_from_string(*f.lease_id, &id)) return "leaseId must be a UUID";
    out->lease_id = id;
  }
  const auto& g = group_override ? group_override : f.group;
  out->group = g && !g->empty() ? *g : kQueueModeGroup;
  if (has_control_char(out->group)) return "consumerGroup " + kNoControlChars;
  if (f.error) out->error = std::move(*f.error);
  return {};
}

std::string read_ack_item(const json& obj, const std::string& at,
                          const std::optional<std::string>& group_override, AckItem* out) {
  if (!obj.is_object())
    return (at.empty() ? std::string("request body") : at) + " must be an object";
  FieldReader r(obj, at);
  AckItemFields f;
  f.transaction_id = r.required_string("transactionId", /*allow_empty=*/false);
  f.partition_id = r.required_string("partitionId", /*allow_empty=*/false);
  f.status = r.opt_string("status");
  f.lease_id = r.opt_string("leaseId");
  f.group = r.opt_string("consumerGroup");
  f.error = r.opt_string("error");
  if (!r.ok()) return r.error();
  std::string refused = finish_ack_item(std::move(f), group_override, out);
  if (refused.empty() || at.empty()) return refused;
  return at + "." + refused;
}

// An ack item's keys as scanned; the two ids stay optional until the caller checks them.
struct ScannedAck {
  std::optional<std::string> transaction_id, partition_id;
  AckItemFields fields;  // status, leaseId, consumerGroup and error
  bool seen[6] = {};
};

// Scans the value of `key` into `a` if it is one of an ack item's keys: nullopt if it is
// not, else whether the value scanned (a string or null, the key's first time).
std::optional<bool> scan_ack_key(JsonScan& s, const std::string& key, ScannedAck* a) {
  if (key == "transactionId") return scan_opt_string(s, &a->transaction_id, &a->seen[0]);
  if (key == "partitionId") return scan_opt_string(s, &a->partition_id, &a->seen[1]);
  if (key == "status") return scan_opt_string(s, &a->fields.status, &a->seen[2]);
  if (key == "leaseId") return scan_opt_string(s, &a->fields.lease_id, &a->seen[3]);
  if (key == "consumerGroup") return scan_opt_string(s, &a->fields.group, &a->seen[4]);
  if (key == "error") return scan_opt_string(s, &a->fields.error, &a->seen[5]);
  return std::nullopt;
}

bool filled(const std::optional<std::string>& v) {
  return v && !v->empty();
}

// The ack's fields, once both ids are known to be filled.
AckItemFields take_ack_fields(ScannedAck&& a) {
  AckItemFields f = std::move(a.fields);
  f.transaction_id = std::move(*a.transaction_id);
  f.partition_id = std::move(*a.partition_id);
  return f;
}

// An ack batch item scanned: every field a string or null, each at most once, the required
// ones non-empty; false leaves the body to the general parser.
bool scan_ack_item(JsonScan& s, AckItemFields* f) {
  ScannedAck a;
  bool ok = scan_members(s, [&](const std::string& key) {
    if (auto scanned = scan_ack_key(s, key, &a)) return *scanned;
    return scan_skip(s);
  });
  if (!ok || !filled(a.transaction_id) || !filled(a.partition_id)) return false;
  *f = take_ack_fields(std::move(a));
  return true;
}

struct ScannedAckBatch {
  std::vector<AckItemFields> items;
  std::optional<std::string> group;
};

std::optional<ScannedAckBatch> scan_ack_batch(std::string_view body) {
  JsonScan s(body, kJsonDepthMax);
  ScannedAckBatch batch;
  bool seen_acks = false, seen_group = false;
  bool ok = scan_members(s, [&](const std::string& key) {
    if (key == "consumerGroup") return scan_opt_string(s, &batch.group, &seen_group);
    if (key != "acknowledgments") return scan_skip(s);
    if (seen_acks) return false;
    seen_acks = true;
    return scan_elements(s, [&] { return scan_ack_item(s, &batch.items.emplace_back()); });
  });
  if (!ok || !seen_acks || !s.at_end()) return std::nullopt;
  return batch;
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
  p->min_pop_wait_time_ms = r.opt_non_negative("minPopWaitTime");
}

// ---------- rendering ----------

// Room for the fixed part of one rendered item (keys, ids, numbers); names and payloads add.
constexpr size_t kRenderedItemBytes = 240;

void render_push(const PushReply& reply, JsonWriter& w) {
  w.reserve(reply.results.size() * kRenderedItemBytes);
  w.begin_array();
  for (const PushResult& r : reply.results) {
    w.begin_object();
    w.key("index").number(r.index);
    w.key("message_id").uuid(r.message_id);
    w.key("transaction_id").string(r.transaction_id);
    w.key("queueName").string(r.queue);
    w.key("partition").string(r.partition);
    w.key("partitionId").decimal_string(r.partition_id.value);
    switch (r.status) {
      case PushStatus::queued:
      case PushStatus::duplicate:
      case PushStatus::buffered:
        w.key("status").string(r.status == PushStatus::queued      ? "queued"
                               : r.status == PushStatus::duplicate ? "duplicate"
                                                                   : "buffered");
        w.key("offset").number(r.offset.value);
        if (r.status == PushStatus::buffered) {  // the reference's buffered item names these
          w.key("queue").string(r.queue);
          w.key("transactionId").string(r.transaction_id);
        }
        break;
      case PushStatus::error:
        w.key("status").string("failed");
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

// A lease id, or "" when there is none.
void render_lease(const LeaseId& id, JsonWriter& w) {
  if (id.is_nil()) {
    w.string("");
  } else {
    w.uuid(id);
  }
}

// What consecutive messages of a pop answer share, rendered once: their partition's members,
// their append's creation time, their lease and group.
struct PopRenderCache {
  std::optional<PartitionId> pid;
  std::string partition;  // "partitionId":..,"partition":..,"queue":..
  std::optional<int64_t> created_us;
  char created[kIsoUsCharsMax];
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
    c.created_chars = format_iso_us(m.created_us, c.created);
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
  w.key("createdAt").string(std::string_view(c.created, c.created_chars));
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
  w.key("minPopWaitTime").number(o.min_pop_wait_time_ms);
  w.end_object();
}

void render_configure(const ConfigureReply& reply, JsonWriter& w) {
  w.begin_object();
  w.key("configured").boolean(true);
  w.key("queue").string(reply.queue);
  w.key("queueId").decimal_string(reply.queue_id.value);
  w.key("partitionId").decimal_string(reply.default_partition_id.value);
  w.key("namespace").string(reply.options.ns);
  w.key("task").string(reply.options.task);
  w.key("options");
  render_options(reply.options, w);
  w.end_object();
}

void render_health(const HealthReply& reply, JsonWriter& w) {
  w.begin_object();
  w.key("status").string(reply.settled ? "healthy" : "settling");
  w.key("engine").string("raft");
  w.key("version").string(kVersion);
  w.key("raft").begin_object();
  w.key("role").string(reply.role);
  w.key("nodeId").number(reply.node_id);
  w.key("leader").number(reply.leader);
  w.key("settled").boolean(reply.settled);
  w.key("term").number(reply.term);
  w.key("applied").number(reply.applied_index);
  w.key("commit").number(reply.commit_index);
  w.key("lag").number(reply.commit_index - std::min(reply.commit_index, reply.applied_index));
  w.key("storageReady").boolean(true);
  // One on-disk and wire format so far: every node reads it, and the cluster runs it.
  w.key("clusterVersion").number(kClusterFormatVersion);
  w.key("kinds").begin_array().number(kClusterFormatVersion).end_array();
  w.key("apply").begin_object().key("failure").number(0).key("skipped").number(0).end_object();
  w.end_object();
  w.key("queues").number(reply.queues);
  w.key("partitions").number(reply.partitions);
  w.end_object();
}

void render_dlq(const DlqReply& reply, JsonWriter& w) {
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

// ---------- KV, locks, timers, transactions: shared ----------

// The error body of the KV, lock and timer routes: {"error":code,"reason":...,"detail":...}.
HttpAnswer family_error(unsigned status, std::string_view code, std::string_view reason,
                        std::string_view detail) {
  JsonWriter w;
  w.begin_object();
  w.key("error").string(code);
  w.key("code").string(code);
  w.key("reason").string(utf8_lossy(reason));
  w.key("detail").string(utf8_lossy(detail));
  w.end_object();
  return HttpAnswer{status, w.take(), 0};
}

// A refusal found while reading one operation: the HTTP status, code, reason and detail.
struct Refusal {
  unsigned status = 400;
  std::string code;
  std::string reason;
  std::string detail;
};

Parsed refuse(const Refusal& r) {
  return answer_now(family_error(r.status, r.code, r.reason, r.detail));
}

std::optional<int64_t> json_int(const json& v) {
  if (v.is_number_unsigned() && v.get<uint64_t>() <= INT64_MAX) return v.get<int64_t>();
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (d >= -9.0e18 && d <= 9.0e18 && d == static_cast<double>(static_cast<int64_t>(d))) {
      return static_cast<int64_t>(d);
    }
  }
  return std::nullopt;
}

const json* field(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// A present field that is not an array is refused; absent or null gives an empty array.
std::optional<std::string> array_field(const json& doc, const char* key, const json** out) {
  static const json kEmpty = json::array();
  *out = &kEmpty;
  const json* v = field(doc, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_array()) return std::string(key) + " must be an array";
  *out = v;
  return std::nullopt;
}

// ---------- KV ----------

constexpr size_t kKvValueBytesMax = 64 * 1024;
constexpr size_t kKvKeyBytesMax = 512;
constexpr size_t kKvOpsMax = 256;
constexpr size_t kKvKeysMax = 1024;
constexpr size_t kTxnKvOpsMax = 64;
constexpr size_t kTxnKvKeysMax = 256;
constexpr uint32_t kKvPrefixLimitMax = 1000;

std::optional<KvOpKind> kv_op_kind(const std::string& s) {
  if (s == "get") return KvOpKind::get;
  if (s == "getMany") return KvOpKind::get_many;
  if (s == "getPrefix") return KvOpKind::get_prefix;
  if (s == "put") return KvOpKind::put;
  if (s == "putIfAbsent") return KvOpKind::put_if_absent;
  if (s == "delete") return KvOpKind::del;
  if (s == "incr") return KvOpKind::incr;
  if (s == "check") return KvOpKind::check;
  return std::nullopt;
}

const char* kv_op_name(KvOpKind k) {
  switch (k) {
    case KvOpKind::get:
      return "get";
    case KvOpKind::get_many:
      return "getMany";
    case KvOpKind::get_prefix:
      return "getPrefix";
    case KvOpKind::put:
      return "put";
    case KvOpKind::put_if_absent:
      return "putIfAbsent";
    case KvOpKind::del:
      return "delete";
    case KvOpKind::incr:
      return "incr";
    case KvOpKind::check:
      return "check";
  }
  return "get";
}

Refusal kv_refusal(std::string reason, std::string detail) {
  return Refusal{400, "kv_bad_request", std::move(reason), std::move(detail)};
}

bool kv_namespace_ok(const std::string& ns) {
  if (ns.empty() || ns.size() > 64) return false;
  auto lower_digit = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!lower_digit(ns[0])) return false;
  for (char c : ns) {
    if (!lower_digit(c) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

std::optional<Refusal> kv_key_check(const std::string& key, const std::string& at) {
  if (key.empty() || key.size() > kKvKeyBytesMax || key.find('\0') != std::string::npos) {
    return kv_refusal("kv_bad_key", at + " must be 1 to 512 bytes without NUL");
  }
  return std::nullopt;
}

// Reads ns and key (or keys) of a KV operation.
std::optional<Refusal> read_kv_names(const json& o, const std::string& at, KvOp* out) {
  FieldReader r(o, at);
  auto ns = r.opt_string("ns");
  if (!ns) ns = r.opt_string("namespace");
  auto key = r.opt_string("key");
  if (!r.ok()) return kv_refusal("kv_bad_field", r.error());
  if (!ns || !kv_namespace_ok(*ns)) {
    return kv_refusal("kv_bad_namespace", at + ".ns must match ^[a-z0-9][a-z0-9._-]{0,63}$");
  }
  out->ns = std::move(*ns);
  if (out->op == KvOpKind::get_prefix) return std::nullopt;
  if (out->op == KvOpKind::get_many) {
    const json* keys = field(o, "keys");
    if (keys == nullptr || !keys->is_array() || keys->empty()) {
      return kv_refusal("kv_bad_field", at + ".keys must be a non-empty array of strings");
    }
    for (size_t i = 0; i < keys->size(); ++i) {
      if (!(*keys)[i].is_string()) return kv_refusal("kv_bad_field", at + ".keys must be strings");
      out->keys.push_back((*keys)[i].get<std::string>());
      if (auto bad = kv_key_check(out->keys.back(), indexed(at + ".keys", i))) return bad;
    }
    return std::nullopt;
  }
  out->key = key.value_or("");
  return kv_key_check(out->key, at + ".key");
}

std::optional<Refusal> read_kv_int(const json& o, const char* name, const std::string& at,
                                   std::optional<int64_t>* out) {
  const json* v = field(o, name);
  if (v == nullptr) return std::nullopt;
  *out = json_int(*v);
  if (!*out) return kv_refusal("kv_bad_field", at + "." + name + " must be an integer");
  return std::nullopt;
}

bool kv_is_write(KvOpKind k) {
  return k == KvOpKind::put || k == KvOpKind::put_if_absent || k == KvOpKind::incr;
}

// ttlSeconds > 0 xor forever:true on every write.
std::optional<Refusal> read_kv_expiry(const json& o, const std::string& at, KvOp* out) {
  std::optional<int64_t> ttl;
  if (auto bad = read_kv_int(o, "ttlSeconds", at, &ttl)) return bad;
  FieldReader r(o, at);
  auto forever = r.opt_bool("forever");
  if (!r.ok()) return kv_refusal("kv_bad_field", r.error());
  out->forever = forever.value_or(false);
  out->ttl_s = ttl.value_or(0);
  if (!kv_is_write(out->op)) return std::nullopt;
  if ((out->ttl_s > 0) == out->forever || out->ttl_s < 0) {
    return kv_refusal("kv_expiry_not_specified",
                      at + " needs exactly one of ttlSeconds > 0 or forever:true");
  }
  return std::nullopt;
}

std::optional<Refusal> read_kv_value(const json& o, const std::string& at, KvOp* out) {
  auto it = o.find("value");
  if (it == o.end()) return std::nullopt;
  try {
    out->value = it->dump();
  } catch (const json::exception&) {
    return kv_refusal("kv_bad_value", at + ".value cannot be encoded as JSON");
  }
  if (out->value.size() > kKvValueBytesMax) {
    return Refusal{413, "payload_too_large", "kv_value_too_large",
                   at + ".value is larger than 65536 bytes"};
  }
  return std::nullopt;
}

std::optional<Refusal> read_kv_numbers(const json& o, const std::string& at, KvOp* out) {
  std::optional<int64_t> expect, delta, limit;
  if (auto bad = read_kv_int(o, "expect", at, &expect)) return bad;
  if (auto bad = read_kv_int(o, "delta", at, &delta)) return bad;
  if (auto bad = read_kv_int(o, "min", at, &out->min)) return bad;
  if (auto bad = read_kv_int(o, "max", at, &out->max)) return bad;
  if (auto bad = read_kv_int(o, "limit", at, &limit)) return bad;
  if (expect) {
    if (*expect < 0) return kv_refusal("kv_bad_expect", at + ".expect must be >= 0");
    out->expect = static_cast<uint64_t>(*expect);
  }
  if (out->op == KvOpKind::check && !expect)
    return kv_refusal("kv_bad_expect", at + ".expect is required by check");
  if (out->op == KvOpKind::put_if_absent) out->expect = 0;
  if (delta) out->delta = *delta;
  if (limit) {
    if (*limit < 1 || *limit > kKvPrefixLimitMax) {
      return kv_refusal("kv_bad_field", at + ".limit must be an integer from 1 to 1000");
    }
    out->limit = static_cast<uint32_t>(*limit);
  }
  return std::nullopt;
}

// Reads one KV operation; `in_txn` forbids getPrefix.
std::optional<Refusal> read_kv_op(const json& o, const std::string& at, bool in_txn, KvOp* out) {
  if (!o.is_object()) return kv_refusal("kv_bad_field", at + " must be an object");
  FieldReader r(o, at);
  std::string op = r.required_string("op", /*allow_empty=*/false);
  auto prefix = r.opt_string("prefix");
  auto after = r.opt_string("after");
  auto required = r.opt_bool("required");
  auto keys_only = r.opt_bool("keysOnly");
  if (!r.ok()) return kv_refusal("kv_bad_field", r.error());
  auto kind = kv_op_kind(op);
  if (!kind) return kv_refusal("kv_unknown_op", at + ".op " + op + " is not a KV operation");
  if (in_txn && *kind == KvOpKind::get_prefix) {
    return kv_refusal("kv_bad_op", at + ".op getPrefix is not allowed in a transaction");
  }
  out->op = *kind;
  out->prefix = prefix.value_or("");
  out->after = after.value_or("");
  out->required = required.value_or(false);
  out->keys_only = keys_only.value_or(false);
  if (out->op == KvOpKind::get_prefix && out->prefix.empty())
    return kv_refusal("kv_prefix_required", at + ".prefix must be a non-empty string");
  if (auto bad = read_kv_names(o, at, out)) return bad;
  if (auto bad = read_kv_value(o, at, out)) return bad;
  if (auto bad = read_kv_expiry(o, at, out)) return bad;
  return read_kv_numbers(o, at, out);
}

// Reads an array of KV operations under the per-call limits.
std::optional<Refusal> read_kv_ops(const json& arr, const char* name, bool in_txn,
                                   std::vector<KvOp>* out) {
  size_t ops_max = in_txn ? kTxnKvOpsMax : kKvOpsMax;
  size_t keys_max = in_txn ? kTxnKvKeysMax : kKvKeysMax;
  if (arr.size() > ops_max) {
    return kv_refusal("kv_too_many_ops", std::string(name) + " has more than " +
                                             std::to_string(ops_max) + " operations");
  }
  size_t keys = 0;
  std::set<std::pair<std::string, std::string>> written;  // one write of a key per call
  out->resize(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    KvOp& op = (*out)[i];
    if (auto bad = read_kv_op(arr[i], indexed(name, i), in_txn, &op)) return bad;
    keys += op.op == KvOpKind::get_many ? op.keys.size() : 1;
    bool write = kv_is_write(op.op) || op.op == KvOpKind::del;
    if (write && !written.insert({op.ns, op.key}).second) {
      return kv_refusal("kv_duplicate_key_in_call",
                        indexed(name, i) + " writes " + op.ns + "/" + op.key + " a second time");
    }
  }
  if (keys > keys_max) {
    return kv_refusal("kv_too_many_keys", std::string(name) + " touches more than " +
                                              std::to_string(keys_max) + " keys");
  }
  return std::nullopt;
}

std::string iso_or_empty(int64_t us) {
  return us == 0 ? std::string() : format_iso_us(us);
}

void render_kv_row(const KvRowView& row, JsonWriter& w) {
  w.begin_object();
  w.key("key").string(row.key);
  if (!row.value.empty()) w.key("value").raw(row.value);  // empty: a keysOnly read
  w.key("version").number(row.version);
  w.key("expiresAt").string_or_null(iso_or_empty(row.expires_us));
  w.key("updatedAt").string_or_null(iso_or_empty(row.updated_us));
  w.end_object();
}

void render_kv_rows(const std::vector<KvRowView>& rows, JsonWriter& w) {
  w.begin_array();
  for (const KvRowView& row : rows) render_kv_row(row, w);
  w.end_array();
}

// The fields of one KV result (inside an object the caller opened).
void render_kv_fields(const KvResult& r, JsonWriter& w) {
  w.key("op").string(kv_op_name(r.op));
  if (r.op == KvOpKind::get) {
    w.key("key").string(r.row.key);
    w.key("found").boolean(r.found);
    w.key("value").raw(r.found ? r.row.value : "null");
    w.key("version").number(r.found ? r.row.version : 0);
    w.key("expiresAt").string_or_null(iso_or_empty(r.row.expires_us));
    w.key("updatedAt").string_or_null(iso_or_empty(r.row.updated_us));
    return;
  }
  if (r.op == KvOpKind::get_many || r.op == KvOpKind::get_prefix) {
    w.key("rows");
    render_kv_rows(r.rows, w);
    if (r.op == KvOpKind::get_many) {
      w.key("missing").begin_array();
      for (const auto& k : r.missing) w.string(k);
      w.end_array();
    } else {
      w.key("nextAfter").string_or_null(r.next_after);
    }
    w.key("truncated").boolean(r.truncated);
    return;
  }
  w.key("applied").boolean(r.applied);
  if (!r.reason.empty()) w.key("reason").string(r.reason);
  w.key("key").string(r.row.key);
  if (r.op == KvOpKind::check && r.applied) return;  // a check that holds names no row
  w.key("value").raw(r.row.value);
  w.key("version").number(r.row.version);
}

// The body of a lost required precondition (without the closing brace).
void render_kv_precondition(uint32_t failed_index, const std::string& kv_reason,
                            const KvRowView& row, JsonWriter& w) {
  w.key("ok").boolean(false);
  w.key("reason").string("kv_precondition");
  w.key("failedIndex").number(failed_index);
  w.key("kvReason").string(kv_reason);
  w.key("version").number(row.version);
  w.key("value").raw(row.value);
}

HttpAnswer render_kv(const KvReply& reply) {
  JsonWriter w;
  if (!reply.ok) {
    w.begin_object();
    render_kv_precondition(reply.failed_index, reply.kv_reason, reply.failed_row, w);
    w.end_object();
    return HttpAnswer{200, w.take(), 0};
  }
  w.begin_object();
  w.key("results").begin_array();
  for (const KvResult& r : reply.results) {
    w.begin_object();
    w.key("index").number(r.index);
    render_kv_fields(r, w);
    w.end_object();
  }
  w.end_array();
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

// The single-key routes: GET answers the row (404 when absent) with an ETag.
HttpAnswer render_kv_single(const KvReply& reply) {
  if (!reply.ok || reply.results.empty()) return render_kv(reply);
  const KvResult& r = reply.results.front();
  JsonWriter w;
  if (r.op == KvOpKind::get && !r.found) {
    return family_error(404, "kv_not_found", "absent", "no such key");
  }
  w.begin_object();
  render_kv_fields(r, w);
  w.end_object();
  HttpAnswer a{200, w.take(), 0};
  if (r.op == KvOpKind::get || r.applied) a.etag = "\"" + std::to_string(r.row.version) + "\"";
  return a;
}

// ---------- locks ----------

constexpr size_t kLockOpsMax = 64;
constexpr uint32_t kLockLimitMax = 1024;
constexpr size_t kLockNameBytesMax = 256;

Refusal lock_refusal(std::string reason, std::string detail) {
  return Refusal{400, "locks_bad_request", std::move(reason), std::move(detail)};
}

std::optional<LockOpKind> lock_op_kind(const std::string& s) {
  if (s == "acquire") return LockOpKind::acquire;
  if (s == "renew") return LockOpKind::renew;
  if (s == "release") return LockOpKind::release;
  if (s == "get") return LockOpKind::get;
  return std::nullopt;
}

const char* lock_op_name(LockOpKind k) {
  switch (k) {
    case LockOpKind::acquire:
      return "acquire";
    case LockOpKind::renew:
      return "renew";
    case LockOpKind::release:
      return "release";
    case LockOpKind::get:
      return "get";
  }
  return "get";
}

std::optional<Refusal> read_lock_numbers(const json& o, const std::string& at, LockOp* out) {
  FieldReader r(o, at);
  auto ttl = r.opt_non_negative("ttlSeconds");
  auto limit = r.opt_non_negative("limit");
  auto slot = r.opt_non_negative("slot");
  auto token = r.opt_non_negative("token");
  if (!r.ok()) return lock_refusal("locks_bad_field", r.error());
  if (ttl) {
    if (*ttl < 1 || *ttl > 86400 * 365) {
      return lock_refusal("locks_bad_ttl", at + ".ttlSeconds must be a positive integer");
    }
    out->ttl_s = *ttl;
  }
  if (limit) {
    if (*limit < 1 || *limit > kLockLimitMax) {
      return lock_refusal("locks_bad_limit", at + ".limit must be an integer from 1 to 1024");
    }
    out->limit = static_cast<uint32_t>(*limit);
  }
  if (slot) {
    if (*slot >= kLockLimitMax) return lock_refusal("locks_bad_slot", at + ".slot is too big");
    out->slot = static_cast<uint32_t>(*slot);
  }
  if (token) out->token = static_cast<uint64_t>(*token);
  bool takes = out->op == LockOpKind::acquire || out->op == LockOpKind::renew;
  if (takes && !ttl) return lock_refusal("locks_ttl_required", at + ".ttlSeconds is required");
  bool fenced = out->op == LockOpKind::renew || out->op == LockOpKind::release;
  if (fenced && (!token || *token == 0))
    return lock_refusal("locks_token_required", at + ".token (a positive integer) is required");
  return std::nullopt;
}

std::optional<Refusal> read_lock_op(const json& o, const std::string& at, IdSource& ids,
                                    LockOp* out) {
  if (!o.is_object()) return lock_refusal("locks_bad_field", at + " must be an object");
  FieldReader r(o, at);
  std::string op = r.required_string("op", /*allow_empty=*/false);
  out->name = r.required_string("name", /*allow_empty=*/true);
  auto owner = r.opt_string("owner");
  if (!r.ok()) return lock_refusal("locks_bad_field", r.error());
  auto kind = lock_op_kind(op);
  if (!kind) return lock_refusal("locks_unknown_op", at + ".op " + op + " is not a lock operation");
  out->op = *kind;
  if (out->name.empty() || out->name.size() > kLockNameBytesMax ||
      out->name.find('#') != std::string::npos) {
    return lock_refusal("locks_bad_name", at + ".name must be 1 to 256 bytes without '#'");
  }
  if (owner && !owner->empty()) {
    out->owner = std::move(*owner);
  } else if (out->op == LockOpKind::acquire) {
    out->owner = uuid_to_string(random_uuid(ids));
  }
  return read_lock_numbers(o, at, out);
}

void render_lock_guard(const LockResult& r, JsonWriter& w) {
  w.key("guard").begin_object();
  w.key("op").string("check");
  w.key("ns").string("queen-locks");
  w.key("key").string(r.name + "#" + std::to_string(r.slot));
  w.key("expect").number(r.token);
  w.key("required").boolean(true);
  w.end_object();
}

void render_lock_holders(const std::vector<LockHolder>& holders, JsonWriter& w) {
  w.key("holders").begin_array();
  for (const LockHolder& h : holders) {
    w.begin_object();
    w.key("slot").number(h.slot);
    w.key("owner").string(h.owner);
    w.key("token").number(h.token);
    w.key("since").string_or_null(iso_or_empty(h.since_us));
    w.key("expiresAt").string_or_null(iso_or_empty(h.expires_us));
    w.key("renewedAt").string_or_null(iso_or_empty(h.renewed_us));
    w.end_object();
  }
  w.end_array();
}

void render_lock_result(const LockResult& r, JsonWriter& w) {
  static const char* kVerb[] = {"acquired", "renewed", "released", "held"};
  w.begin_object();
  w.key("index").number(r.index);
  w.key("op").string(lock_op_name(r.op));
  w.key("name").string(r.name);
  w.key(kVerb[static_cast<int>(r.op)]).boolean(r.ok);
  if (!r.reason.empty()) w.key("reason").string(r.reason);
  bool holds = r.ok && (r.op == LockOpKind::acquire || r.op == LockOpKind::renew);
  if (holds) {
    w.key("slot").number(r.slot);
    w.key("token").number(r.token);
    w.key("owner").string(r.owner);
    w.key("expiresAt").string_or_null(iso_or_empty(r.expires_us));
    w.key("already").boolean(r.already);
    render_lock_guard(r, w);
  }
  if (!holds || r.op == LockOpKind::get) render_lock_holders(r.holders, w);
  w.end_object();
}

HttpAnswer render_locks(const LockReply& reply) {
  JsonWriter w;
  w.begin_object();
  w.key("results").begin_array();
  for (const LockResult& r : reply.results) render_lock_result(r, w);
  w.end_array();
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

// ---------- timers ----------

constexpr size_t kTimerOpsMax = 256;
constexpr int64_t kTimerHorizonMs = 90LL * 86400 * 1000;
constexpr size_t kTimerPayloadBytesMax = 1024 * 1024;

Refusal timer_refusal(std::string reason, std::string detail) {
  return Refusal{400, "timers_bad_request", std::move(reason), std::move(detail)};
}

std::optional<std::string> base64_decode(std::string_view in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
  };
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v = value(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  if (bits >= 6) return std::nullopt;  // a lone trailing character
  return out;
}

std::string base64_encode(std::string_view in) {
  static const char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    for (int shift : {18, 12, 6, 0}) out.push_back(kAlphabet[(v >> shift) & 63]);
  }
  if (size_t rest = in.size() - i; rest > 0) {
    uint32_t v = uint8_t(in[i]) << 16;
    if (rest == 2) v |= uint8_t(in[i + 1]) << 8;
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(rest == 2 ? kAlphabet[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

// Decoded JSON is stored compact; other bytes are stored as a JSON string.
std::string payload_json(const std::string& decoded) {
  if (json_depth(decoded, kJsonDepthMax) <= kJsonDepthMax) {
    try {
      return json::parse(decoded).dump();
    } catch (const json::exception&) {
    }
  }
  return json(utf8_lossy(decoded)).dump();
}

std::optional<TimerOpKind> timer_op_kind(const std::string& s) {
  if (s == "schedule") return TimerOpKind::schedule;
  if (s == "reschedule") return TimerOpKind::reschedule;
  if (s == "cancel") return TimerOpKind::cancel;
  return std::nullopt;
}

std::optional<Refusal> timer_owned_field(const json& o, const std::string& at) {
  static const char* kOwned[] = {"producerSub", "messageId", "deliverAt", "attempts", "tenant"};
  for (const auto& [k, v] : o.items()) {
    bool owned = !k.empty() && k[0] == '_';
    for (const char* name : kOwned) owned = owned || k == name;
    if (owned) {
      return Refusal{400, "timers_bad_request", "timers_server_owned_field",
                     at + "." + k + " is set by the server"};
    }
  }
  return std::nullopt;
}

std::optional<Refusal> read_timer_payload(const json& o, const std::string& at, bool in_txn,
                                          TimerOp* out) {
  if (field(o, "payloadZstd") != nullptr) {
    return timer_refusal("timers_unsupported", at + ".payloadZstd is not supported");
  }
  const json* p = field(o, "payload");
  if (p == nullptr) return std::nullopt;
  if (!p->is_string()) return timer_refusal("timers_bad_field", at + ".payload must be base64");
  auto decoded = base64_decode(p->get_ref<const std::string&>());
  if (!decoded) return timer_refusal("timers_bad_payload", at + ".payload is not valid base64");
  if (!in_txn && decoded->size() > kTimerPayloadBytesMax) {
    return Refusal{413, "payload_too_large", "timers_payload_too_large",
                   at + ".payload decodes to more than 1 MiB"};
  }
  out->payload = payload_json(*decoded);
  return std::nullopt;
}

std::optional<Refusal> read_timer_op(const json& o, const std::string& at, bool in_txn,
                                     int64_t now_ms, IdSource& ids, TimerOp* out) {
  if (!o.is_object()) return timer_refusal("timers_bad_field", at + " must be an object");
  if (auto owned = timer_owned_field(o, at)) return owned;
  FieldReader r(o, at);
  std::string op = r.required_string("op", /*allow_empty=*/false);
  out->queue = r.required_string("queue", /*allow_empty=*/false);
  out->timer_key = r.required_string("timerKey", /*allow_empty=*/false);
  auto partition = r.opt_string("partition");
  auto txn = r.opt_string("txn");
  if (!r.ok()) return timer_refusal("timers_bad_field", r.error());
  auto kind = timer_op_kind(op);
  if (!kind) return timer_refusal("timers_bad_op", at + ".op " + op + " is not a timer op");
  out->op = *kind;
  // A delay of zero or below is due now; a schedule must give one.
  std::optional<int64_t> delay;
  if (const json* d = field(o, "delayMs")) {
    delay = json_int(*d);
    if (!delay) return timer_refusal("timers_bad_field", at + ".delayMs must be an integer");
  } else if (out->op != TimerOpKind::cancel) {
    return timer_refusal("timers_delay_required", at + ".delayMs is required");
  }
  if (partition && !partition->empty()) out->partition = *partition;
  if (out->queue.size() + out->partition.size() > kNameBytesMax) {
    return Refusal{413, "name_too_long", "name_too_long", at + ".queue and partition too long"};
  }
  out->delay_ms = std::max<int64_t>(0, delay.value_or(0));
  if (!in_txn && out->op != TimerOpKind::cancel && out->delay_ms > kTimerHorizonMs) {
    return Refusal{403, "timer_horizon_exceeded", "timers_horizon",
                   at + ".delayMs is beyond the 90-day horizon"};
  }
  out->message_id = make_uuid_v7(now_ms, ids.random_u64(), ids.random_u64());
  out->check_txn = out->op == TimerOpKind::cancel && txn && !txn->empty();
  bool has_txn = txn && !txn->empty();
  out->txn = has_txn ? std::move(*txn) : uuid_to_string(out->message_id);
  out->txn_hash = hash_transaction_id(out->txn);
  return read_timer_payload(o, at, in_txn, out);
}

std::optional<Refusal> read_timer_ops(const json& arr, const char* name, bool in_txn, IdSource& ids,
                                      std::vector<TimerOp>* out) {
  if (!in_txn && arr.size() > kTimerOpsMax) {
    return timer_refusal("timers_too_many_ops", std::string(name) + " has more than 256 ops");
  }
  int64_t now_ms = ids.now_ms();
  out->resize(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    if (auto bad = read_timer_op(arr[i], indexed(name, i), in_txn, now_ms, ids, &(*out)[i])) {
      return bad;
    }
  }
  return std::nullopt;
}

// The fields of one timer result (inside an object the caller opened).
void render_timer_fields(const TimerResult& r, JsonWriter& w) {
  w.key("ok").boolean(r.ok);
  w.key("status").string(r.status);
  w.key("queue").string(r.queue);
  w.key("timerKey").string(r.timer_key);
  w.key("txn").string(r.txn);
  w.key("messageId");
  r.message_id.is_nil() ? w.null() : w.uuid(r.message_id);
  w.key("deliverAt").string_or_null(iso_or_empty(r.deliver_at_us));
}

// POST answers {results:[...]}; the standalone cancel (`single`) its one result, bare.
HttpAnswer render_timers(const TimerReply& reply, bool single) {
  JsonWriter w;
  if (single && reply.results.size() == 1) {
    w.begin_object();
    render_timer_fields(reply.results.front(), w);
    w.end_object();
    return HttpAnswer{200, w.take(), 0};
  }
  w.begin_object();
  w.key("results").begin_array();
  for (const TimerResult& r : reply.results) {
    w.begin_object();
    w.key("index").number(r.index);
    render_timer_fields(r, w);
    w.end_object();
  }
  w.end_array();
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

// A stored timer's fields (inside an object the caller opened); the payload only for a peek,
// as base64 of the JSON it fires with.
void render_timer_view(const TimerView& t, bool with_payload, JsonWriter& w) {
  w.key("queue").string(t.queue);
  w.key("timerKey").string(t.timer_key);
  w.key("partition").string(t.partition);
  w.key("txn").string(t.txn);
  w.key("messageId").uuid(t.message_id);
  w.key("deliverAt").string(format_iso_us(t.deliver_at_us));
  w.key("attempts").number(t.attempts);
  if (with_payload) w.key("payload").string(base64_encode(t.payload));
}

// A peek answers the timer bare ({found:false} when none); a list {rows, truncated, nextAfter};
// a count {count}.
HttpAnswer render_timer_query(const TimerQueryReply& reply, RenderAs as) {
  JsonWriter w;
  w.begin_object();
  if (as == RenderAs::timer_peek) {
    w.key("found").boolean(reply.found);
    if (reply.found && !reply.timers.empty()) render_timer_view(reply.timers.front(), true, w);
  } else if (as == RenderAs::timer_list) {
    w.key("rows").begin_array();
    for (const TimerView& t : reply.timers) {
      w.begin_object();
      render_timer_view(t, false, w);
      w.end_object();
    }
    w.end_array();
    w.key("truncated").boolean(reply.truncated);
    w.key("nextAfter").string_or_null(reply.timers.empty() ? "" : reply.timers.back().timer_key);
  } else {
    w.key("count").number(reply.count);
  }
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

// ---------- transactions ----------

constexpr size_t kTxnPositionsMax = 16384;

// Reads operations[i]: an ack, or a push with `items` or one inline item.
std::optional<Parsed> read_txn_operation(const json& o, size_t i, int64_t now_ms, IdSource& ids,
                                         TxnOperation* out) {
  std::string at = indexed("operations", i);
  if (!o.is_object()) return bad_request(at + " must be an object");
  FieldReader r(o, at);
  std::string type = r.required_string("type", /*allow_empty=*/false);
  if (!r.ok()) return bad_request(r.error());
  if (type == "kv" || type == "timer" || type == "timers" || o.contains("kv") ||
      o.contains("timers")) {
    return bad_request(at + ": kv and timers belong in the top-level kv and timers arrays");
  }
  if (type == "ack") {
    AckItem item;
    std::string error = read_ack_item(o, at, std::nullopt, &item);
    if (!error.empty()) return bad_request(error);
    out->is_ack = true;
    out->ack = std::move(item);
    return std::nullopt;
  }
  if (type != "push") return bad_request(at + ".type must be ack or push");
  const json* items = field(o, "items");
  if (items != nullptr && !items->is_array()) return bad_request(at + ".items must be an array");
  json single = json::array({o});
  const json& list = items != nullptr ? *items : single;
  if (list.empty()) return bad_request(at + ".items must not be empty");
  out->items.resize(list.size());
  for (size_t k = 0; k < list.size(); ++k) {
    std::string item_at = items != nullptr ? indexed(at + ".items", k) : at;
    const PushItem* prev = k > 0 ? &out->items[k - 1] : nullptr;
    if (auto refused = read_push_item(list[k], item_at, now_ms, ids, prev, &out->items[k])) {
      return refused;
    }
  }
  return std::nullopt;
}

std::optional<Parsed> read_position(const json& o, size_t i, PositionOp* out) {
  std::string at = indexed("positions", i);
  if (!o.is_object()) return bad_request(at + " must be an object");
  FieldReader r(o, at);
  out->queue = r.required_string("queue", /*allow_empty=*/false);
  auto group = r.opt_string("consumerGroup");
  auto partition = r.opt_string("partition");
  auto offset = r.opt_non_negative("offset");
  if (!r.ok()) return bad_request(r.error());
  if (group && !group->empty()) out->group = *group;
  if (partition && !partition->empty()) out->partition = *partition;
  if (offset) out->offset = Offset(static_cast<uint64_t>(*offset));
  if (out->queue.size() + std::max(out->group.size(), out->partition.size()) > kNameBytesMax) {
    return name_too_long(at + ".queue and partition or group are");
  }
  return std::nullopt;
}

std::optional<Parsed> read_required_leases(const json& arr, TxnCmd* cmd) {
  for (size_t i = 0; i < arr.size(); ++i) {
    Uuid id;
    if (!arr[i].is_string() || !uuid_from_string(arr[i].get<std::string>(), &id)) {
      return bad_request(indexed("requiredLeases", i) + " must be a lease id (UUID)");
    }
    cmd->required_leases.push_back(id);
  }
  return std::nullopt;
}

// An ack without its own lease takes the single lease named across the call, if there is one.
void resolve_ack_leases(TxnCmd* cmd) {
  std::optional<LeaseId> single;
  bool several = false;
  auto note = [&](const LeaseId& id) {
    if (single && *single != id) several = true;
    single = id;
  };
  for (const LeaseId& id : cmd->required_leases) note(id);
  for (const TxnOperation& op : cmd->operations) {
    if (op.is_ack && op.ack.lease_id) note(*op.ack.lease_id);
  }
  if (!single || several) return;
  for (TxnOperation& op : cmd->operations) {
    if (op.is_ack && !op.ack.lease_id) op.ack.lease_id = single;
  }
}

struct TxnArrays {
  const json* operations;
  const json* kv;
  const json* timers;
  const json* positions;
  const json* leases;
};

std::optional<Parsed> read_txn_arrays(const json& doc, TxnArrays* a) {
  const std::pair<const char*, const json**> fields[] = {{"operations", &a->operations},
                                                         {"kv", &a->kv},
                                                         {"timers", &a->timers},
                                                         {"positions", &a->positions},
                                                         {"requiredLeases", &a->leases}};
  for (const auto& [name, slot] : fields) {
    if (auto error = array_field(doc, name, slot)) return bad_request(*error);
  }
  if (a->operations->empty() && a->kv->empty() && a->timers->empty() && a->positions->empty()) {
    return bad_request("one of operations, kv, timers or positions must be a non-empty array");
  }
  if (a->positions->size() > kTxnPositionsMax) {
    return bad_request("positions has more than " + std::to_string(kTxnPositionsMax) + " items");
  }
  return std::nullopt;
}

std::optional<Parsed> read_txn_body(const json& doc, IdSource& ids, TxnCmd* cmd) {
  TxnArrays a{};
  if (auto bad = read_txn_arrays(doc, &a)) return bad;
  int64_t now_ms = ids.now_ms();
  cmd->operations.resize(a.operations->size());
  for (size_t i = 0; i < a.operations->size(); ++i) {
    auto bad = read_txn_operation((*a.operations)[i], i, now_ms, ids, &cmd->operations[i]);
    if (bad) return bad;
  }
  if (auto bad = read_kv_ops(*a.kv, "kv", /*in_txn=*/true, &cmd->kv)) return refuse(*bad);
  if (auto bad = read_timer_ops(*a.timers, "timers", /*in_txn=*/true, ids, &cmd->timers)) {
    return refuse(*bad);
  }
  cmd->positions.resize(a.positions->size());
  for (size_t i = 0; i < a.positions->size(); ++i) {
    if (auto bad = read_position((*a.positions)[i], i, &cmd->positions[i])) return bad;
  }
  if (auto bad = read_required_leases(*a.leases, cmd)) return bad;
  resolve_ack_leases(cmd);
  return std::nullopt;
}

// ---------- transactions without a tree ----------
// A worker's step as the hot path sends it: `operations` only (acks and pushes), every key
// at most once, payloads kept as sent. Anything else (kv, timers, positions, requiredLeases,
// an operation of another type, any error) goes to the general parser, which names it.

// One operation's members. "type" may come last, so an ack's fields and a push's are both
// collected; `items` absent makes the operation its own push item.
struct ScannedTxnOp {
  std::optional<std::string> type, queue;
  ScannedAck ack;  // an inline push item's transactionId is read here too
  PushItemFields item;
  std::optional<std::vector<PushItemFields>> items;
};

bool scan_txn_items(JsonScan& s, ScannedTxnOp* op) {
  if (op->items) return false;
  op->items.emplace();
  return scan_elements(s, [&] { return scan_push_item(s, &op->items->emplace_back()); });
}

bool scan_txn_op(JsonScan& s, ScannedTxnOp* op) {
  bool seen[5] = {};
  return scan_members(s, [&](const std::string& key) {
    if (key == "type") return scan_opt_string(s, &op->type, &seen[0]);
    if (auto scanned = scan_ack_key(s, key, &op->ack)) return *scanned;
    if (key == "queue") return scan_opt_string(s, &op->queue, &seen[1]);
    if (key == "partition") return scan_opt_string(s, &op->item.partition, &seen[2]);
    if (key == "traceId") return scan_opt_string(s, &op->item.trace_id, &seen[3]);
    if (key == "payload") return scan_payload(s, &op->item.payload, &seen[4]);
    if (key == "items") return scan_txn_items(s, op);
    if (key == "kv" || key == "timers") return false;
    return scan_skip(s);
  });
}

// Whether the general parser would read the operation without naming an error in its shape
// (what is left to refuse is a field's value: finish_ack_item or finish_push_item).
bool txn_op_plain(const ScannedTxnOp& op) {
  if (op.type == "ack") return filled(op.ack.transaction_id) && filled(op.ack.partition_id);
  if (op.type != "push") return false;
  return op.items ? !op.items->empty() : filled(op.queue);
}

std::optional<std::vector<ScannedTxnOp>> scan_txn(std::string_view body) {
  JsonScan s(body, kJsonDepthMax);
  std::vector<ScannedTxnOp> ops;
  bool seen_ops = false;
  bool ok = scan_members(s, [&](const std::string& key) {
    if (key == "kv" || key == "timers" || key == "positions" || key == "requiredLeases") {
      return false;
    }
    if (key != "operations") return scan_skip(s);
    if (seen_ops) return false;
    seen_ops = true;
    return scan_elements(s, [&] { return scan_txn_op(s, &ops.emplace_back()); });
  });
  if (!ok || ops.empty() || !s.at_end()) return std::nullopt;
  for (const ScannedTxnOp& op : ops)
    if (!txn_op_plain(op)) return std::nullopt;
  return ops;
}

// Fills `out` from operations[i] as scanned; returns the refusal, if any.
std::optional<Parsed> finish_txn_op(ScannedTxnOp op, size_t i, int64_t now_ms, IdSource& ids,
                                    TxnOperation* out) {
  if (op.type == "ack") {
    std::string refused =
        finish_ack_item(take_ack_fields(std::move(op.ack)), std::nullopt, &out->ack);
    if (!refused.empty()) return bad_request(indexed("operations", i) + "." + refused);
    out->is_ack = true;
    return std::nullopt;
  }
  bool inline_item = !op.items;
  if (inline_item) {
    op.item.queue = std::move(*op.queue);
    op.item.transaction_id = std::move(op.ack.transaction_id);
    op.items.emplace().push_back(std::move(op.item));
  }
  out->items.resize(op.items->size());
  for (size_t k = 0; k < op.items->size(); ++k) {
    const PushItem* prev = k > 0 ? &out->items[k - 1] : nullptr;
    auto refused = finish_push_item(std::move((*op.items)[k]), now_ms, ids, prev, &out->items[k]);
    if (!refused) continue;
    std::string at = indexed("operations", i);
    return refuse_item(inline_item ? at : indexed(at + ".items", k), *refused);
  }
  return std::nullopt;
}

std::optional<Parsed> finish_txn_ops(std::vector<ScannedTxnOp> ops, IdSource& ids, TxnCmd* cmd) {
  int64_t now_ms = ids.now_ms();
  cmd->operations.resize(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    auto bad = finish_txn_op(std::move(ops[i]), i, now_ms, ids, &cmd->operations[i]);
    if (bad) return bad;
  }
  resolve_ack_leases(cmd);
  return std::nullopt;
}

const char* txn_type_name(TxnResultType t) {
  switch (t) {
    case TxnResultType::ack:
      return "ack";
    case TxnResultType::push:
      return "push";
    case TxnResultType::kv:
      return "kv";
    case TxnResultType::timer:
      return "timer";
    case TxnResultType::position:
      return "position";
  }
  return "ack";
}

void render_txn_push_item(const PushResult& p, JsonWriter& w) {
  w.key("success").boolean(p.status != PushStatus::error);
  w.key("transactionId").string(p.transaction_id);
  w.key("messageId").uuid(p.message_id);
  w.key("queueName").string(p.queue);
  w.key("partition").string(p.partition);
  w.key("partitionId").decimal_string(p.partition_id.value);
  w.key("offset").number(p.offset.value);
  if (p.status == PushStatus::duplicate) w.key("duplicate").boolean(true);
  if (p.status == PushStatus::error) w.key("error").string(p.error);
}

// A pushed item's result (one result per item).
void render_txn_push(const TxnResult& r, JsonWriter& w) {
  if (!r.pushes.empty()) render_txn_push_item(r.pushes.front(), w);
}

void render_txn_result(const TxnResult& r, JsonWriter& w) {
  w.begin_object();
  w.key("index").number(r.index);
  w.key("type").string(txn_type_name(r.type));
  if (r.type != TxnResultType::ack && r.type != TxnResultType::push) {
    w.key("opIndex").number(r.op_index);
  }
  switch (r.type) {
    case TxnResultType::ack:
      w.key("success").boolean(r.ack.success);
      w.key("transactionId").string(r.ack.transaction_id);
      w.key("error").string_or_null(r.ack.error);
      w.key("dlq").boolean(r.ack.dlq);
      break;
    case TxnResultType::push:
      render_txn_push(r, w);
      break;
    case TxnResultType::kv:
      render_kv_fields(r.kv, w);
      break;
    case TxnResultType::timer:
      render_timer_fields(r.timer, w);
      break;
    case TxnResultType::position:
      w.key("success").boolean(r.success);
      break;
  }
  w.end_object();
}

HttpAnswer render_txn(const TxnReply& reply) {
  JsonWriter w;
  w.begin_object();
  w.key("transactionId").uuid(reply.transaction_id);
  w.key("success").boolean(reply.success);
  if (!reply.success) {
    w.key("error").string(reply.error);
    if (reply.reason == "kv_precondition") {
      render_kv_precondition(reply.failed_index, reply.kv_reason, reply.failed_row, w);
    } else {
      w.key("reason").string(reply.reason);
    }
  }
  w.key("results").begin_array();
  if (reply.success) {
    for (const TxnResult& r : reply.results) render_txn_result(r, w);
  }
  w.end_array();
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

// ---------- consumer groups, DLQ replay, queues ----------

const char* mode_name(SubscriptionMode m) {
  switch (m) {
    case SubscriptionMode::all:
      return "all";
    case SubscriptionMode::new_only:
      return "new";
    case SubscriptionMode::from_time:
      return "timestamp";
  }
  return "all";
}

void render_group_summary(const GroupView& g, JsonWriter& w) {
  w.begin_object();
  w.key("name").string(g.group);
  w.key("topics").begin_array().string(g.queue).end_array();
  w.key("queueName").string(g.queue);
  w.key("members").number(g.members);
  w.key("partitionsWithLag").number(g.partitions_with_lag);
  w.key("totalLag").number(g.total_lag);
  w.key("maxTimeLag").number(g.max_time_lag_s);
  // Dead: no partition of the queue has a cursor of the group (it never consumed there).
  w.key("state").string(g.members == 0 ? "Dead" : g.max_time_lag_s > 300 ? "Lagging" : "Stable");
  w.key("subscriptionMode").string(mode_name(g.mode));
  w.key("subscriptionTimestamp").string_or_null(iso_or_empty(g.subscription_us));
  w.end_object();
}

void render_group_partition(const GroupPartitionView& p, JsonWriter& w) {
  w.begin_object();
  w.key("partition").string(p.partition);
  w.key("partitionId").decimal_string(p.partition_id.value);
  w.key("workerId").string_or_null(lease_text(p.lease_id));
  w.key("lastConsumedAt").string_or_null(iso_or_empty(p.last_consumed_us));
  w.key("totalConsumed").number(p.total_consumed);
  w.key("offsetLag").number(p.offset_lag);
  w.key("timeLagSeconds").number(p.time_lag_s);
  w.key("leaseActive").boolean(p.lease_active);
  w.key("cursor").number(p.cursor.value);
  w.end_object();
}

// Details: an object keyed by queue name.
HttpAnswer render_group_details(const GroupsReply& reply) {
  JsonWriter w;
  w.begin_object();
  for (const GroupView& g : reply.groups) {
    w.key(g.queue).begin_object();
    w.key("partitions").begin_array();
    for (const GroupPartitionView& p : g.partitions) render_group_partition(p, w);
    w.end_array();
    w.key("totalLag").number(g.total_lag);
    w.key("subscriptionMode").string(mode_name(g.mode));
    w.end_object();
  }
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

// GET /api/v1/consumer-groups/lagging: one row per lagging (group, partition).
HttpAnswer render_lagging(const GroupsReply& reply) {
  JsonWriter w;
  w.begin_array();
  for (const GroupView& g : reply.groups) {
    for (const GroupPartitionView& p : g.partitions) {
      w.begin_object();
      w.key("consumer_group").string(g.group);
      w.key("queue_name").string(g.queue);
      w.key("partition_name").string(p.partition);
      w.key("partition_id").decimal_string(p.partition_id.value);
      w.key("worker_id").string_or_null(lease_text(p.lease_id));
      w.key("offset_lag").number(p.offset_lag);
      w.key("time_lag_seconds").number(p.time_lag_s);
      w.key("lag_hours").number(p.time_lag_s / 3600);
      w.key("oldest_unconsumed_at").string_or_null(iso_or_empty(p.oldest_unconsumed_us));
      w.key("last_consumed_at").string_or_null(iso_or_empty(p.last_consumed_us));
      w.end_object();
    }
  }
  w.end_array();
  return HttpAnswer{200, w.take(), 0};
}

// Details carry partitions and a list never does, so the reply tells them apart when the
// route's hint is not at hand.
HttpAnswer render_groups(const GroupsReply& reply, RenderAs as) {
  if (reply.lagging) return render_lagging(reply);
  bool details = std::any_of(reply.groups.begin(), reply.groups.end(),
                             [](const GroupView& g) { return !g.partitions.empty(); });
  if (as == RenderAs::group_details || details) return render_group_details(reply);
  JsonWriter w;
  w.begin_array();
  for (const GroupView& g : reply.groups) render_group_summary(g, w);
  w.end_array();
  return HttpAnswer{200, w.take(), 0};
}

// One shape for delete, seek and subscription changes: the fields each of them names.
// Each consumer-group change answers its own shape; a queue deletion says whether it existed.
HttpAnswer render_group_change(const GroupChangeReply& r, RenderAs as) {
  JsonWriter w;
  w.begin_object();
  if (r.group.empty()) {  // a queue deletion
    bool existed = r.metadata_deleted;  // deleted either way: no such queue is left
    w.key("deleted").boolean(true).key("queue").string(r.queue).key("existed").boolean(existed);
    w.end_object();
    return HttpAnswer{200, w.take(), 0};
  }
  w.key("success").boolean(true);
  w.key("consumerGroup").string(r.group);
  if (as == RenderAs::group_subscription) {
    w.key("newTimestamp").string(format_iso_us(r.timestamp_us));
    w.key("rowsUpdated").number(r.partitions);
  } else if (as == RenderAs::group_seek) {
    w.key("queueName").string(r.queue);
    w.key("seekToEnd").boolean(r.to_end);
    w.key("targetTimestamp").string_or_null(r.to_end ? "" : format_iso_us(r.timestamp_us));
    w.key("partitionsUpdated").number(r.partitions);
  } else if (as == RenderAs::partition_seek) {
    w.key("queueName").string(r.queue);
    w.key("partitionName").string(r.partition);
    w.key("updated").boolean(r.partitions > 0);
    w.key("cursorMovedTo");
    r.moved_to >= 0 ? w.number(static_cast<uint64_t>(r.moved_to)) : w.null();
  } else {  // a group deletion
    if (!r.queue.empty()) w.key("queueName").string(r.queue);
    w.key("deletedPartitions").number(r.partitions);
    w.key("metadataDeleted").boolean(r.metadata_deleted);
  }
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

HttpAnswer render_dlq_replay(const DlqReplayReply& r) {
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

void render_queue_counts(const QueueView& q, JsonWriter& w) {
  w.key("messages").begin_object();
  w.key("total").number(q.messages);
  w.key("pending").number(q.pending);
  w.key("processing").number(q.processing);
  w.key("deadLetter").number(q.dlq);
  w.end_object();
}

// The six counters of a queue get, for a partition or the totals.
void render_six_counts(const PartitionStatsView& s, JsonWriter& w) {
  w.begin_object();
  w.key("total").number(s.total);
  w.key("pending").number(s.pending);
  w.key("processing").number(s.processing);
  w.key("completed").number(s.completed);
  w.key("failed").number(0);  // a failed message is pending again or a dead letter
  w.key("deadLetter").number(s.dead_letter);
  w.end_object();
}

void render_queue_summary(const QueueView& q, JsonWriter& w) {
  w.begin_object();
  w.key("id").decimal_string(q.id.value);
  w.key("name").string(q.name);
  w.key("namespace").string_or_null(q.options.ns);
  w.key("task").string_or_null(q.options.task);
  w.key("createdAt").string(format_iso_us(q.created_us));
  w.key("partitions").number(q.partition_count);
  render_queue_counts(q, w);
  w.end_object();
}

HttpAnswer render_queue_get(const QueueView& q) {
  JsonWriter w;
  w.begin_object();
  w.key("id").decimal_string(q.id.value);
  w.key("name").string(q.name);
  w.key("namespace").string_or_null(q.options.ns);
  w.key("task").string_or_null(q.options.task);
  w.key("createdAt").string(format_iso_us(q.created_us));
  w.key("partitions").begin_array();
  PartitionStatsView totals;
  for (const PartitionStatsView& p : q.partitions) {
    w.begin_object();
    w.key("id").decimal_string(p.id.value);
    w.key("name").string(p.name);
    w.key("createdAt").string(format_iso_us(p.created_us));
    w.key("messages").number(p.total);
    w.key("stats");
    render_six_counts(p, w);
    w.key("oldestMessage").string_or_null(iso_or_empty(p.oldest_us));
    w.key("newestMessage").string_or_null(iso_or_empty(p.newest_us));
    w.end_object();
    totals.total += p.total;
    totals.pending += p.pending;
    totals.processing += p.processing;
    totals.completed += p.completed;
    totals.dead_letter += p.dead_letter;
  }
  w.end_array();
  w.key("totals");
  render_six_counts(totals, w);
  w.key("options");
  render_options(q.options, w);
  render_queue_counts(q, w);
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

// A get lists its partitions and a list never does.
HttpAnswer render_queues(const QueuesReply& reply) {
  if (reply.queues.size() == 1 && !reply.queues.front().partitions.empty()) {
    return render_queue_get(reply.queues.front());
  }
  JsonWriter w;
  w.begin_object().key("queues").begin_array();
  for (const QueueView& q : reply.queues) render_queue_summary(q, w);
  w.end_array().end_object();
  return HttpAnswer{200, w.take(), 0};
}

Parsed parse_subscription(const std::string& group, std::string_view body, int64_t timeout_ms,
                          IdSource& ids) {
  std::string error;
  auto doc = parse_object(body, &error);
  if (!doc) return bad_request(error);
  FieldReader r(*doc, "");
  auto ts = r.opt_string("subscriptionTimestamp");
  if (!r.ok()) return bad_request(r.error());
  if (!ts) return bad_request("Missing subscriptionTimestamp in request body");
  auto us = parse_iso_us(*ts);
  if (!us) return bad_request("subscriptionTimestamp must be an ISO-8601 time");
  return to_node(ids, timeout_ms, SubscriptionCmd{group, *us});
}

Parsed parse_seek(const std::string& group, const std::string& queue, std::string_view body,
                  int64_t timeout_ms, IdSource& ids) {
  std::string error;
  auto doc = parse_object(body.empty() ? std::string_view("{}") : body, &error);
  if (!doc) return bad_request(error);
  FieldReader r(*doc, "");
  auto to_end = r.opt_bool("toEnd");
  auto ts = r.opt_string("timestamp");
  if (!r.ok()) return bad_request(r.error());
  SeekCmd cmd{group, queue, "", to_end.value_or(false), 0};
  if (!cmd.to_end) {
    if (!ts) return bad_request("Must specify either 'toEnd': true or 'timestamp'");
    auto us = parse_iso_us(*ts);
    if (!us) return bad_request("timestamp must be an ISO-8601 time");
    cmd.timestamp_us = *us;
  }
  return to_node(ids, timeout_ms, cmd);
}

// ---------- messages ----------

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

// ---------- public: helpers ----------

EdgeSettings edge_settings(const ServerConfig& config) {
  return EdgeSettings{config.stmt_timeout_ms, config.pop_timeout_ms_default,
                      config.subscription_mode_default, config.auth};
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

namespace {

// `v` as exactly `width` decimal digits (v < 10^width).
char* put_digits(char* out, uint64_t v, int width) {
  for (int i = width - 1; i >= 0; --i) {
    out[i] = static_cast<char>('0' + v % 10);
    v /= 10;
  }
  return out + width;
}

}  // namespace

size_t format_iso_us(int64_t unix_us, char* out) {
  int64_t secs = unix_us >= 0 ? unix_us / 1000000 : -((-unix_us + 999999) / 1000000);
  auto frac = static_cast<int>(unix_us - secs * 1000000);
  int64_t days = secs >= 0 ? secs / 86400 : -((-secs + 86399) / 86400);
  int64_t sod = secs - days * 86400;
  int64_t y;
  unsigned m, d;
  civil_from_days(days, &y, &m, &d);
  if (y < 0 || y > 9999) {
    return static_cast<size_t>(
        std::snprintf(out, kIsoUsCharsMax, "%04lld-%02u-%02uT%02d:%02d:%02d.%06dZ",
                      static_cast<long long>(y), m, d, static_cast<int>(sod / 3600),
                      static_cast<int>(sod / 60 % 60), static_cast<int>(sod % 60), frac));
  }
  char* p = put_digits(out, static_cast<uint64_t>(y), 4);
  *p++ = '-';
  p = put_digits(p, m, 2);
  *p++ = '-';
  p = put_digits(p, d, 2);
  *p++ = 'T';
  p = put_digits(p, static_cast<uint64_t>(sod / 3600), 2);
  *p++ = ':';
  p = put_digits(p, static_cast<uint64_t>(sod / 60 % 60), 2);
  *p++ = ':';
  p = put_digits(p, static_cast<uint64_t>(sod % 60), 2);
  *p++ = '.';
  p = put_digits(p, static_cast<uint64_t>(frac), 6);
  *p++ = 'Z';
  return static_cast<size_t>(p - out);
}

std::string format_iso_us(int64_t unix_us) {
  char buf[kIsoUsCharsMax];
  return std::string(buf, format_iso_us(unix_us, buf));
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

// The push body as scanned; nullopt when the general parser must read it.
std::optional<Parsed> parse_push_scanned(std::string_view body, const EdgeSettings& settings,
                                         IdSource& ids) {
  auto items = scan_push(body);
  if (!items) return std::nullopt;
  if (items->empty()) return answer_now(HttpAnswer{201, "[]", 0});
  PushCmd cmd;
  cmd.items.resize(items->size());
  int64_t now_ms = ids.now_ms();
  for (size_t i = 0; i < items->size(); ++i) {
    const PushItem* prev = i > 0 ? &cmd.items[i - 1] : nullptr;
    if (auto refused = finish_push_item(std::move((*items)[i]), now_ms, ids, prev, &cmd.items[i])) {
      return refuse_item(indexed("items", i), *refused);
    }
  }
  return to_node(ids, settings.pop_timeout_ms_default, std::move(cmd));
}

Parsed parse_push(std::string_view body, const EdgeSettings& settings, IdSource& ids) {
  if (auto scanned = parse_push_scanned(body, settings, ids)) return std::move(*scanned);
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
    const PushItem* prev = i > 0 ? &cmd.items[i - 1] : nullptr;
    if (auto refused =
            read_push_item((*items)[i], indexed("items", i), now_ms, ids, prev, &cmd.items[i])) {
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

// The ack batch as scanned; nullopt when the general parser must read it.
std::optional<Parsed> parse_ack_batch_scanned(std::string_view body, const EdgeSettings& settings,
                                              IdSource& ids) {
  auto batch = scan_ack_batch(body);
  if (!batch) return std::nullopt;
  if (batch->group && batch->group->empty()) batch->group.reset();
  if (batch->items.empty()) return answer_now(HttpAnswer{200, "[]", 0});
  AckCmd cmd;
  cmd.items.resize(batch->items.size());
  for (size_t i = 0; i < batch->items.size(); ++i) {
    std::string refused = finish_ack_item(std::move(batch->items[i]), batch->group, &cmd.items[i]);
    if (!refused.empty()) return bad_request(indexed("acknowledgments", i) + "." + refused);
  }
  return to_node(ids, settings.stmt_timeout_ms, std::move(cmd));
}

Parsed parse_ack_batch(std::string_view body, const EdgeSettings& settings, IdSource& ids) {
  if (auto scanned = parse_ack_batch_scanned(body, settings, ids)) return std::move(*scanned);
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
  if (has_control_char(cmd.queue)) return bad_request("queue " + kNoControlChars);
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

Parsed parse_health(const EdgeSettings& settings, IdSource& ids) {
  return to_node(ids, settings.stmt_timeout_ms, HealthCmd{});
}

// ---------- public: KV, locks, timers, transactions ----------

Parsed parse_transaction(std::string_view body, const EdgeSettings& settings, IdSource& ids) {
  TxnCmd cmd;
  if (auto ops = scan_txn(body)) {
    cmd.transaction_id = make_uuid_v7(ids.now_ms(), ids.random_u64(), ids.random_u64());
    if (auto refused = finish_txn_ops(std::move(*ops), ids, &cmd)) return std::move(*refused);
    return to_node(ids, settings.stmt_timeout_ms, std::move(cmd));
  }
  std::string error;
  auto doc = parse_object(body, &error);
  if (!doc) return bad_request(error);
  cmd.transaction_id = make_uuid_v7(ids.now_ms(), ids.random_u64(), ids.random_u64());
  if (auto refused = read_txn_body(*doc, ids, &cmd)) return std::move(*refused);
  return to_node(ids, settings.stmt_timeout_ms, std::move(cmd));
}

Parsed parse_kv(std::string_view body, const EdgeSettings& settings, IdSource& ids) {
  std::string error;
  auto doc = parse_object(body, &error);
  if (!doc) return answer_now(family_error(400, "kv_bad_request", "kv_bad_body", error));
  const json* ops = field(*doc, "operations");
  if (ops == nullptr || !ops->is_array() || ops->empty()) {
    return refuse(kv_refusal("kv_bad_field", "operations must be a non-empty array"));
  }
  KvCmd cmd;
  if (auto bad = read_kv_ops(*ops, "operations", /*in_txn=*/false, &cmd.ops)) return refuse(*bad);
  return to_node(ids, settings.stmt_timeout_ms, std::move(cmd));
}

Parsed parse_kv_single(std::string_view method, const std::string& ns, const std::string& key,
                       bool has_query, std::string_view body, const EdgeSettings& settings,
                       IdSource& ids) {
  if (has_query) return refuse(kv_refusal("kv_bad_request", "this route takes no query string"));
  json doc = json::object();
  if (method != "GET" && !body.empty()) {
    std::string error;
    auto parsed = parse_object(body, &error);
    if (!parsed) return refuse(kv_refusal("kv_bad_body", error));
    doc = std::move(*parsed);
  }
  for (const char* owned : {"op", "ns", "namespace", "key"}) {
    if (doc.contains(owned)) {
      return refuse(kv_refusal("kv_bad_field", std::string(owned) + " belongs in the path"));
    }
  }
  doc["op"] = method == "GET" ? "get" : method == "PUT" ? "put" : "delete";
  doc["ns"] = ns;
  doc["key"] = key;
  KvCmd cmd;
  cmd.ops.resize(1);
  if (auto bad = read_kv_op(doc, "request", /*in_txn=*/false, &cmd.ops[0])) return refuse(*bad);
  Parsed p = to_node(ids, settings.stmt_timeout_ms, std::move(cmd));
  p.render = RenderAs::kv_single;
  return p;
}

Parsed parse_locks(std::string_view body, const EdgeSettings& settings, IdSource& ids) {
  std::string error;
  auto doc = parse_object(body, &error);
  if (!doc) return answer_now(family_error(400, "locks_bad_request", "locks_bad_body", error));
  const json* ops = field(*doc, "operations");
  if (ops == nullptr || !ops->is_array() || ops->empty()) {
    return refuse(lock_refusal("locks_bad_field", "operations must be a non-empty array"));
  }
  if (ops->size() > kLockOpsMax) {
    return refuse(lock_refusal("locks_too_many_ops", "operations has more than 64 items"));
  }
  LockCmd cmd;
  cmd.ops.resize(ops->size());
  std::set<std::string> names;  // ops are independent: each on a different lock
  for (size_t i = 0; i < ops->size(); ++i) {
    auto bad = read_lock_op((*ops)[i], indexed("operations", i), ids, &cmd.ops[i]);
    if (bad) return refuse(*bad);
    if (!names.insert(cmd.ops[i].name).second) {
      return refuse(lock_refusal(
          "locks_duplicate_in_call",
          indexed("operations", i) + " names lock " + cmd.ops[i].name + " a second time"));
    }
  }
  return to_node(ids, settings.stmt_timeout_ms, std::move(cmd));
}

Parsed parse_timers(std::string_view body, const EdgeSettings& settings, IdSource& ids) {
  std::string error;
  auto doc = parse_object(body, &error);
  if (!doc) return answer_now(family_error(400, "timers_bad_request", "timers_bad_body", error));
  const json* ops = field(*doc, "operations");
  if (ops == nullptr || !ops->is_array() || ops->empty()) {
    return refuse(timer_refusal("timers_bad_field", "operations must be a non-empty array"));
  }
  TimerCmd cmd;
  if (auto bad = read_timer_ops(*ops, "operations", /*in_txn=*/false, ids, &cmd.ops)) {
    return refuse(*bad);
  }
  return to_node(ids, settings.stmt_timeout_ms, std::move(cmd));
}

Parsed parse_timer_delete(const std::string& queue, const std::string& timer_key,
                          const QueryParams& query, const EdgeSettings& settings, IdSource& ids) {
  if (queue.empty() || timer_key.empty()) {
    return refuse(timer_refusal("timers_bad_field", "queue and timerKey are required"));
  }
  TimerCmd cmd;
  cmd.ops.resize(1);
  TimerOp& op = cmd.ops[0];
  op.op = TimerOpKind::cancel;
  op.queue = queue;
  op.timer_key = timer_key;
  if (const std::string* txn = query_text(query, "txn")) {
    op.txn = *txn;
    op.txn_hash = hash_transaction_id(op.txn);
    op.check_txn = true;
  }
  Parsed p = to_node(ids, settings.stmt_timeout_ms, std::move(cmd));
  p.render = RenderAs::timer_single;
  return p;
}

Parsed parse_timer_query(const std::string& queue, const std::optional<std::string>& timer_key,
                         const QueryParams& query, const EdgeSettings& settings, IdSource& ids) {
  if (queue.empty()) return refuse(timer_refusal("timers_bad_field", "queue is required"));
  TimerQueryCmd cmd;
  cmd.queue = queue;
  if (timer_key) {
    cmd.kind = TimerQueryKind::peek;
    cmd.timer_key = *timer_key;
    Parsed p = to_node(ids, settings.stmt_timeout_ms, std::move(cmd));
    p.render = RenderAs::timer_peek;
    return p;
  }
  const std::string* mode = query_text(query, "mode");
  if (mode && *mode != "count" && *mode != "list") {
    return refuse(timer_refusal("timers_bad_field", "mode must be list or count"));
  }
  cmd.kind = mode && *mode == "count" ? TimerQueryKind::count : TimerQueryKind::list;
  if (const std::string* prefix = query_text(query, "prefix")) cmd.prefix = *prefix;
  if (const std::string* after = query_text(query, "after")) cmd.after = *after;
  if (const std::string* limit = query_text(query, "limit")) {
    auto v = parse_u64(*limit);
    if (!v || *v < 1 || *v > 1000) {
      return refuse(timer_refusal("timers_bad_field", "limit must be an integer from 1 to 1000"));
    }
    cmd.limit = static_cast<uint32_t>(*v);
  }
  bool count = cmd.kind == TimerQueryKind::count;
  Parsed p = to_node(ids, settings.stmt_timeout_ms, std::move(cmd));
  p.render = count ? RenderAs::standard : RenderAs::timer_list;
  return p;
}

// ---------- public: consumer groups, DLQ replay, queues ----------

Parsed parse_group_route(std::string_view method, const std::vector<std::string>& s,
                         const QueryParams& query, std::string_view body,
                         const EdgeSettings& settings, IdSource& ids) {
  int64_t t = settings.stmt_timeout_ms;
  if (s.empty()) return to_node(ids, t, GroupListCmd{});
  const std::string& group = s[0];
  if (method == "GET" && s.size() == 1 && group == "lagging") {
    GroupListCmd cmd;
    cmd.lagging_min_s = 3600;
    if (auto it = query.find("minLagSeconds"); it != query.end()) {
      auto v = parse_u64(it->second);  // digits only: no sign, no blank
      if (!v) return bad_request("minLagSeconds must be a non-negative integer");
      cmd.lagging_min_s = static_cast<int64_t>(std::min<uint64_t>(*v, INT64_MAX / 2));
    }
    return to_node(ids, t, cmd);
  }
  if (method == "GET" && s.size() == 1) {
    Parsed p = to_node(ids, t, GroupDetailsCmd{group});
    p.render = RenderAs::group_details;
    return p;
  }
  if (method == "DELETE" && (s.size() == 1 || (s.size() == 3 && s[1] == "queues"))) {
    std::string error;
    bool metadata = query_bool(query, "deleteMetadata", true, &error);
    if (!error.empty()) return bad_request(error);
    return to_node(ids, t, GroupDeleteCmd{group, s.size() == 3 ? s[2] : "", metadata});
  }
  auto no_route = [&] {
    return answer_now(error_answer(404, "no_such_route", "no such consumer-group route"));
  };
  if (method != "POST") return no_route();
  Parsed p = no_route();
  if (s.size() == 2 && s[1] == "subscription") {
    p = parse_subscription(group, body, t, ids);
    p.render = RenderAs::group_subscription;
  } else if (s.size() == 4 && s[1] == "queues" && s[3] == "seek") {
    p = parse_seek(group, s[2], body, t, ids);
    p.render = RenderAs::group_seek;
  } else if (s.size() == 6 && s[1] == "queues" && s[3] == "partitions" && s[5] == "seek") {
    p = to_node(ids, t, SeekCmd{group, s[2], s[4], true, 0});
    p.render = RenderAs::partition_seek;
  }
  return p;
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

Parsed parse_queue_route(std::string_view method, const std::string& queue,
                         const QueryParams& query, const EdgeSettings& settings, IdSource& ids) {
  int64_t t = settings.stmt_timeout_ms;
  if (queue.empty()) {
    QueueListCmd cmd;
    if (const std::string* ns = query_text(query, "namespace")) cmd.ns = *ns;
    if (const std::string* task = query_text(query, "task")) cmd.task = *task;
    return to_node(ids, t, cmd);
  }
  if (method == "DELETE") return to_node(ids, t, QueueDeleteCmd{queue});
  return to_node(ids, t, QueueGetCmd{queue});
}

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

// ---------- system: maintenance ----------

HttpAnswer render_maintenance(const MaintenanceReply& r, bool pop_route) {
  JsonWriter w;
  w.begin_object();
  w.key("maintenanceMode").boolean(r.push);
  w.key("popMaintenanceMode").boolean(r.pop);
  if (!pop_route) {
    // Buffered pushes are in the log like any other, so the "buffer" never fails.
    w.key("bufferedMessages").number(r.buffered);
    w.key("bufferHealthy").boolean(true);
    w.key("bufferStats").begin_object();
    w.key("pendingCount").number(r.buffered);
    w.key("failedCount").number(0);
    w.key("dbHealthy").boolean(true);
    w.key("failedFiles").begin_object();
    w.key("count").number(0).key("totalBytes").number(0).key("totalMB").number(0);
    w.key("failoverCount").number(0).key("qos0Count").number(0);
    w.end_object();
    w.end_object();
  }
  std::string what =
      pop_route ? (r.pop ? "pops answer empty until pop maintenance is off" : "pops are served")
                : (r.push ? "pushes are stored and held back from consumers"
                          : "pushes are delivered as they come");
  w.key("message").string(what);
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
}

// ---------- reads by offset ----------

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

std::optional<uint32_t> bounded_param(const QueryParams& q, const char* name, uint32_t dflt,
                                      uint32_t lo, uint32_t hi) {
  const std::string* text = query_text(q, name);
  if (!text) return dflt;
  auto v = parse_u64(*text);
  if (!v || *v < lo || *v > hi) return std::nullopt;
  return static_cast<uint32_t>(*v);
}

}  // namespace

// ---------- public: maintenance and reads by offset ----------

Parsed parse_maintenance(std::string_view method, bool pop, std::string_view body,
                         const EdgeSettings& settings, IdSource& ids) {
  MaintenanceCmd cmd;
  cmd.pop = pop;
  if (method == "POST") {
    std::string error;
    auto doc = parse_object(body.empty() ? std::string_view("{}") : body, &error);
    if (!doc) return bad_request(error);
    FieldReader r(*doc, "");
    auto enabled = r.opt_bool("enabled");
    if (!r.ok() || !enabled) return bad_request("enabled (boolean) is required");
    cmd.enabled = *enabled;
  }
  Parsed p = to_node(ids, settings.stmt_timeout_ms, cmd);
  p.render = pop ? RenderAs::maintenance_pop : RenderAs::maintenance_push;
  return p;
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

Parsed parse_queue_rollup(RenderAs as, const EdgeSettings& settings, IdSource& ids) {
  Parsed p = to_node(ids, settings.stmt_timeout_ms, QueueListCmd{});
  p.render = as;
  return p;
}

Parsed parse_metrics(const EdgeSettings& settings, IdSource& ids, RenderAs as) {
  Parsed p = to_node(ids, settings.stmt_timeout_ms, MetricsCmd{});
  p.render = as;
  return p;
}

// ---------- public: rendering ----------

HttpAnswer render_reply(const Reply& reply, RenderAs as) {
  if (const auto* kv = std::get_if<KvReply>(&reply.body)) {
    return as == RenderAs::kv_single ? render_kv_single(*kv) : render_kv(*kv);
  }
  if (const auto* txn = std::get_if<TxnReply>(&reply.body)) return render_txn(*txn);
  if (const auto* locks = std::get_if<LockReply>(&reply.body)) return render_locks(*locks);
  if (const auto* timers = std::get_if<TimerReply>(&reply.body))
    return render_timers(*timers, as == RenderAs::timer_single);
  if (const auto* q = std::get_if<TimerQueryReply>(&reply.body)) return render_timer_query(*q, as);
  if (const auto* g = std::get_if<GroupsReply>(&reply.body)) return render_groups(*g, as);
  if (const auto* g = std::get_if<GroupChangeReply>(&reply.body))
    return render_group_change(*g, as);
  if (const auto* m = std::get_if<MaintenanceReply>(&reply.body))
    return render_maintenance(*m, as == RenderAs::maintenance_pop);
  if (const auto* f = std::get_if<FetchReply>(&reply.body)) return render_fetch(*f);
  if (const auto* f = std::get_if<FetchOffsetsReply>(&reply.body)) return render_fetch_offsets(*f);
  if (const auto* f = std::get_if<PartitionsChangedReply>(&reply.body))
    return render_partitions_changed(*f);
  if (const auto* d = std::get_if<DlqReplayReply>(&reply.body)) return render_dlq_replay(*d);
  if (const auto* q = std::get_if<QueuesReply>(&reply.body)) {
    if (as == RenderAs::namespaces || as == RenderAs::tasks)
      return render_queue_rollup(*q, as == RenderAs::tasks);
    return render_queues(*q);
  }
  if (const auto* m = std::get_if<MetricsReply>(&reply.body)) {
    return as == RenderAs::metrics_json ? render_metrics_json(*m) : render_metrics(*m);
  }
  if (const auto* d = std::get_if<MessageDeleteReply>(&reply.body)) {
    return render_message_delete(*d);
  }
  if (const auto* m = std::get_if<MessagesReply>(&reply.body)) return render_messages(*m, as);
  if (const auto* t = std::get_if<TraceReply>(&reply.body)) return render_traces(*t);
  JsonWriter w;
  unsigned status = 200;
  if (const auto* e = std::get_if<ErrorReply>(&reply.body)) {
    HttpAnswer a = error_answer(static_cast<unsigned>(e->http_status), e->code, e->message);
    if (e->leader != 0) {  // a 503 retry names the leader when one is known
      JsonWriter lw;
      lw.begin_object().key("error").string(utf8_lossy(e->message)).key("code").string(e->code);
      lw.key("leader").number(e->leader).end_object();
      a.body = lw.take();
    }
    a.retry_after_s = e->retry_after_s;
    return a;
  } else if (const auto* push = std::get_if<PushReply>(&reply.body)) {
    if (const auto& refused = push->refused) {
      return error_answer(static_cast<unsigned>(refused->http_status), refused->code,
                          refused->message);
    }
    render_push(*push, w);
    status = 201;
  } else if (const auto* pop = std::get_if<PopReply>(&reply.body)) {
    return render_pop(*pop, as == RenderAs::pop_conflation);
  } else if (const auto* ack = std::get_if<AckReply>(&reply.body)) {
    render_ack(*ack, w);
  } else if (const auto* conf = std::get_if<ConfigureReply>(&reply.body)) {
    render_configure(*conf, w);
  } else if (const auto* health = std::get_if<HealthReply>(&reply.body)) {
    render_health(*health, w);
    if (!health->settled) status = 503;  // no leader known, or the leader is settling
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
