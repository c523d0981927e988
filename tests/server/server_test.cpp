// Integration tests of the HTTP API against the real `queen` binary on loopback: what a
// client relies on when it pushes, pops, acks, configures and restarts a node.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <memory>
#include <set>
#include <thread>

#include "tests/server/api_helpers.h"
#include "tests/server/harness.h"
#include "tests/server/shared_node.h"

namespace queen::test {
namespace {

using std::chrono::milliseconds;

// One node shared by the tests of this suite; each test uses its own queues.
class ServerTest : public SharedNodeTest {
 protected:
  static std::string queue(const std::string& suffix = "") { return unique_name(suffix); }
};

bool is_uuid(const json& v) {
  if (!v.is_string()) return false;
  const std::string& s = v.get_ref<const std::string&>();
  return s.size() == 36 && s[8] == '-' && s[13] == '-' && s[18] == '-' && s[23] == '-';
}

json pop_json(HttpClient& c, const PopSpec& spec) {
  HttpResult r = pop(c, spec);
  EXPECT_EQ(r.status, 200) << r.body << r.transport_error;
  return r.body_json();
}

// ---------- push ----------

TEST_F(ServerTest, PushAnswers201WithGaplessOffsetsFromZeroPerPartition) {
  std::string q = queue();
  HttpResult r = push(*client_, {{q, "p1", "a"}, {q, "p1", "b"}, {q, "p2", "c"}, {q, "p1", "d"}});
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(r.header("content-type"), "application/json");
  EXPECT_EQ(r.header("access-control-allow-origin"), "*");
  json a = r.body_json();
  ASSERT_TRUE(a.is_array());
  ASSERT_EQ(a.size(), 4u);
  std::vector<int> offsets;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i]["index"], i);
    EXPECT_EQ(a[i]["status"], "queued");
    EXPECT_EQ(a[i]["queueName"], q);
    EXPECT_TRUE(is_uuid(a[i]["message_id"])) << a[i];
    EXPECT_TRUE(a[i]["partitionId"].is_string()) << a[i];
    offsets.push_back(a[i]["offset"].get<int>());
  }
  EXPECT_EQ(a[0]["transaction_id"], "a");
  EXPECT_EQ(a[2]["partition"], "p2");
  EXPECT_EQ(offsets, (std::vector<int>{0, 1, 0, 2}));
  EXPECT_EQ(a[0]["partitionId"], a[1]["partitionId"]);
  EXPECT_NE(a[0]["partitionId"], a[2]["partitionId"]);

  json next = push(*client_, {{q, "p1", "e"}, {q, "p2", "f"}}).body_json();
  EXPECT_EQ(next[0]["offset"], 3);
  EXPECT_EQ(next[1]["offset"], 1);
}

TEST_F(ServerTest, PushWithoutTransactionIdUsesTheMessageId) {
  HttpResult r = push(*client_, {{queue(), "", ""}});
  ASSERT_EQ(r.status, 201) << r.body;
  json a = r.body_json();
  EXPECT_EQ(a[0]["transaction_id"], a[0]["message_id"]);
  EXPECT_EQ(a[0]["partition"], "Default");
}

// A transactionId the broker made for a push that named none is kept like a client's: a
// later push that names it is its duplicate, whether the partition's window is scanned
// (a few messages) or looked up through its hash ring (hundreds).
TEST_F(ServerTest, ATransactionIdMadeByTheBrokerIsFoundWhenAPushNamesIt) {
  std::string q = queue();
  json first = push(*client_, {{q, "p", ""}}).body_json();
  std::vector<PushSpec> many(300, PushSpec{q, "p", ""});
  json more = push(*client_, many).body_json();
  ASSERT_EQ(more.size(), 300u) << more;
  EXPECT_EQ(more[0]["status"], "queued");
  for (const json& original : {first[0], more[150]}) {
    std::string txn = original["transaction_id"];
    json again = push(*client_, {{q, "p", txn}}).body_json();
    ASSERT_EQ(again.size(), 1u) << again;
    EXPECT_EQ(again[0]["status"], "duplicate") << txn;
    EXPECT_EQ(again[0]["offset"], original["offset"]);
    EXPECT_EQ(again[0]["message_id"], original["message_id"]);
  }
  json after = push(*client_, {{q, "p", ""}, {q, "p", ""}}).body_json();
  EXPECT_EQ(after[0]["status"], "queued");
  EXPECT_EQ(after[1]["offset"], 302) << "pushes without a transactionId are each stored";
}

TEST_F(ServerTest, EmptyPushAnswers201WithAnEmptyArray) {
  HttpResult r = client_->post("/api/v1/push", json{{"items", json::array()}});
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(r.body_json(), json::array());
}

TEST_F(ServerTest, DuplicateTransactionIdAnswersTheOriginalOffsetAndMessageId) {
  std::string q = queue();
  json first = push(*client_, {{q, "p", "t-1", {{"n", 1}}}}).body_json();
  json again = push(*client_, {{q, "p", "t-1", {{"n", 2}}}}).body_json();
  ASSERT_EQ(again.size(), 1u) << again;
  EXPECT_EQ(again[0]["status"], "duplicate");
  EXPECT_EQ(again[0]["offset"], first[0]["offset"]);
  EXPECT_EQ(again[0]["message_id"], first[0]["message_id"]);
  json after = push(*client_, {{q, "p", "t-2"}}).body_json();
  EXPECT_EQ(after[0]["offset"], 1) << "a duplicate must not take an offset";
}

