// The KV family: POST /api/v1/kv and GET, PUT, DELETE /api/v1/kv/:ns/:key.
#include "server/api/common.h"

namespace queen::server {

namespace {

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

}  // namespace

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

HttpAnswer render_body(const KvReply& reply, RenderAs as) {
  return as == RenderAs::kv_single ? render_kv_single(reply) : render_kv(reply);
}

}  // namespace queen::server
