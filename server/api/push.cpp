// The push family: POST /api/v1/push, its scanned hot path and its answer.
#include "server/api/common.h"

namespace queen::server {

namespace {

std::optional<std::string> compact_payload(const json& item) {
  auto it = item.find("payload");
  if (it == item.end()) return std::string("null");
  try {
    return it->dump();
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

}  // namespace

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

namespace {

// Checks the fields and moves them into `out`, its ids left to mint_push_ids (an empty
// transactionId: one to mint); says why when the item is refused.
std::optional<ItemRefusal> fill_push_item(PushItemFields&& f, PushItem* out) {
  out->queue = std::move(f.queue);
  if (f.partition && !f.partition->empty()) out->partition = std::move(*f.partition);
  if (out->queue.size() + out->partition.size() > kNameBytesMax) {
    return ItemRefusal{true, "queue and partition are"};
  }
  if (has_control_char(out->queue)) return ItemRefusal{false, "queue " + kNoControlChars};
  if (has_control_char(out->partition)) return ItemRefusal{false, "partition " + kNoControlChars};
  if (f.transaction_id && f.transaction_id->size() > kTransactionIdBytesMax) {
    return ItemRefusal{
        false, "transactionId is longer than " + std::to_string(kTransactionIdBytesMax) + " bytes"};
  }
  out->payload = std::move(f.payload);
  if (f.transaction_id) out->transaction_id = std::move(*f.transaction_id);
  if (f.trace_id) out->trace_id = std::move(*f.trace_id);
  return std::nullopt;
}

// Mints `out`'s message id (`prev` is the request's item before, nullptr for the first) and,
// when it has none, its transactionId (the message id's text), and hashes the transactionId.
void mint_push_ids(int64_t now_ms, IdSource& ids, const PushItem* prev, PushItem* out) {
  out->message_id = mint_message_id(now_ms, ids, prev);
  if (out->transaction_id.empty()) {
    out->transaction_id = uuid_to_string(out->message_id);
    out->txn_minted = true;
  }
  out->txn_hash = hash_transaction_id(out->transaction_id);
}

}  // namespace

// Checks the fields and fills `out`; says why when the item is refused. `prev` is the
// request's item before (nullptr for the first).
std::optional<ItemRefusal> finish_push_item(PushItemFields f, int64_t now_ms, IdSource& ids,
                                            const PushItem* prev, PushItem* out) {
  if (auto refused = fill_push_item(std::move(f), out)) return refused;
  mint_push_ids(now_ms, ids, prev, out);
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

bool scan_push_item(JsonScan& s, PushItemFields* f) {
  std::optional<std::string> queue;
  bool seen[5] = {};
  bool ok = scan_members(s, [&](std::string_view key) {
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

namespace {

Parsed too_many_items(size_t n) {
  return bad_request("items: " + std::to_string(n) + " in one push, at most " +
                     std::to_string(kPushItemsMax) + "; split it into several pushes");
}

bool same_target(const PushResult& a, const PushResult& b) {
  return a.partition_id == b.partition_id && a.queue == b.queue && a.partition == b.partition;
}

void render_target(const PushResult& r, JsonWriter& w) {
  w.key("queueName").string(r.queue);
  w.key("partition").string(r.partition);
  w.key("partitionId").decimal_string(r.partition_id.value);
}

void render_push(const PushReply& reply, JsonWriter& w) {
  w.reserve(reply.results.size() * kRenderedItemBytes);
  w.begin_array();
  RunMembers<PushResult> targets;  // a push's items mostly come in runs into one partition
  for (size_t i = 0; i < reply.results.size(); ++i) {
    const PushResult& r = reply.results[i];
    w.begin_object();
    w.key("index").number(r.index);
    w.key("message_id").uuid(r.message_id);
    w.key("transaction_id").string(r.transaction_id);
    targets.put(reply.results, i, same_target, render_target, w);
    switch (r.status) {
      case PushStatus::queued:
        w.members(R"("status":"queued")");
        w.key("offset").number(r.offset.value);
        break;
      case PushStatus::duplicate:
      case PushStatus::buffered:
        w.key("status").string(r.status == PushStatus::duplicate ? "duplicate" : "buffered");
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

}  // namespace

namespace {

// A push body being scanned: each item is filled into the command as it is read, not kept
// as fields first. The body is still read to its end after an item is refused, so a body
// the scanner does not take goes to the general parser whatever it holds.
struct PushScan {
  PushCmd cmd;
  size_t items = 0;               // read, filled or not
  std::optional<Parsed> refused;  // the first item refused

  bool item(JsonScan& s) {
    PushItemFields f;
    if (!scan_push_item(s, &f)) return false;
    size_t i = items++;
    if (refused || i >= kPushItemsMax) return true;  // counted only
    if (auto r = fill_push_item(std::move(f), &cmd.items.emplace_back()))
      refused = refuse_item(indexed("items", i), *r);
    return true;
  }
};

// Room for a body's items, guessed from its size: most pushes then fill it without moving
// their items to a larger vector.
constexpr size_t kGuessedItemBytes = 256;

}  // namespace

// The push body as scanned; nullopt when the general parser must read it.
std::optional<Parsed> parse_push_scanned(std::string_view body, const EdgeSettings& settings,
                                         IdSource& ids) {
  JsonScan s(body, kJsonDepthMax);
  PushScan scan;
  scan.cmd.items.reserve(std::min(kPushItemsMax, body.size() / kGuessedItemBytes + 1));
  bool seen_items = false;
  bool ok = scan_members(s, [&](std::string_view key) {
    if (key != "items") return scan_skip(s);
    if (seen_items) return false;
    seen_items = true;
    return scan_elements(s, [&] { return scan.item(s); });
  });
  if (!ok || !seen_items || !s.at_end()) return std::nullopt;
  if (scan.items == 0) return answer_now(HttpAnswer{201, "[]", 0});
  if (scan.items > kPushItemsMax) return too_many_items(scan.items);
  if (scan.refused) return std::move(scan.refused);
  int64_t now_ms = ids.now_ms();
  std::vector<PushItem>& items = scan.cmd.items;
  for (size_t i = 0; i < items.size(); ++i)
    mint_push_ids(now_ms, ids, i > 0 ? &items[i - 1] : nullptr, &items[i]);
  return to_node(ids, settings.pop_timeout_ms_default, std::move(scan.cmd));
}

Parsed parse_push(std::string_view body, const EdgeSettings& settings, IdSource& ids) {
  if (auto scanned = parse_push_scanned(body, settings, ids)) return std::move(*scanned);
  std::string error;
  auto doc = parse_object(body, &error);
  if (!doc) return bad_request(error);
  auto items = doc->find("items");
  if (items == doc->end() || !items->is_array()) return bad_request("items must be an array");
  if (items->empty()) return answer_now(HttpAnswer{201, "[]", 0});
  if (items->size() > kPushItemsMax) return too_many_items(items->size());
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

// A push refused whole (a payload that cannot be sealed) answers its error.
HttpAnswer render_body(const PushReply& reply, RenderAs) {
  if (const auto& refused = reply.refused) return render_body(*refused, RenderAs::standard);
  JsonWriter w;
  render_push(reply, w);
  return HttpAnswer{201, w.take(), 0};
}

}  // namespace queen::server