// ---------- pop ----------

TEST_F(ServerTest, PushCreatesQueueAndPartitionThatPopThenReads) {
  std::string q = queue();
  ASSERT_EQ(push(*client_, {{q, "made-by-push", "x", {{"hello", "world"}}}}).status, 201);
  json p = pop_json(*client_, {.queue = q, .partition = "made-by-push", .batch = 10});
  ASSERT_EQ(p["messages"].size(), 1u) << p;
  EXPECT_EQ(p["messages"][0]["data"], (json{{"hello", "world"}}));
  EXPECT_EQ(p["partition"], "made-by-push");
}

TEST_F(ServerTest, PopAnswers200WithMessagesThen204WhenEmpty) {
  std::string q = queue();
  json pushed =
      push(*client_, {{q, "p", "m0", {{"k", 0}}}, {q, "p", "m1", json::array({1, 2})}}).body_json();
  HttpResult r = pop(*client_, {.queue = q, .batch = 10});
  ASSERT_EQ(r.status, 200) << r.body;
  json p = r.body_json();
  EXPECT_EQ(p["success"], true);
  EXPECT_EQ(p["queue"], q);
  EXPECT_EQ(p["partition"], "p");
  EXPECT_EQ(p["partitionId"], pushed[0]["partitionId"]);
  EXPECT_TRUE(is_uuid(p["leaseId"])) << p;
  EXPECT_EQ(p["consumerGroup"], "__QUEUE_MODE__");
  EXPECT_GE(p["partitionsClaimed"].get<int>(), 1);
  ASSERT_EQ(p["messages"].size(), 2u);
  const json& m = p["messages"][0];
  EXPECT_EQ(m["id"], pushed[0]["message_id"]);
  EXPECT_EQ(m["messageId"], pushed[0]["message_id"]);
  EXPECT_EQ(m["transactionId"], "m0");
  EXPECT_TRUE(m["traceId"].is_null());
  EXPECT_EQ(m["partitionId"], pushed[0]["partitionId"]);
  EXPECT_EQ(m["partition"], "p");
  EXPECT_EQ(m["queue"], q);
  EXPECT_EQ(m["offset"], 0);
  EXPECT_EQ(m["deliveryAttempt"], 1);
  EXPECT_EQ(m["data"], (json{{"k", 0}}));
  EXPECT_EQ(m["leaseId"], p["leaseId"]);
  EXPECT_EQ(m["consumerGroup"], "__QUEUE_MODE__");
  EXPECT_TRUE(m["producerSub"].is_null());
  std::string created = m["createdAt"];
  EXPECT_EQ(created.size(), 27u) << created;  // YYYY-MM-DDTHH:MM:SS.ffffffZ
  EXPECT_EQ(created.back(), 'Z');
  EXPECT_EQ(p["messages"][1]["data"], json::array({1, 2}));
  EXPECT_EQ(p["messages"][1]["offset"], 1);

  for (const json& msg : p["messages"]) ASSERT_EQ(ack(*client_, msg, "completed").status, 200);
  HttpResult empty = pop(*client_, {.queue = q, .batch = 10});
  EXPECT_EQ(empty.status, 204);
  EXPECT_EQ(empty.body, "");
}

TEST_F(ServerTest, PopOfAnUnknownQueueAnswers204) {
  HttpResult r = pop(*client_, {.queue = queue("-never-pushed")});
  EXPECT_EQ(r.status, 204) << r.body;
}

TEST_F(ServerTest, PayloadIsDeliveredAsPushed) {
  std::string q = queue();
  json payload = {{"s", "é \"quoted\" \\ \n"},
                  {"n", -12},
                  {"f", 1.5},
                  {"b", false},
                  {"z", nullptr},
                  {"a", json::array({json::object(), json::array()})}};
  ASSERT_EQ(push(*client_, {{q, "", "", payload}}).status, 201);
  json p = pop_json(*client_, {.queue = q});
  EXPECT_EQ(p["messages"][0]["data"], payload);
}

