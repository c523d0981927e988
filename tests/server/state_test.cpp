// Integration tests of the stateful routes against the real `queen` binary: transactions
// (a worker's step and each rollback reason), KV, once gates, locks guarding a transaction,
// and timers that fire into their queue. Written as a client would use the API.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "tests/server/api_helpers.h"
#include "tests/server/harness.h"
#include "tests/server/shared_node.h"

namespace queen::test {
namespace {

using std::chrono::milliseconds;

class StateTest : public SharedNodeTest {
 protected:
  static std::string name(const std::string& suffix = "") { return unique_name(suffix); }

  HttpResult kv(const json& ops) { return client_->post("/api/v1/kv", json{{"operations", ops}}); }
  // The `results` of a KV call (the SDK reads that envelope), or the whole body without one.
  json kv_results(const json& ops) {
    json body = kv(ops).body_json();
    return body.is_object() && body.contains("results") ? body["results"] : body;
  }

  // The value of ns/key, or nullopt when absent.
  std::optional<json> kv_value(const std::string& ns, const std::string& key) {
    HttpResult r = kv(json::array({{{"op", "get"}, {"ns", ns}, {"key", key}}}));
    EXPECT_EQ(r.status, 200) << r.body;
    json a = r.body_json()["results"];
    if (!a.is_array() || a.empty() || !a[0].value("found", false)) return std::nullopt;
    return a[0]["value"];
  }

  // Pops one message of `queue` in queue mode; null on 204.
  json pop_one(const std::string& queue) {
    HttpResult r = pop(*client_, {.queue = queue});
    if (r.status == 204) return nullptr;
    EXPECT_EQ(r.status, 200) << r.body;
    json a = r.body_json();
    return a.is_object() && !a["messages"].empty() ? a["messages"][0] : json(nullptr);
  }

  json txn(const json& body, int status = 200) {
    HttpResult r = client_->post("/api/v1/transaction", body);
    EXPECT_EQ(r.status, status) << r.body;
    return r.body_json();
  }

