// What the API families (server/api/<family>.cpp) share: reading JSON bodies and query
// strings, the scanner helpers of the hot paths, the refusals of the KV, lock and timer
// routes, and the pieces one family lends another (a transaction reads pushes, acks, KV and
// timer operations as their own routes do). Internal to server/api.
//
// Contract: readers name the offending field in their error, prefixed by where it sits
// (`at`); nothing here throws past its caller.
#pragma once

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "server/api/api.h"
#include "server/json_scan.h"
#include "server/json_writer.h"

namespace queen::server {

using nlohmann::json;

// ---------- answers ----------

// Room for the fixed part of one rendered item (keys, ids, numbers); names and payloads add.
constexpr size_t kRenderedItemBytes = 240;

// Members that a run of consecutive items of an answer shares (a partition's names), rendered
// once for the run and spliced into each of its items; an item alone renders them in place.
template <class Item>
class RunMembers {
 public:
  // `same(a, b)`: whether a and b share the members; `render(item, writer)` writes them.
  template <class Same, class Render>
  void put(const std::vector<Item>& items, size_t i, Same same, Render render, JsonWriter& w) {
    const Item& item = items[i];
    if (!(of_ && same(*of_, item))) {
      if (i + 1 >= items.size() || !same(item, items[i + 1])) return render(item, w);
      of_ = &item;
      members_ = JsonWriter::members_of([&](JsonWriter& f) { render(item, f); });
    }
    w.members(members_);
  }

