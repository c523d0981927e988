// The timer family: POST /api/v1/timers, GET and DELETE /api/v1/timers/:queue[/:timerKey].
#include "io/real/base64.h"
#include "server/api/common.h"

namespace queen::server {

namespace {

constexpr size_t kTimerOpsMax = 256;
constexpr int64_t kTimerHorizonMs = 90LL * 86400 * 1000;
constexpr size_t kTimerPayloadBytesMax = 1024 * 1024;

Refusal timer_refusal(std::string reason, std::string detail) {
  return Refusal{400, "timers_bad_request", std::move(reason), std::move(detail)};
}

}  // namespace

namespace {

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
  // Standard base64 with its padding: the one strict decoder (io/real/base64.h).
  auto decoded = real::base64_decode(p->get_ref<const std::string&>());
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

}  // namespace

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

namespace {

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
  if (with_payload) w.key("payload").string(real::base64_encode(t.payload));
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

}  // namespace

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

HttpAnswer render_body(const TimerReply& reply, RenderAs as) {
  return render_timers(reply, as == RenderAs::timer_single);
}

HttpAnswer render_body(const TimerQueryReply& reply, RenderAs as) {
  return render_timer_query(reply, as);
}

}  // namespace queen::server
