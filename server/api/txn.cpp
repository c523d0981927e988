// The transaction family: POST /api/v1/transaction (acks, pushes, KV, timers, positions).
#include "server/api/common.h"

namespace queen::server {

namespace {

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
    LeaseId id;
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
  return scan_members(s, [&](std::string_view key) {
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
  bool ok = scan_members(s, [&](std::string_view key) {
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

}  // namespace

HttpAnswer render_body(const TxnReply& reply, RenderAs) {
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

}  // namespace queen::server