 private:
  const Item* of_ = nullptr;  // the item whose members members_ holds
  std::string members_;
};

Parsed to_node(IdSource& ids, int64_t timeout_ms, Command command);
Parsed answer_now(HttpAnswer answer);
Parsed bad_request(std::string_view message);
Parsed name_too_long(std::string_view what);
Uuid random_uuid(IdSource& ids);

// The rows of a whole list in the order the API lists them, by name (the node reads such a
// list a slice at a time in partition id order, and leaves the ordering to the edge).
template <class Row, class Name>
std::vector<const Row*> by_name(const std::vector<Row>& rows, Name name) {
  std::vector<const Row*> out;
  out.reserve(rows.size());
  for (const Row& r : rows) out.push_back(&r);
  std::sort(out.begin(), out.end(),
            [&](const Row* a, const Row* b) { return name(*a) < name(*b); });
  return out;
}

// ---------- names, numbers, query strings ----------

std::optional<uint64_t> parse_u64(std::string_view text);
// Queue, partition and group names: any bytes but the C0 controls (NUL included) and DEL.
extern const std::string kNoControlChars;
bool has_control_char(std::string_view name);
// A boolean query parameter: absent or empty gives `fallback`.
bool query_bool(const QueryParams& q, const char* name, bool fallback, std::string* error);
const std::string* query_text(const QueryParams& q, const char* name);
// A numeric query parameter from lo to hi, `dflt` when absent; nullopt when out of range.
std::optional<uint32_t> bounded_param(const QueryParams& q, const char* name, uint32_t dflt,
                                      uint32_t lo, uint32_t hi);
std::string indexed(std::string_view array, size_t i);
std::string iso_or_empty(int64_t us);
std::string lease_text(const LeaseId& id);
// A lease id, or "" when there is none.
void render_lease(const LeaseId& id, JsonWriter& w);

// ---------- JSON bodies ----------

// Parses a request body that must be a JSON object; on failure `error` names the problem.
std::optional<json> parse_object(std::string_view body, std::string* error);
std::optional<int64_t> json_int(const json& v);
const json* field(const json& obj, const char* key);
// A present field that is not an array is refused; absent or null gives an empty array.
std::optional<std::string> array_field(const json& doc, const char* key, const json** out);

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

// ---------- bodies without a tree (server/json_scan.h) ----------

// A string-or-null field, read once: a string is handed to `take` as a view of the body (or of
// a scratch copy when it holds an escape); null hands nothing.
template <class F>
bool scan_opt_text(JsonScan& s, bool* seen, F&& take) {
  if (*seen) return false;
  *seen = true;
  if (s.next_is('n')) {
    std::string_view raw;
    return s.value(&raw) && raw == "null";
  }
  std::string scratch;
  std::string_view text;
  if (!s.text(&text, &scratch)) return false;
  take(text);
  return true;
}
// Likewise into a string: null leaves `out` empty.
bool scan_opt_string(JsonScan& s, std::optional<std::string>* out, bool* seen);
// Any value, skipped (validated all the same).
bool scan_skip(JsonScan& s);
// A payload's bytes as sent, read once.
bool scan_payload(JsonScan& s, std::string* out, bool* seen);

// An object: `member(key)` reads each member's value, returning false to give up.
template <class F>
bool scan_members(JsonScan& s, F&& member) {
  if (!s.eat('{')) return false;
  if (s.eat('}')) return true;
  std::string scratch;  // a key with an escape, unescaped
  std::string_view key;
  do {
    if (!s.text(&key, &scratch) || !s.eat(':') || !member(key)) return false;
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

// ---------- refusals of the KV, lock and timer routes ----------

// The error body of the KV, lock and timer routes: {"error":code,"reason":...,"detail":...}.
HttpAnswer family_error(unsigned status, std::string_view code, std::string_view reason,
                        std::string_view detail);

// A refusal found while reading one operation: the HTTP status, code, reason and detail.
struct Refusal {
  unsigned status = 400;
  std::string code;
  std::string reason;
  std::string detail;
};

Parsed refuse(const Refusal& r);

// ---------- push items (push.cpp), read by transactions too ----------

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

Parsed refuse_item(const std::string& at, const ItemRefusal& r);
// Checks the fields and fills `out`; says why when the item is refused. `prev` is the
// request's item before (nullptr for the first).
std::optional<ItemRefusal> finish_push_item(PushItemFields f, int64_t now_ms, IdSource& ids,
                                            const PushItem* prev, PushItem* out);
// Fills `out` from items[i]; returns an answer to send at once when the item is refused.
std::optional<Parsed> read_push_item(const json& item, const std::string& at, int64_t now_ms,
                                     IdSource& ids, const PushItem* prev, PushItem* out);
bool scan_push_item(JsonScan& s, PushItemFields* f);

// ---------- ack items (ack.cpp), read by transactions too ----------

// The fields of one ack item, however they were read.
struct AckItemFields {
  std::string transaction_id, partition_id;
  std::optional<std::string> status, lease_id, group, error;
  std::optional<LeaseId> lease;  // the leaseId, when the scanner read it as a UUID already
};

// Checks the fields and fills `out`; returns why the item is refused (after its name), or
// empty.
std::string finish_ack_item(AckItemFields f, const std::optional<std::string>& group_override,
                            AckItem* out);
std::string read_ack_item(const json& obj, const std::string& at,
                          const std::optional<std::string>& group_override, AckItem* out);

// An ack item's keys as scanned; the two ids stay optional until the caller checks them.
struct ScannedAck {
  std::optional<std::string> transaction_id, partition_id;
  AckItemFields fields;  // status, leaseId, consumerGroup and error
  bool seen[6] = {};
};

// Scans the value of `key` into `a` if it is one of an ack item's keys: nullopt if it is
// not, else whether the value scanned (a string or null, the key's first time).
std::optional<bool> scan_ack_key(JsonScan& s, std::string_view key, ScannedAck* a);
bool filled(const std::optional<std::string>& v);
// The ack's fields, once both ids are known to be filled.
AckItemFields take_ack_fields(ScannedAck&& a);

// ---------- KV and timer operations (kv.cpp, timers.cpp), in transactions too ----------

// Reads an array of KV operations under the per-call limits; `in_txn` forbids getPrefix.
std::optional<Refusal> read_kv_ops(const json& arr, const char* name, bool in_txn,
                                   std::vector<KvOp>* out);
// The fields of one KV result (inside an object the caller opened).
void render_kv_fields(const KvResult& r, JsonWriter& w);
// The body of a lost required precondition (without the closing brace).
void render_kv_precondition(uint32_t failed_index, const std::string& kv_reason,
                            const KvRowView& row, JsonWriter& w);
std::optional<Refusal> read_timer_ops(const json& arr, const char* name, bool in_txn, IdSource& ids,
                                      std::vector<TimerOp>* out);
// The fields of one timer result (inside an object the caller opened).
void render_timer_fields(const TimerResult& r, JsonWriter& w);
void render_options(const QueueOptions& o, JsonWriter& w);

// ---------- renderers, one per reply kind (render.cpp dispatches with std::visit) ----------

HttpAnswer render_body(const ErrorReply& r, RenderAs as);              // render.cpp
HttpAnswer render_body(const PushReply& r, RenderAs as);               // push.cpp
HttpAnswer render_body(const PopReply& r, RenderAs as);                // pop.cpp
HttpAnswer render_body(const LeaseExtendReply& r, RenderAs as);        // pop.cpp
HttpAnswer render_body(const AckReply& r, RenderAs as);                // ack.cpp
HttpAnswer render_body(const TxnReply& r, RenderAs as);                // txn.cpp
HttpAnswer render_body(const ConfigureReply& r, RenderAs as);          // queues.cpp
HttpAnswer render_body(const QueuesReply& r, RenderAs as);             // queues.cpp
HttpAnswer render_body(const HealthReply& r, RenderAs as);             // system.cpp
HttpAnswer render_body(const MaintenanceReply& r, RenderAs as);        // system.cpp
HttpAnswer render_body(const MembershipReply& r, RenderAs as);         // membership.cpp
HttpAnswer render_membership_error(const ErrorReply& e);               // membership.cpp
HttpAnswer render_body(const MetricsReply& r, RenderAs as);            // system.cpp
HttpAnswer render_body(const DlqReply& r, RenderAs as);                // dlq.cpp
HttpAnswer render_body(const DlqReplayReply& r, RenderAs as);          // dlq.cpp
HttpAnswer render_body(const KvReply& r, RenderAs as);                 // kv.cpp
HttpAnswer render_body(const LockReply& r, RenderAs as);               // locks.cpp
HttpAnswer render_body(const TimerReply& r, RenderAs as);              // timers.cpp
HttpAnswer render_body(const TimerQueryReply& r, RenderAs as);         // timers.cpp
HttpAnswer render_body(const GroupsReply& r, RenderAs as);             // groups.cpp
HttpAnswer render_body(const GroupChangeReply& r, RenderAs as);        // groups.cpp
HttpAnswer render_body(const MessagesReply& r, RenderAs as);           // messages.cpp
HttpAnswer render_body(const MessageDeleteReply& r, RenderAs as);      // messages.cpp
HttpAnswer render_body(const TraceReply& r, RenderAs as);              // traces.cpp
HttpAnswer render_body(const FetchReply& r, RenderAs as);              // fetch.cpp
HttpAnswer render_body(const FetchOffsetsReply& r, RenderAs as);       // fetch.cpp
HttpAnswer render_body(const PartitionsChangedReply& r, RenderAs as);  // fetch.cpp

// The six counters of a queue or partition ({total, pending, processing, completed, failed,
// deadLetter}), and their sum over a queue's partitions (server/api/queues.cpp).
void render_six_counts(const PartitionStatsView& s, JsonWriter& w);
PartitionStatsView sum_of(const std::vector<PartitionStatsView>& partitions);
// One queue as the queue lists show it (server/api/queues.cpp).
void render_queue_summary(const QueueView& q, JsonWriter& w);

}  // namespace queen::server