// A body takes several reads of the socket (the read buffer holds at most 64 KiB); sent with a
// length, or in chunks, and followed on the same connection by another request, it arrives
// whole and in order.
TEST_F(ServerTest, BodiesLargerThanOneReadArriveWhole) {
  std::string q = queue();
  std::vector<PushSpec> items;
  for (int i = 0; i < 150; ++i) {
    items.push_back({q, "", "", json{{"i", i}, {"pad", std::string(2000 + i, 'a' + i % 26)}}});
  }
  std::string body = push_body(items).dump();
  ASSERT_GT(body.size(), 4 * 64 * 1024u);
  std::string chunked;
  for (size_t at = 0; at < body.size(); at += 70001) {
    std::string piece = body.substr(at, 70001);
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", piece.size());
    chunked += size + piece + "\r\n";
  }
  chunked += "0\r\n\r\n";
  std::string head = "POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n";
  std::string all = raw_exchange(
      server_->port(), head + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body +
                           head + "Transfer-Encoding: chunked\r\n\r\n" + chunked +
                           "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  size_t first = all.find("HTTP/1.1 201");
  size_t second = all.find("HTTP/1.1 201", first + 1);
  ASSERT_NE(second, std::string::npos) << all.substr(0, 300);
  EXPECT_NE(all.find("HTTP/1.1 200", second + 1), std::string::npos);

  json got = pop_json(*client_, {.queue = q, .batch = 400});
  ASSERT_EQ(got["messages"].size(), 2 * items.size());
  for (size_t n = 0; n < got["messages"].size(); ++n) {
    EXPECT_EQ(got["messages"][n]["data"], items[n % items.size()].payload) << n;
  }
}

TEST_F(ServerTest, LongPollIsWokenByAPush) {
  std::string q = queue();
  HttpClient poller(server_->port());
  auto started = std::chrono::steady_clock::now();
  auto waiting = std::async(std::launch::async, [&] {
    return pop(poller, {.queue = q, .batch = 5, .wait = true, .timeout_ms = 20000});
  });
  // Let the pop reach the node before pushing when it can, but the test holds either way.
  waiting.wait_for(milliseconds(200));
  ASSERT_EQ(push(*client_, {{q, "", "wake"}}).status, 201);
  HttpResult r = waiting.get();
  auto elapsed = std::chrono::steady_clock::now() - started;
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body_json()["messages"][0]["transactionId"], "wake");
  EXPECT_LT(elapsed, milliseconds(10000)) << "the long poll waited for its timeout";
}

TEST_F(ServerTest, LongPollAnswers204AtItsTimeout) {
  auto started = std::chrono::steady_clock::now();
  HttpResult r = pop(*client_, {.queue = queue(), .wait = true, .timeout_ms = 300});
  auto elapsed = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(r.status, 204) << r.body;
  EXPECT_GE(elapsed, milliseconds(200));
  EXPECT_LT(elapsed, milliseconds(5000));
}

TEST_F(ServerTest, AnAbandonedLongPollDoesNotSwallowMessages) {
  std::string q = queue();
  ASSERT_EQ(configure(*client_, q, {{"leaseTime", 60}}).status, 200);
  {
    // The client gives up after 300 ms and closes its connection; the pop was for 20 s.
    HttpClient quitter(server_->port());
    HttpResult r = quitter.get(pop_target({.queue = q, .wait = true, .timeout_ms = 20000}), 300);
    ASSERT_EQ(r.status, 0) << "expected the client to time out: " << r.body;
  }
  // One round trip through the node after the close, so the node hears of it first.
  ASSERT_EQ(client_->get("/health").status, 200);
  ASSERT_EQ(push(*client_, {{q, "", "kept-for-the-next"}}).status, 201);
  HttpResult r;
  ASSERT_TRUE(eventually(std::chrono::seconds(5), [&] {
    r = pop(*client_, {.queue = q, .wait = true, .timeout_ms = 200});
    return r.status == 200;
  })) << "the abandoned pop leased the message";
  EXPECT_EQ(r.body_json()["messages"][0]["transactionId"], "kept-for-the-next");
}

TEST_F(ServerTest, OnePopClaimsSeveralPartitionsWhenAsked) {
  std::string q = queue();
  ASSERT_EQ(push(*client_, {{q, "a", "in-a"}, {q, "b", "in-b"}, {q, "c", "in-c"}}).status, 201);
  HttpResult r = client_->get("/api/v1/pop/queue/" + q + "?batch=10&partitions=2");
  ASSERT_EQ(r.status, 200) << r.body;
  json p = r.body_json();
  EXPECT_EQ(p["partitionsClaimed"], 2) << p;
  ASSERT_EQ(p["messages"].size(), 2u) << p;
  EXPECT_NE(p["messages"][0]["partition"], p["messages"][1]["partition"]);
  EXPECT_EQ(p["messages"][0]["leaseId"], p["messages"][1]["leaseId"]) << "one lease for the pop";
}

TEST_F(ServerTest, DiscoveryPopReadsTheQueuesOfANamespace) {
  std::string ns = queue("ns");
  ASSERT_EQ(push(*client_, {{ns + ".billing.invoices", "", "found"}}).status, 201);
  HttpResult r = client_->get("/api/v1/pop?namespace=" + ns + "&task=billing");
  ASSERT_EQ(r.status, 200) << r.body;
  json p = r.body_json();
  EXPECT_EQ(p["messages"][0]["transactionId"], "found") << p;
  EXPECT_EQ(p["messages"][0]["queue"], ns + ".billing.invoices") << p;
  EXPECT_EQ(client_->get("/api/v1/pop").status, 400) << "a pop names a queue or a namespace";
}

TEST_F(ServerTest, ConsumerGroupsEachReadEveryMessage) {
  std::string q = queue();
  ASSERT_EQ(push(*client_, {{q, "", "one"}, {q, "", "two"}}).status, 201);
  for (std::string g : {"g1", "g2"}) {
    json p = pop_json(*client_, {.queue = q, .group = g, .batch = 10, .subscription_mode = "all"});
    ASSERT_EQ(p["messages"].size(), 2u) << g << p;
    EXPECT_EQ(p["consumerGroup"], g);
  }
}

// ---------- ack ----------

