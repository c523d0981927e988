// The helpers the API families share (server/api/common.h).
#include "server/api/common.h"

#include <xxhash.h>

namespace queen::server {

std::optional<uint64_t> parse_u64(std::string_view text) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

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
  p.command =
      CommandEnvelope{RequestId{random_uuid(ids)}, ids.now_ms() + timeout_ms, std::move(command)};
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

std::string indexed(std::string_view array, size_t i) {
  return std::string(array) + "[" + std::to_string(i) + "]";
}

// A string-or-null field, read once: null leaves `out` empty.
bool scan_opt_string(JsonScan& s, std::optional<std::string>* out, bool* seen) {
  return scan_opt_text(s, seen, [&](std::string_view text) { out->emplace(text); });
}

// Any value, skipped (validated all the same).
bool scan_skip(JsonScan& s) {
  std::string_view raw;
  return s.value(&raw);
}

// A payload's bytes as sent, read once.
bool scan_payload(JsonScan& s, std::string* out, bool* seen) {
  std::string_view raw;
  if (*seen || !s.value(&raw)) return false;
  *seen = true;
  out->assign(raw);
  return true;
}

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

std::string iso_or_empty(int64_t us) {
  return us == 0 ? std::string() : format_iso_us(us);
}

EdgeSettings edge_settings(const ServerConfig& config) {
  return EdgeSettings{config.stmt_timeout_ms,
                      config.pop_timeout_ms_default,
                      config.subscription_mode_default,
                      config.auth,
                      config.console_dir,
                      config.port};
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

}  // namespace queen::server
