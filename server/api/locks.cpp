// The lock family: POST /api/v1/locks.
#include "server/api/common.h"

namespace queen::server {

namespace {

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

}  // namespace

HttpAnswer render_body(const LockReply& reply, RenderAs) {
  JsonWriter w;
  w.begin_object();
  w.key("results").begin_array();
  for (const LockResult& r : reply.results) render_lock_result(r, w);
  w.end_array();
  w.end_object();
  return HttpAnswer{200, w.take(), 0};
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

}  // namespace queen::server