TEST_F(ServerTest, AckCompletedMovesTheCursor) {
  std::string q = queue();
  ASSERT_EQ(push(*client_, {{q, "", "first"}, {q, "", "second"}}).status, 201);
  json p = pop_json(*client_, {.queue = q});
  ASSERT_EQ(p["messages"].size(), 1u);
  EXPECT_EQ(p["messages"][0]["transactionId"], "first");
  HttpResult a = ack(*client_, p["messages"][0], "completed");
  ASSERT_EQ(a.status, 200) << a.body;
  json results = a.body_json();
  ASSERT_TRUE(results.is_array());
  EXPECT_EQ(results[0]["success"], true) << results;
  EXPECT_EQ(results[0]["transactionId"], "first");
  EXPECT_EQ(results[0]["queueName"], q);
  EXPECT_TRUE(results[0]["error"].is_null());
  json next = pop_json(*client_, {.queue = q});
  ASSERT_EQ(next["messages"].size(), 1u);
  EXPECT_EQ(next["messages"][0]["transactionId"], "second");
}

TEST_F(ServerTest, AckBatchAnswersOneResultPerItem) {
  std::string q = queue();
  ASSERT_EQ(push(*client_, {{q, "", "a"}, {q, "", "b"}, {q, "", "c"}}).status, 201);
  json p = pop_json(*client_, {.queue = q, .batch = 3});
  ASSERT_EQ(p["messages"].size(), 3u);
  json acks = json::array();
  for (const json& m : p["messages"]) acks.push_back(ack_item(m, "completed"));
  HttpResult r = client_->post("/api/v1/ack/batch", json{{"acknowledgments", acks}});
  ASSERT_EQ(r.status, 200) << r.body;
  json results = r.body_json();
  ASSERT_EQ(results.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(results[i]["index"], i);
    EXPECT_EQ(results[i]["success"], true) << results[i];
  }
  EXPECT_EQ(pop(*client_, {.queue = q}).status, 204);
}

TEST_F(ServerTest, RepeatedAckIsAnsweredLikeTheFirst) {
  std::string q = queue();
  ASSERT_EQ(push(*client_, {{q, "", "once"}, {q, "", "later"}}).status, 201);
  json m = pop_json(*client_, {.queue = q})["messages"][0];
  json first = ack(*client_, m, "completed").body_json();
  json again = ack(*client_, m, "completed").body_json();
  ASSERT_TRUE(first.is_array() && again.is_array()) << first << again;
  EXPECT_EQ(again[0]["success"], first[0]["success"]) << first << again;
  EXPECT_EQ(again[0]["error"], first[0]["error"]) << first << again;
  EXPECT_EQ(again[0]["dlq"], first[0]["dlq"]);
  json next = pop_json(*client_, {.queue = q});
  EXPECT_EQ(next["messages"][0]["transactionId"], "later") << "the repeat moved nothing back";
}

TEST_F(ServerTest, AckWithAStaleLeaseIsRefused) {
  std::string q = queue();
  ASSERT_EQ(push(*client_, {{q, "", "x"}}).status, 201);
  json m = pop_json(*client_, {.queue = q})["messages"][0];
  m["leaseId"] = "00000000-0000-7000-8000-000000000001";
  json r = ack(*client_, m, "completed").body_json();
  EXPECT_EQ(r[0]["success"], false) << r;
  EXPECT_FALSE(r[0]["error"].is_null()) << r;
}

TEST_F(ServerTest, LeaseExpiryRedeliversTheBatch) {
  std::string q = queue();
  ASSERT_EQ(configure(*client_, q, {{"leaseTime", 1}}).status, 200);
  ASSERT_EQ(push(*client_, {{q, "", "leased"}}).status, 201);
  json first = pop_json(*client_, {.queue = q});
  ASSERT_EQ(first["messages"].size(), 1u);
  EXPECT_EQ(pop(*client_, {.queue = q}).status, 204) << "the lease holds the partition";
  HttpResult again;
  ASSERT_TRUE(eventually(std::chrono::seconds(15), [&] {
    again = pop(*client_, {.queue = q, .wait = true, .timeout_ms = 500});
    return again.status == 200;
  })) << "never redelivered";
  json m = again.body_json()["messages"][0];
  EXPECT_EQ(m["transactionId"], "leased");
  EXPECT_EQ(m["offset"], 0);
  EXPECT_NE(m["leaseId"], first["messages"][0]["leaseId"]);
}

TEST_F(ServerTest, AnExtendedLeaseOutlivesItsLeaseTime) {
  std::string q = queue();
  ASSERT_EQ(configure(*client_, q, {{"leaseTime", 1}}).status, 200);
  ASSERT_EQ(push(*client_, {{q, "", "kept"}}).status, 201);
  json m = pop_json(*client_, {.queue = q})["messages"][0];
  std::string lease = m["leaseId"];
  HttpResult r = client_->post("/api/v1/lease/" + lease + "/extend", json{{"seconds", 30}});
  ASSERT_EQ(r.status, 200) << r.body;
  json e = r.body_json();
  EXPECT_EQ(e["success"], true) << e;
  EXPECT_EQ(e["leaseId"], lease);
  EXPECT_EQ(e["renewed"], 1) << e;
  EXPECT_TRUE(e["expiresAt"].is_string()) << e;
  EXPECT_EQ(e["newExpiresAt"], e["expiresAt"]) << e;
  // A long poll past the original second finds nothing: the lease still holds the partition.
  EXPECT_EQ(pop(*client_, {.queue = q, .wait = true, .timeout_ms = 2000}).status, 204);
  EXPECT_EQ(ack(*client_, m, "completed").body_json()[0]["success"], true);

  json unknown =
      client_->post("/api/v1/lease/00000000-0000-7000-8000-000000000009/extend", json::object())
          .body_json();
  EXPECT_EQ(unknown["success"], false) << unknown;
  EXPECT_EQ(unknown["renewed"], 0) << unknown;
  EXPECT_TRUE(unknown["error"].is_string()) << unknown;
  EXPECT_EQ(client_->post("/api/v1/lease/not-a-uuid/extend", json::object()).status, 400);
}

