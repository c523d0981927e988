// The ack family: POST /api/v1/ack and /api/v1/ack/batch, and the ack items transactions read.
#include "server/api/common.h"

namespace queen::server {

namespace {

std::optional<AckStatus> ack_status(const std::string& text) {
  if (text == "completed" || text == "success") return AckStatus::completed;
  if (text == "failed") return AckStatus::failed;
  if (text == "retry") return AckStatus::retry;
  if (text == "dlq") return AckStatus::dlq;
  return std::nullopt;
}

}  // namespace

// Checks the fields but the group and moves them into `out` (the item's own group too, if
// any): `transaction_id` and `partition_id` are the item's, `f` holds the others. Returns why
// the item is refused (after its name), or empty.
std::string fill_ack_item(std::string&& transaction_id, const std::string& partition_id,
                          AckItemFields& f, AckItem* out) {
  auto pid = partition_id.find_first_not_of("0123456789") == std::string::npos
                 ? parse_u64(partition_id)
                 : std::nullopt;
  if (!pid) return "partitionId must be a string of decimal digits";
  out->partition_id = PartitionId(*pid);
  out->transaction_id = std::move(transaction_id);
  if (out->transaction_id.size() > kTransactionIdBytesMax) {
    return "transactionId is longer than " + std::to_string(kTransactionIdBytesMax) + " bytes";
  }
  out->txn_hash = hash_transaction_id(out->transaction_id);
  if (f.status) {
    auto s = ack_status(*f.status);
    if (!s) return "status must be one of completed, success, failed, retry, dlq";
    out->status = *s;
  }
  if (f.lease) {
    out->lease_id = *f.lease;
  } else if (f.lease_id && !f.lease_id->empty()) {
    LeaseId id;
    if (!uuid_from_string(*f.lease_id, &id)) return "leaseId must be a UUID";
    out->lease_id = id;
  }
  if (f.group) out->group = std::move(*f.group);
  if (f.error) out->error = std::move(*f.error);
  return {};
}

// Settles `out`'s group: `group_override` (a batch's non-empty consumerGroup) if any, else
// the item's own, else the queue-mode group. Returns why it is refused, or empty.
std::string resolve_ack_group(const std::optional<std::string>& group_override, AckItem* out) {
  if (group_override) out->group = *group_override;
  if (out->group.empty()) out->group = kQueueModeGroup;
  if (has_control_char(out->group)) return "consumerGroup " + kNoControlChars;
  return {};
}

// Checks the fields and fills `out`; returns why the item is refused (after its name), or
// empty.
std::string finish_ack_item(AckItemFields f, const std::optional<std::string>& group_override,
                            AckItem* out) {
  std::string refused = fill_ack_item(std::move(f.transaction_id), f.partition_id, f, out);
  if (!refused.empty()) return refused;
  return resolve_ack_group(group_override, out);
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

namespace {

// A leaseId read as a UUID straight from the text, without a string of its own; any other
// string is kept for finish_ack_item to refuse (an empty one means none).
bool scan_lease_id(JsonScan& s, AckItemFields* f, bool* seen) {
  return scan_opt_text(s, seen, [&](std::string_view text) {
    LeaseId id;
    if (uuid_from_string(text, &id))
      f->lease = id;
    else
      f->lease_id = std::string(text);
  });
}

}  // namespace

std::optional<bool> scan_ack_key(JsonScan& s, std::string_view key, ScannedAck* a) {
  if (key == "transactionId") return scan_opt_string(s, &a->transaction_id, &a->seen[0]);
  if (key == "partitionId") return scan_opt_string(s, &a->partition_id, &a->seen[1]);
  if (key == "status") return scan_opt_string(s, &a->fields.status, &a->seen[2]);
  if (key == "leaseId") return scan_lease_id(s, &a->fields, &a->seen[3]);
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

namespace {

// An ack batch item scanned: every field a string or null, each at most once, the required
// ones non-empty; false leaves the body to the general parser.
bool scan_ack_item(JsonScan& s, ScannedAck* a) {
  bool ok = scan_members(s, [&](std::string_view key) {
    if (auto scanned = scan_ack_key(s, key, a)) return *scanned;
    return scan_skip(s);
  });
  return ok && filled(a->transaction_id) && filled(a->partition_id);
}

// An ack batch being scanned: each item is filled into the command as it is read, all but its
// group, which the batch's consumerGroup (before or after the items) overrides once the body
// is read. The body is still read to its end after an item is refused, so a body the scanner
// does not take goes to the general parser whatever it holds.
struct AckScan {
  AckCmd cmd;
  size_t items = 0;                    // read, filled or not
  std::optional<std::string> refused;  // the first item refused (the last filled), named
  std::optional<std::string> group;
  bool seen_group = false;

  bool item(JsonScan& s) {
    ScannedAck a;
    if (!scan_ack_item(s, &a)) return false;
    size_t i = items++;
    if (refused) return true;  // counted only
    std::string r = fill_ack_item(std::move(*a.transaction_id), *a.partition_id, a.fields,
                                  &cmd.items.emplace_back());
    if (!r.empty()) refused = indexed("acknowledgments", i) + "." + r;
    return true;
  }
};

// Room for a batch's acks, guessed from its body's size (an ack with both ids and a leaseId
// is about 120 bytes).
constexpr size_t kGuessedAckBytes = 96;

}  // namespace

namespace {

void render_ack_outcome(const AckResult& r, JsonWriter& w) {
  if (r.success && r.error.empty() && !r.lease_released && !r.dlq && !r.noop) {
    w.members(R"("success":true,"error":null,"leaseReleased":false,"dlq":false,"noop":false)");
    return;
  }
  w.key("success").boolean(r.success);
  w.key("error").string_or_null(r.error);
  w.key("leaseReleased").boolean(r.lease_released);
  w.key("dlq").boolean(r.dlq);
  w.key("noop").boolean(r.noop);
}

bool same_names(const AckResult& a, const AckResult& b) {
  return a.queue == b.queue && a.partition == b.partition;
}

void render_ack_names(const AckResult& r, JsonWriter& w) {
  w.key("queueName").string_or_null(r.queue);
  w.key("partitionName").string_or_null(r.partition);
}

}  // namespace

HttpAnswer render_body(const AckReply& reply, RenderAs) {
  JsonWriter w;
  w.reserve(reply.results.size() * kRenderedItemBytes);
  w.begin_array();
  RunMembers<AckResult> names;  // a batch's acks mostly name one partition
  for (size_t i = 0; i < reply.results.size(); ++i) {
    const AckResult& r = reply.results[i];
    w.begin_object();
    w.key("index").number(r.index);
    w.key("transactionId").string(r.transaction_id);
    render_ack_outcome(r, w);
    names.put(reply.results, i, same_names, render_ack_names, w);
    w.end_object();
  }
  w.end_array();
  return HttpAnswer{200, w.take(), 0};
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
  JsonScan s(body, kJsonDepthMax);
  AckScan scan;
  scan.cmd.items.reserve(body.size() / kGuessedAckBytes + 1);
  bool seen_acks = false;
  bool ok = scan_members(s, [&](std::string_view key) {
    if (key == "consumerGroup") return scan_opt_string(s, &scan.group, &scan.seen_group);
    if (key != "acknowledgments") return scan_skip(s);
    if (seen_acks) return false;
    seen_acks = true;
    return scan_elements(s, [&] { return scan.item(s); });
  });
  if (!ok || !seen_acks || !s.at_end()) return std::nullopt;
  if (scan.items == 0) return answer_now(HttpAnswer{200, "[]", 0});
  if (scan.group && scan.group->empty()) scan.group.reset();
  std::vector<AckItem>& items = scan.cmd.items;
  // Items before the refused one (the last filled) may be refused for their group first.
  size_t settled = scan.refused ? items.size() - 1 : items.size();
  for (size_t i = 0; i < settled; ++i) {
    std::string refused = resolve_ack_group(scan.group, &items[i]);
    if (!refused.empty()) return bad_request(indexed("acknowledgments", i) + "." + refused);
  }
  if (scan.refused) return bad_request(*scan.refused);
  return to_node(ids, settings.stmt_timeout_ms, std::move(scan.cmd));
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

}  // namespace queen::server