  void timer_refused(const json& op, int status, const std::string& code) {
    HttpResult r = client_->post("/api/v1/timers", json{{"operations", json::array({op})}});
    EXPECT_EQ(r.status, status) << r.body;
    EXPECT_EQ(r.body_json()["error"], code) << r.body;
  }
};

json ack_op(const json& m) {
  return {{"type", "ack"},
          {"transactionId", m["transactionId"]},
          {"partitionId", m["partitionId"]},
          {"leaseId", m["leaseId"]},
          {"status", "completed"}};
}

json push_op(const std::string& queue, const json& payload, const std::string& txn = "") {
  json item = {{"queue", queue}, {"payload", payload}};
  if (!txn.empty()) item["transactionId"] = txn;
  return {{"type", "push"}, {"items", json::array({item})}};
}

json marker(const std::string& key) {
  return {{"op", "put"}, {"ns", "steps"}, {"key", key}, {"value", true}, {"forever", true}};
}

TEST_F(StateTest, WorkerStepAcksPushesAndWritesKvTogether) {
  std::string in = name("-in"), out = name("-out");
  ASSERT_EQ(push(*client_, {{in, "", "job-1", {{"n", 1}}}}).status, 201);
  json m = pop_one(in);
  ASSERT_FALSE(m.is_null());
  json body = {{"operations", json::array({ack_op(m), push_op(out, {{"n", 2}})})},
               {"kv", json::array({marker(name())})}};
  json a = txn(body);
  ASSERT_TRUE(a["success"].get<bool>()) << a.dump();
  EXPECT_EQ(a["transactionId"].get<std::string>().size(), 36u);
  ASSERT_EQ(a["results"].size(), 3u) << a.dump();
  EXPECT_EQ(a["results"][0]["type"], "ack");
  EXPECT_EQ(a["results"][0]["index"], 0);
  EXPECT_TRUE(a["results"][0]["success"].get<bool>());
  EXPECT_EQ(a["results"][1]["type"], "push");
  EXPECT_EQ(a["results"][1]["queueName"], out);
  EXPECT_EQ(a["results"][2]["type"], "kv");
  EXPECT_EQ(a["results"][2]["index"], 2);
  EXPECT_EQ(a["results"][2]["opIndex"], 0);
  EXPECT_TRUE(a["results"][2]["applied"].get<bool>());
  EXPECT_TRUE(pop_one(in).is_null());
  json o = pop_one(out);
  ASSERT_FALSE(o.is_null());
  EXPECT_EQ(o["data"], json({{"n", 2}}));
  EXPECT_EQ(kv_value("steps", name()), json(true));
  // A second transaction minted its own id.
  json again = txn({{"kv", json::array({marker(name("-2"))})}});
  EXPECT_NE(again["transactionId"], a["transactionId"]);
}

TEST_F(StateTest, RejectedAckLeavesNothingBehind) {
  std::string in = name("-in"), out = name("-out");
  ASSERT_EQ(push(*client_, {{in, "", "job", {{"n", 1}}}}).status, 201);
  json m = pop_one(in);
  ASSERT_FALSE(m.is_null());
  ASSERT_EQ(ack(*client_, m, "completed").status, 200);  // the lease is gone now
  json body = {{"operations", json::array({ack_op(m), push_op(out, 1)})},
               {"kv", json::array({marker(name())})}};
  json a = txn(body);
  EXPECT_FALSE(a["success"].get<bool>()) << a.dump();
  EXPECT_EQ(a["reason"], "rejected_ack");
  EXPECT_TRUE(a["results"].empty());
  EXPECT_TRUE(pop_one(out).is_null());
  EXPECT_FALSE(kv_value("steps", name()));
}

TEST_F(StateTest, DuplicatePushRollsBack) {
  std::string out = name("-out");
  ASSERT_EQ(push(*client_, {{out, "", "dup-1", 1}}).status, 201);
  json a = txn({{"operations", json::array({push_op(out, 2, "dup-1")})},
                {"kv", json::array({marker(name())})}});
  EXPECT_FALSE(a["success"].get<bool>()) << a.dump();
  EXPECT_EQ(a["reason"], "duplicate");
  EXPECT_FALSE(kv_value("steps", name()));
  json first = pop_one(out);
  ASSERT_FALSE(first.is_null());
  EXPECT_EQ(first["data"], 1);
  EXPECT_TRUE(pop_one(out).is_null());
}

TEST_F(StateTest, KvPreconditionRollsBackAndNamesTheFailure) {
  std::string out = name("-out");
  json gate = {{"op", "putIfAbsent"}, {"ns", "once"},       {"key", name()},
               {"value", 1},          {"ttlSeconds", 3600}, {"required", true}};
  json body = {{"operations", json::array({push_op(out, "once")})}, {"kv", json::array({gate})}};
  json first = txn(body);
  ASSERT_TRUE(first["success"].get<bool>()) << first.dump();
  json second = txn(body);
  EXPECT_FALSE(second["success"].get<bool>()) << second.dump();
  EXPECT_EQ(second["reason"], "kv_precondition");
  EXPECT_EQ(second["kvReason"], "exists");
  EXPECT_EQ(second["failedIndex"], 1);  // flat: the pushed item, then kv[0]
  EXPECT_NE(second["error"].get<std::string>().find("rolled back"), std::string::npos);
  EXPECT_EQ(second["version"], first["results"][1]["version"]);
  EXPECT_EQ(second["value"], 1);
  EXPECT_FALSE(pop_one(out).is_null());
  EXPECT_TRUE(pop_one(out).is_null());  // the gate let exactly one through
}

TEST_F(StateTest, TransactionBodyShapeIsChecked) {
  auto refused = [&](const json& body, const std::string& needle) {
    HttpResult r = client_->post("/api/v1/transaction", body);
    EXPECT_EQ(r.status, 400) << body.dump() << " -> " << r.body;
    EXPECT_NE(r.body.find(needle), std::string::npos) << r.body;
  };
  refused({{"operations", json::array({{{"type", "kv"}, {"op", "get"}}})}}, "kv");
  refused({{"operations", json::array({{{"type", "push"}, {"timers", json::array()}}})}}, "timers");
  refused({{"operations", json::object()}}, "operations must be an array");
  refused({{"kv", "x"}}, "kv must be an array");
  refused({{"operations", json::array()}, {"kv", json::array()}}, "non-empty");
  refused(json::object(), "non-empty");
  refused({{"operations", json::array({{{"type", "ack"}}})}}, "operations[0].transactionId");
  refused({{"operations", json::array({push_op(name(), 1)})}, {"requiredLeases", {"x"}}},
          "requiredLeases[0]");
  // An inline single push item is accepted.
  json a = txn(
      {{"operations",
        json::array({{{"type", "push"}, {"queue", name()}, {"payload", {{"inline", true}}}}})}});
  EXPECT_TRUE(a["success"].get<bool>()) << a.dump();
  EXPECT_EQ(pop_one(name())["data"], json({{"inline", true}}));
}

TEST_F(StateTest, KvVersionsExpectIncrAndPrefix) {
  std::string ns = "t-kv";
  json put = {{"op", "put"}, {"ns", ns}, {"key", "a"}, {"value", {{"x", 1}}}, {"forever", true}};
  json r = kv_results(json::array({put}));
  ASSERT_TRUE(r.is_array()) << r.dump();
  EXPECT_TRUE(r[0]["applied"].get<bool>());
  uint64_t v1 = r[0]["version"].get<uint64_t>();
  EXPECT_GT(v1, 0u);
  json cas = put;
  cas["expect"] = v1;
  cas["value"] = 2;
  r = kv_results(json::array({cas}));
  EXPECT_TRUE(r[0]["applied"].get<bool>()) << r.dump();
  EXPECT_GT(r[0]["version"].get<uint64_t>(), v1);
  r = kv_results(json::array({cas}));  // version v1 is gone
  EXPECT_FALSE(r[0]["applied"].get<bool>()) << r.dump();
  EXPECT_EQ(r[0]["reason"], "version");
  json incr = {{"op", "incr"}, {"ns", ns}, {"key", "n"},
               {"delta", 5},   {"max", 7}, {"ttlSeconds", 600}};
  r = kv_results(json::array({incr}));  // one write of a key per call
  EXPECT_EQ(r[0]["value"], 5) << r.dump();
  r = kv_results(json::array({incr}));
  EXPECT_FALSE(r[0]["applied"].get<bool>()) << r.dump();
  EXPECT_EQ(r[0]["reason"], "limit");
  json ab = {{"op", "put"}, {"ns", ns}, {"key", "ab"}, {"value", 0}, {"forever", true}};
  kv_results(json::array({ab}));  // "ab" follows "a" under the prefix "a"
  r = kv_results(json::array({{{"op", "getPrefix"}, {"ns", ns}, {"prefix", "a"}, {"limit", 1}},
                              {{"op", "getMany"}, {"ns", ns}, {"keys", {"a", "zz"}}}}));
  ASSERT_EQ(r[0]["rows"].size(), 1u) << r.dump();
  EXPECT_EQ(r[0]["rows"][0]["key"], "a");
  EXPECT_TRUE(r[0]["truncated"].get<bool>());
  EXPECT_EQ(r[0]["nextAfter"], "a");
  EXPECT_EQ(r[1]["rows"].size(), 1u);
  EXPECT_EQ(r[1]["missing"], json({"zz"}));
  json required = cas;
  required["required"] = true;
  json other = put;
  other["key"] = "c";
  r = kv(json::array({other, required})).body_json();  // the abort has no results
  EXPECT_EQ(r["ok"], false) << r.dump();
  EXPECT_FALSE(r.contains("results")) << r.dump();
  EXPECT_EQ(r["reason"], "kv_precondition");
  EXPECT_EQ(r["failedIndex"], 1);
  EXPECT_EQ(r["kvReason"], "version");
  EXPECT_EQ(kv_value(ns, "a"), json(2));
  EXPECT_FALSE(kv_value(ns, "c"));  // the put before it did not apply either
}

TEST_F(StateTest, KvRefusesBadRequestsWithReasons) {
  auto refused = [&](const json& op, const std::string& reason, int status = 400,
                     const std::string& code = "kv_bad_request") {
    HttpResult r = kv(json::array({op}));
    EXPECT_EQ(r.status, status) << op.dump() << " -> " << r.body;
    json b = r.body_json();
    EXPECT_EQ(b["error"], code) << r.body;
    EXPECT_EQ(b["code"], code) << r.body;
    EXPECT_EQ(b["reason"], reason) << r.body;
    EXPECT_TRUE(b["detail"].is_string());
  };
  refused({{"op", "get"}, {"ns", "Upper"}, {"key", "a"}}, "kv_bad_namespace");
  refused({{"op", "get"}, {"ns", "-x"}, {"key", "a"}}, "kv_bad_namespace");
  refused({{"op", "get"}, {"ns", "ok"}, {"key", ""}}, "kv_bad_key");
  refused({{"op", "get"}, {"ns", "ok"}, {"key", std::string(513, 'k')}}, "kv_bad_key");
  refused({{"op", "put"}, {"ns", "ok"}, {"key", "a"}, {"value", 1}}, "kv_expiry_not_specified");
  refused({{"op", "put"}, {"ns", "ok"}, {"key", "a"}, {"ttlSeconds", 5}, {"forever", true}},
          "kv_expiry_not_specified");
  refused({{"op", "put"},
           {"ns", "ok"},
           {"key", "a"},
           {"forever", true},
           {"value", std::string(70000, 'v')}},
          "kv_value_too_large", 413, "payload_too_large");
  refused({{"op", "getPrefix"}, {"ns", "ok"}, {"prefix", "p"}, {"limit", 1001}}, "kv_bad_field");
  refused({{"op", "getPrefix"}, {"ns", "ok"}}, "kv_prefix_required");
  refused({{"op", "frob"}, {"ns", "ok"}, {"key", "a"}}, "kv_unknown_op");
  refused({{"op", "check"}, {"ns", "ok"}, {"key", "a"}}, "kv_bad_expect");
  json twice = {{"op", "put"}, {"ns", "ok"}, {"key", "a"}, {"value", 1}, {"forever", true}};
  HttpResult dup = kv(json::array({twice, twice}));
  EXPECT_EQ(dup.status, 400) << dup.body;
  EXPECT_EQ(dup.body_json()["reason"], "kv_duplicate_key_in_call") << dup.body;
  json many = json::array();
  for (int i = 0; i < 257; ++i) many.push_back({{"op", "get"}, {"ns", "ok"}, {"key", "a"}});
  EXPECT_EQ(kv(many).body_json()["reason"], "kv_too_many_ops");
  EXPECT_EQ(client_->post_raw("/api/v1/kv", "[1]").status, 400);
}

TEST_F(StateTest, KvSingleKeyRoutes) {
  std::string target = "/api/v1/kv/single/" + url_encode("a key/with slash");
  HttpResult put = client_->request("PUT", target, R"({"value":{"v":1},"ttlSeconds":60})");
  EXPECT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(kv_value("single", "a key/with slash"), json({{"v", 1}}));
  HttpResult get = client_->get(target);
  ASSERT_EQ(get.status, 200) << get.body;
  EXPECT_EQ(get.body_json()["value"], json({{"v", 1}}));
  EXPECT_EQ(get.header("etag"),
            "\"" + std::to_string(get.body_json()["version"].get<int>()) + "\"");
  EXPECT_EQ(client_->request("PUT", target + "?x=1", R"({"value":1,"forever":true})").status, 400);
  EXPECT_EQ(client_->request("PUT", target, R"({"value":1,"key":"k","forever":true})").status, 400);
  EXPECT_EQ(client_->request("PUT", target, R"({"value":1})").status, 400);  // no expiry
  EXPECT_EQ(client_->request("DELETE", target).status, 200);
  EXPECT_FALSE(kv_value("single", "a key/with slash"));
  EXPECT_EQ(client_->get(target).status, 404);
}

TEST_F(StateTest, LockGuardRollsBackAfterTakeover) {
  std::string lock = name(), out = name("-out");
  auto locks = [&](const json& op) {
    HttpResult r = client_->post("/api/v1/locks", json{{"operations", json::array({op})}});
    EXPECT_EQ(r.status, 200) << r.body;
    json a = r.body_json()["results"];
    return a.is_array() && a.size() == 1 ? a[0] : json(nullptr);
  };
  json a = locks({{"op", "acquire"}, {"name", lock}, {"ttlSeconds", 1}, {"owner", "A"}});
  ASSERT_TRUE(a["acquired"].get<bool>()) << a.dump();
  EXPECT_EQ(a["guard"]["op"], "check");
  EXPECT_EQ(a["guard"]["ns"], "queen-locks");
  EXPECT_EQ(a["guard"]["key"], lock + "#0");
  EXPECT_EQ(a["guard"]["expect"], a["token"]);
  EXPECT_EQ(a["guard"]["required"], true);
  json again = locks({{"op", "acquire"}, {"name", lock}, {"ttlSeconds", 1}, {"owner", "A"}});
  EXPECT_TRUE(again["already"].get<bool>()) << again.dump();
  EXPECT_EQ(again["token"], a["token"]);
  json minted = locks({{"op", "acquire"}, {"name", name("-minted")}, {"ttlSeconds", 30}});
  EXPECT_EQ(minted["owner"].get<std::string>().size(), 36u) << minted.dump();
  json b;
  ASSERT_TRUE(eventually(milliseconds(10000), [&] {
    b = locks({{"op", "acquire"}, {"name", lock}, {"ttlSeconds", 30}, {"owner", "B"}});
    return b.value("acquired", false);
  })) << b.dump();
  EXPECT_GT(b["token"].get<uint64_t>(), a["token"].get<uint64_t>());
  json t = txn(
      {{"operations", json::array({push_op(out, "from A")})}, {"kv", json::array({a["guard"]})}});
  EXPECT_FALSE(t["success"].get<bool>()) << t.dump();
  EXPECT_EQ(t["reason"], "kv_precondition");
  EXPECT_TRUE(pop_one(out).is_null());
  json tb = txn(
      {{"operations", json::array({push_op(out, "from B")})}, {"kv", json::array({b["guard"]})}});
  EXPECT_TRUE(tb["success"].get<bool>()) << tb.dump();
  HttpResult bad =
      client_->post("/api/v1/locks", json{{"operations", {{{"op", "acquire"}, {"name", "a#b"}}}}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body_json()["error"], "locks_bad_request") << bad.body;
}

std::string base64(const std::string& in) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out.push_back(kAlphabet[(v >> s) & 63]);
  }
  if (i < in.size()) {
    uint32_t v = uint8_t(in[i]) << 16;
    if (i + 1 < in.size()) v |= uint8_t(in[i + 1]) << 8;
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(i + 1 < in.size() ? kAlphabet[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

TEST_F(StateTest, TimerFiresIntoItsQueue) {
  std::string q = name();
  json op = {{"op", "schedule"}, {"queue", q},       {"timerKey", "t1"},
             {"delayMs", 200},   {"txn", "fire-t1"}, {"payload", base64(R"({"due":true})")}};
  HttpResult r = client_->post("/api/v1/timers", json{{"operations", json::array({op})}});
  ASSERT_EQ(r.status, 200) << r.body;
  json a = r.body_json()["results"];
  EXPECT_TRUE(a[0]["ok"].get<bool>()) << r.body;
  EXPECT_EQ(a[0]["status"], "scheduled");
  EXPECT_EQ(a[0]["timerKey"], "t1");
  json m;
  ASSERT_TRUE(eventually(milliseconds(10000), [&] {
    m = pop_one(q);
    return !m.is_null();
  }));
  EXPECT_EQ(m["data"], json({{"due", true}}));
  EXPECT_EQ(m["transactionId"], "fire-t1");
  EXPECT_EQ(m["messageId"], a[0]["messageId"]);
}

TEST_F(StateTest, TimerPeekListCountAndCancel) {
  std::string q = name();
  json ops = json::array();
  for (std::string key : {"k1", "k2", "x1"}) {
    ops.push_back({{"op", "schedule"},
                   {"queue", q},
                   {"timerKey", key},
                   {"delayMs", 3600000},
                   {"payload", base64("not json")}});
  }
  ASSERT_EQ(client_->post("/api/v1/timers", json{{"operations", ops}}).status, 200);
  json peek = client_->get("/api/v1/timers/" + q + "/k1").body_json();
  EXPECT_TRUE(peek["found"].get<bool>()) << peek.dump();
  EXPECT_EQ(peek["timerKey"], "k1");
  EXPECT_EQ(peek["payload"], base64(R"("not json")"));  // the JSON it fires with, as base64
  EXPECT_EQ(client_->get("/api/v1/timers/" + q + "/nope").body_json(), json({{"found", false}}));
  json list = client_->get("/api/v1/timers/" + q + "?limit=2").body_json();
  EXPECT_EQ(list["rows"].size(), 2u) << list.dump();
  EXPECT_TRUE(list["truncated"].get<bool>());
  EXPECT_EQ(list["nextAfter"], "k2");
  json count = client_->get("/api/v1/timers/" + q + "?mode=count&prefix=k").body_json();
  EXPECT_EQ(count["count"], 2) << count.dump();
  HttpResult del = client_->request("DELETE", "/api/v1/timers/" + q + "/k1");
  EXPECT_EQ(del.status, 200) << del.body;
  EXPECT_EQ(del.body_json()["status"], "cancelled") << del.body;  // the one result, bare
  del = client_->request("DELETE", "/api/v1/timers/" + q + "/k1");
  EXPECT_EQ(del.body_json()["status"], "absent") << del.body;
  EXPECT_FALSE(del.body_json()["ok"].get<bool>());
  json far = {
      {"op", "schedule"}, {"queue", q}, {"timerKey", "far"}, {"delayMs", 91LL * 86400 * 1000}};
  timer_refused(far, 403, "timer_horizon_exceeded");
  json owned = {{"op", "schedule"}, {"queue", q}, {"timerKey", "o"}, {"deliverAt", 1}};
  timer_refused(owned, 400, "timers_bad_request");
}

}  // namespace
}  // namespace queen::test