TEST_F(ServerTest, FailedAcksSpendTheRetryLimitThenGoToTheDlq) {
  std::string q = queue();
  const int retry_limit = 2;
  ASSERT_EQ(configure(*client_, q, {{"retryLimit", retry_limit}}).status, 200);
  ASSERT_EQ(push(*client_, {{q, "", "poison", {{"bad", true}}}}).status, 201);
  int deliveries = 0;
  bool in_dlq = false;
  while (!in_dlq && deliveries <= retry_limit + 1) {
    HttpResult r = pop(*client_, {.queue = q});
    ASSERT_EQ(r.status, 200) << "delivery " << deliveries + 1 << ": " << r.body;
    json m = r.body_json()["messages"][0];
    EXPECT_EQ(m["transactionId"], "poison");
    ++deliveries;
    json a = client_
                 ->post("/api/v1/ack", json{{"transactionId", m["transactionId"]},
                                            {"partitionId", m["partitionId"]},
                                            {"leaseId", m["leaseId"]},
                                            {"status", "failed"},
                                            {"error", "boom"}})
                 .body_json();
    ASSERT_EQ(a[0]["success"], true) << a;
    in_dlq = a[0]["dlq"] == true;
  }
  EXPECT_TRUE(in_dlq);
  EXPECT_EQ(deliveries, retry_limit + 1);
  EXPECT_EQ(pop(*client_, {.queue = q}).status, 204) << "a dead letter is not delivered again";

  HttpResult d = client_->get("/api/v1/dlq?queue=" + url_encode(q));
  ASSERT_EQ(d.status, 200) << d.body;
  json dlq = d.body_json();
  ASSERT_EQ(dlq["messages"].size(), 1u) << dlq;
  EXPECT_EQ(dlq["total"], 1);
  const json& dead = dlq["messages"][0];
  EXPECT_EQ(dead["transactionId"], "poison");
  EXPECT_EQ(dead["queue"], q);
  EXPECT_EQ(dead["data"], (json{{"bad", true}}));
  EXPECT_EQ(dead["errorMessage"], "boom");
}

// ---------- configure ----------

TEST_F(ServerTest, ConfigureMergesByDefaultAndReplaceResets) {
  std::string q = queue();
  HttpResult r = configure(*client_, q, {{"leaseTime", 10}, {"retryLimit", 5}});
  ASSERT_EQ(r.status, 200) << r.body;
  json c = r.body_json();
  EXPECT_EQ(c["configured"], true);
  EXPECT_EQ(c["queue"], q);
  EXPECT_TRUE(c["queueId"].is_string()) << c;
  EXPECT_TRUE(c["partitionId"].is_string()) << c;
  EXPECT_EQ(c["options"]["leaseTime"], 10);
  EXPECT_EQ(c["options"]["retryLimit"], 5);
  for (const char* key : {"retryDelay", "priority", "maxSize", "ttl", "deadLetterQueue",
                          "dlqAfterMaxRetries", "dedupWindowSeconds", "delayedProcessing",
                          "windowBuffer", "retentionEnabled", "retentionSeconds",
                          "completedRetentionSeconds", "maxWaitTimeSeconds", "encryptionEnabled"}) {
    EXPECT_TRUE(c["options"].contains(key)) << key;
  }

  json merged = configure(*client_, q, {{"retryLimit", 7}}).body_json();
  EXPECT_EQ(merged["options"]["leaseTime"], 10) << "merge keeps what it leaves out";
  EXPECT_EQ(merged["options"]["retryLimit"], 7);
  EXPECT_EQ(merged["queueId"], c["queueId"]);

  json replaced = configure(*client_, q, {{"retryLimit", 1}}, "replace").body_json();
  EXPECT_EQ(replaced["options"]["retryLimit"], 1);
  EXPECT_EQ(replaced["options"]["leaseTime"], 300) << "replace resets what it leaves out";
}

TEST_F(ServerTest, ConfigureSetsNamespaceAndTask) {
  std::string q = queue();
  json body = {
      {"queue", q}, {"namespace", "billing"}, {"task", "invoices"}, {"options", json::object()}};
  json c = client_->post("/api/v1/configure", body).body_json();
  EXPECT_EQ(c["namespace"], "billing") << c;
  EXPECT_EQ(c["task"], "invoices") << c;
}

// ---------- errors ----------

void expect_bad_request(HttpClient& c, const std::string& target, const std::string& body,
                        const std::string& field) {
  HttpResult r = c.post_raw(target, body);
  EXPECT_EQ(r.status, 400) << target << " " << body << " -> " << r.body;
  json j = r.body_json();
  EXPECT_EQ(j["code"], "bad_request") << r.body;
  ASSERT_TRUE(j["error"].is_string()) << r.body;
  EXPECT_NE(j["error"].get<std::string>().find(field), std::string::npos)
      << "error for " << body << " should name " << field << ": " << r.body;
}

TEST_F(ServerTest, MalformedRequestsAre400NamingTheField) {
  HttpClient& c = *client_;
  expect_bad_request(c, "/api/v1/push", "", "empty");
  expect_bad_request(c, "/api/v1/push", "{", "JSON");
  expect_bad_request(c, "/api/v1/push", "[1,2]", "object");
  expect_bad_request(c, "/api/v1/push", R"({"items":5})", "items");
  expect_bad_request(c, "/api/v1/push", R"({})", "items");
  expect_bad_request(c, "/api/v1/push", R"({"items":[7]})", "items[0]");
  expect_bad_request(c, "/api/v1/push", R"({"items":[{"payload":1}]})", "queue");
  expect_bad_request(c, "/api/v1/push", R"({"items":[{"queue":""}]})", "queue");
  expect_bad_request(c, "/api/v1/push", R"({"items":[{"queue":5}]})", "queue");
  expect_bad_request(c, "/api/v1/push", R"({"items":[{"queue":"q","partition":7}]})", "partition");
  expect_bad_request(c, "/api/v1/push",
                     R"({"items":[{"queue":"q"},{"queue":"q","transactionId":1}]})",
                     "items[1].transactionId");
  expect_bad_request(c, "/api/v1/push", R"({"items":[{"queue":"q","traceId":[]}]})", "traceId");
  expect_bad_request(c, "/api/v1/push", std::string(100000, '['), "nests");
  expect_bad_request(c, "/api/v1/push", "{\"items\":[{\"queue\":\"q\xff\"}]}", "JSON");
  expect_bad_request(c, "/api/v1/ack", R"({"partitionId":"1"})", "transactionId");
  expect_bad_request(c, "/api/v1/ack", R"({"transactionId":"t"})", "partitionId");
  expect_bad_request(c, "/api/v1/ack", R"({"transactionId":"t","partitionId":"abc"})",
                     "partitionId");
  expect_bad_request(c, "/api/v1/ack", R"({"transactionId":"t","partitionId":17})", "partitionId");
  expect_bad_request(c, "/api/v1/ack", R"({"transactionId":"t","partitionId":"1","status":"x"})",
                     "status");
  expect_bad_request(c, "/api/v1/ack",
                     R"({"transactionId":"t","partitionId":"1","leaseId":"nope"})", "leaseId");
  expect_bad_request(c, "/api/v1/ack/batch", R"({})", "acknowledgments");
  expect_bad_request(c, "/api/v1/ack/batch", R"({"acknowledgments":[{"transactionId":"t"}]})",
                     "acknowledgments[0].partitionId");
  expect_bad_request(c, "/api/v1/configure", R"({"options":{}})", "queue");
  expect_bad_request(c, "/api/v1/configure", R"({"queue":"q","options":{"leaseTime":"x"}})",
                     "options.leaseTime");
  expect_bad_request(c, "/api/v1/configure", R"({"queue":"q","options":{"retryLimit":-1}})",
                     "options.retryLimit");
  expect_bad_request(c, "/api/v1/configure",
                     R"({"queue":"q","options":{"encryptionEnabled":"yes"}})",
                     "options.encryptionEnabled");
  expect_bad_request(c, "/api/v1/configure", R"({"queue":"q","mode":"upsert"})", "mode");
}

TEST_F(ServerTest, BadPopParametersAre400WithThePopShape) {
  for (std::string params : {"batch=0", "batch=10001", "batch=abc", "timeout=soon", "wait=maybe",
                             "subscriptionMode=sideways&consumerGroup=g",
                             "subscriptionFrom=yesterday&consumerGroup=g"}) {
    HttpResult r = client_->get("/api/v1/pop/queue/" + queue() + "?" + params);
    EXPECT_EQ(r.status, 400) << params << " -> " << r.body;
    json j = r.body_json();
    EXPECT_EQ(j["success"], false) << r.body;
    EXPECT_EQ(j["code"], "bad_request") << r.body;
    EXPECT_EQ(j["messages"], json::array()) << r.body;
    std::string name = params.substr(0, params.find('='));
    EXPECT_NE(j["error"].get<std::string>().find(name), std::string::npos) << r.body;
  }
}

TEST_F(ServerTest, NamesOverTheKeyBudgetAre413) {
  HttpResult r = push(*client_, {{std::string(300, 'q'), std::string(200, 'p'), ""}});
  EXPECT_EQ(r.status, 413) << r.body;
  EXPECT_EQ(r.body_json()["code"], "name_too_long") << r.body;
}

TEST_F(ServerTest, UnknownRoutesAre404) {
  for (auto [method, target] :
       std::vector<std::pair<std::string, std::string>>{{"GET", "/nope"},
                                                        {"GET", "/api/v1/push"},
                                                        {"DELETE", "/api/v1/ack"},
                                                        {"GET", "/api/v1/pop/queue/q/partition"}}) {
    HttpResult r = client_->request(method, target);
    EXPECT_EQ(r.status, 404) << method << " " << target;
    json j = r.body_json();
    EXPECT_EQ(j["code"], "no_such_route") << r.body;
    EXPECT_EQ(j["error"], "no route for " + method + " " + target) << r.body;
  }
}

TEST_F(ServerTest, OptionsAnswersWithCorsHeaders) {
  HttpResult r = client_->request("OPTIONS", "/api/v1/push");
  EXPECT_EQ(r.status, 204);
  EXPECT_EQ(r.header("access-control-allow-origin"), "*");
  EXPECT_NE(r.header("access-control-allow-methods").find("POST"), std::string::npos);
}

TEST_F(ServerTest, HealthReportsTheRaftState) {
  HttpResult r = client_->get("/health");
  ASSERT_EQ(r.status, 200) << r.body;
  json h = r.body_json();
  EXPECT_EQ(h["status"], "healthy");
  EXPECT_EQ(h["engine"], "raft");
  EXPECT_EQ(h["raft"]["leader"], 1);
  EXPECT_EQ(h["raft"]["storageReady"], true);
  EXPECT_TRUE(h["raft"]["role"].is_string());
}

TEST_F(ServerTest, PipelinedRequestsAreAnsweredInOrder) {
  std::string q = queue();
  HttpClient a(server_->port());
  // Two requests written back to back on one connection before reading either answer.
  ASSERT_EQ(push(a, {{q, "", "p0"}}).status, 201);
  std::string body = push_body({{q, "", "p1"}}).dump();
  std::string raw;
  for (int i = 0; i < 2; ++i) {
    raw +=
        "POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
  }
  raw += "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  std::string all = raw_exchange(server_->port(), raw);
  size_t first = all.find("HTTP/1.1 201");
  size_t second = all.find("HTTP/1.1 201", first + 1);
  size_t third = all.find("HTTP/1.1 200", second + 1);
  EXPECT_NE(first, std::string::npos) << all;
  EXPECT_NE(second, std::string::npos) << all;
  EXPECT_NE(third, std::string::npos) << all;
  EXPECT_NE(all.find("\"healthy\""), std::string::npos) << all;
}

TEST_F(ServerTest, GarbageOnTheWireIsRefusedAndTheServerCarriesOn) {
  std::string bad_line = raw_exchange(server_->port(), "GARBAGE\r\n\r\n");
  EXPECT_EQ(bad_line.rfind("HTTP/1.1 400", 0), 0u) << bad_line;
  std::string huge_header = raw_exchange(
      server_->port(), "GET /health HTTP/1.1\r\nX: " + std::string(100000, 'a') + "\r\n\r\n");
  EXPECT_EQ(huge_header.rfind("HTTP/1.1 431", 0), 0u) << huge_header.substr(0, 200);
  std::string cut = raw_exchange(
      server_->port(), "POST /api/v1/push HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"it", 500);
  EXPECT_EQ(cut, "") << "a request cut short gets no answer";
  EXPECT_EQ(client_->get("/health").status, 200);
}

// ---------- nodes of their own ----------

TEST(ServerLimits, BodyOverTheLimitIsAPlain413) {
  TempDir dir;
  ServerProcess server(dir.path() + "/data", dir.path() + "/server.log",
                       {{"QUEEN_MAX_BODY_BYTES", "1024"}});
  std::string error;
  ASSERT_TRUE(server.start(&error)) << error;
  HttpClient c(server.port());
  HttpResult r = c.post("/api/v1/push", push_body({{"q", "", "", std::string(4096, 'x')}}));
  EXPECT_EQ(r.status, 413) << r.body << r.transport_error;
  HttpClient fresh(server.port());
  EXPECT_EQ(push(fresh, {{"q", "", "small"}}).status, 201);
}

TEST(ServerLimits, BadConfigurationStopsTheServerNamingTheVariable) {
  TempDir dir;
  ServerProcess server(dir.path() + "/data", dir.path() + "/server.log",
                       {{"QUEEN_LOG_JSON", "perhaps"}});
  std::string error;
  EXPECT_FALSE(server.start(&error));
  EXPECT_NE(server.log_tail().find("QUEEN_LOG_JSON"), std::string::npos) << server.log_tail();
}

TEST(ServerRestart, RestartKeepsMessagesOffsetsCursorsAndOptions) {
  TempDir dir;
  ServerProcess server(dir.path() + "/data", dir.path() + "/server.log");
  std::string error;
  ASSERT_TRUE(server.start(&error)) << error;
  json pushed, configured;
  std::string first_acked;
  {
    HttpClient c(server.port());
    configured = configure(c, "kept", {{"retryLimit", 9}}).body_json();
    pushed = push(c, {{"kept", "a", "t0", 0}, {"kept", "a", "t1", 1}, {"kept", "b", "t2", 2}})
                 .body_json();
    ASSERT_EQ(pushed.size(), 3u) << pushed;
    json p =
        pop_json(c, {.queue = "kept", .partition = "a", .group = "g", .subscription_mode = "all"});
    first_acked = p["messages"][0]["transactionId"];
    ASSERT_EQ(ack(c, p["messages"][0], "completed", "g").body_json()[0]["success"], true);
  }
  EXPECT_EQ(server.stop(), 0) << server.log_tail();
  ASSERT_TRUE(server.start(&error)) << error;
  HttpClient c(server.port());

  std::vector<json> all;
  ASSERT_TRUE(drain(c, "kept", "audit", &all, &error)) << error;
  std::set<std::tuple<std::string, std::string, int>> seen;
  auto row = [](const json& txn, const json& id, const json& offset) {
    return std::make_tuple(txn.get<std::string>(), id.get<std::string>(), offset.get<int>());
  };
  for (const json& m : all) seen.insert(row(m["transactionId"], m["id"], m["offset"]));
  EXPECT_EQ(seen.size(), pushed.size());
  for (const json& r : pushed) {
    EXPECT_TRUE(seen.count(row(r["transaction_id"], r["message_id"], r["offset"])))
        << "lost after restart: " << r;
  }

  json g = pop_json(c, {.queue = "kept", .partition = "a", .group = "g"});
  ASSERT_EQ(g["messages"].size(), 1u) << g;
  EXPECT_NE(g["messages"][0]["transactionId"], first_acked) << "an acked message came back";

  json next = push(c, {{"kept", "a", "t3"}}).body_json();
  EXPECT_EQ(next[0]["offset"], 2) << "offsets continue after restart";
  json dup = push(c, {{"kept", "a", "t0"}}).body_json();
  EXPECT_EQ(dup[0]["status"], "duplicate") << "dedup survives restart";

  json conf = configure(c, "kept", json::object()).body_json();
  EXPECT_EQ(conf["options"]["retryLimit"], 9);
  EXPECT_EQ(conf["queueId"], configured["queueId"]);
}

// The log folders under the data folder's qlog/ (q<queue id>, s<shared log>, q0 the system's).
std::set<std::string> log_folders(const std::string& data) {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(data + "/qlog", ec))
    if (e.is_directory()) out.insert(e.path().filename().string());
  return out;
}

// QUEEN_QLOG_SHARDS=2: three queues write into two shared logs; a restart with the default
// layout (one log per queue) writes new messages into queue logs and still serves the old.
TEST(ServerRestart, SharedQueueLogsKeepEveryMessageAcrossALayoutChange) {
  TempDir dir;
  const std::string data = dir.path() + "/data";
  const std::vector<std::string> queues = {"shared-a", "shared-b", "shared-c"};
  auto push_each = [&](HttpClient& c, const std::string& tag) {
    std::vector<PushSpec> items;
    for (const auto& q : queues) items.push_back({q, "", tag + q});
    ASSERT_EQ(push(c, items).status, 201);
  };
  std::string error;
  {
    ServerProcess sharded(data, dir.path() + "/sharded.log", {{"QUEEN_QLOG_SHARDS", "2"}});
    ASSERT_TRUE(sharded.start(&error)) << error;
    HttpClient c(sharded.port());
    push_each(c, "first-");
    EXPECT_EQ(sharded.stop(), 0) << sharded.log_tail();
  }
  std::set<std::string> folders = log_folders(data);
  EXPECT_TRUE(folders.contains("s0") && folders.contains("s1")) << folders.size();
  EXPECT_FALSE(folders.contains("q1") || folders.contains("q2") || folders.contains("q3"));
  ServerProcess plain(data, dir.path() + "/plain.log");
  ASSERT_TRUE(plain.start(&error)) << error;
  HttpClient c(plain.port());
  push_each(c, "second-");
  EXPECT_TRUE(log_folders(data).contains("q1"));
  for (const auto& q : queues) {
    std::vector<json> all;
    ASSERT_TRUE(drain(c, q, "audit", &all, &error)) << error;
    ASSERT_EQ(all.size(), 2u) << q;
    EXPECT_EQ(all[0]["transactionId"], "first-" + q);
    EXPECT_EQ(all[1]["transactionId"], "second-" + q);
  }
}

}  // namespace
}  // namespace queen::test

namespace queen::test {
namespace {

// A fetch with maxWaitMs and minBytes waits for records: it returns with the message pushed
// while it waited, long before maxWaitMs; one that finds nothing answers once maxWaitMs passed.
TEST_F(ServerTest, AFetchWaitsForMinBytesUntilMaxWait) {
  std::string q = queue();
  ASSERT_EQ(push(*client_, {{q, "", "first", 1}}).status, 201);
  json at_end = {
      {"entries", {{{"queue", q}, {"offset", 1}}}}, {"minBytes", 1}, {"maxWaitMs", 10000}};
  auto started = std::chrono::steady_clock::now();
  auto waiting = std::async(std::launch::async, [&] {
    HttpClient other(server_->port());
    return other.post("/api/v1/fetch", at_end);
  });
  ASSERT_EQ(waiting.wait_for(milliseconds(300)), std::future_status::timeout) << "it waits";
  ASSERT_EQ(push(*client_, {{q, "", "second", 2}}).status, 201);
  HttpResult r = waiting.get();
  auto took = std::chrono::steady_clock::now() - started;
  ASSERT_EQ(r.status, 200) << r.body;
  json e = r.body_json()["entries"][0];
  ASSERT_EQ(e["records"].size(), 1u) << r.body;
  EXPECT_EQ(e["records"][0]["transactionId"], "second");
  EXPECT_LT(took, std::chrono::seconds(5));
  json nothing = {
      {"entries", {{{"queue", q}, {"offset", 2}}}}, {"minBytes", 1}, {"maxWaitMs", 300}};
  started = std::chrono::steady_clock::now();
  HttpResult empty = client_->post("/api/v1/fetch", nothing);
  EXPECT_GE(std::chrono::steady_clock::now() - started, milliseconds(250));
  ASSERT_EQ(empty.status, 200) << empty.body;
  EXPECT_TRUE(empty.body_json()["entries"][0]["records"].empty()) << empty.body;
}

}  // namespace
}  // namespace queen::test
