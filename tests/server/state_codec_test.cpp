// Unit tests of the edge's parsing and rendering for transactions, KV, locks and timers:
// what reaches the node (ids minted, payloads decoded, leases resolved) and the wire shapes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/api/api.h"
#include "server/api/routes.h"
#include "tests/server/fixed_ids.h"

namespace queen::server {
namespace {

using nlohmann::json;

Parsed route(std::string_view method, std::string_view target, std::string_view body = "") {
  FixedIds ids;
  return route_request(method, target, body, EdgeSettings{}, ids);
}

TEST(StateCodec, TransactionAckTakesTheSingleRequiredLease) {
  const char* lease = "01a22b4b-3e43-788e-890e-ac235df61579";
  std::string body = std::string(R"({"requiredLeases":[")") + lease +
                     R"("],"operations":[{"type":"ack","transactionId":"t","partitionId":"7"},)"
                     R"({"type":"push","queue":"q","payload":{"a":1}}]})";
  Parsed p = route("POST", "/api/v1/transaction", body);
  ASSERT_TRUE(p.command) << p.answer.body;
  const auto& cmd = std::get<TxnCmd>(p.command->command);
  ASSERT_EQ(cmd.operations.size(), 2u);
  ASSERT_TRUE(cmd.operations[0].ack.lease_id);
  EXPECT_EQ(uuid_to_string(*cmd.operations[0].ack.lease_id), lease);
  EXPECT_EQ(cmd.operations[0].ack.partition_id.value, 7u);
  ASSERT_EQ(cmd.operations[1].items.size(), 1u);
  EXPECT_EQ(cmd.operations[1].items[0].payload, R"({"a":1})");
  EXPECT_FALSE(cmd.transaction_id.is_nil());
}

TEST(StateCodec, TimerPayloadIsDecodedAtTheEdge) {
  // base64 of {"a": 1} and of the bytes "hi"
  Parsed p =
      route("POST", "/api/v1/timers",
            R"({"operations":[{"op":"schedule","queue":"q","timerKey":"k",)"
            R"("delayMs":5,"txn":"x","payload":"eyJhIjogMX0="},)"
            R"({"op":"schedule","queue":"q","timerKey":"k2","delayMs":-5,"payload":"aGk="}]})");
  ASSERT_TRUE(p.command) << p.answer.body;
  const auto& cmd = std::get<TimerCmd>(p.command->command);
  EXPECT_EQ(cmd.ops[0].payload, R"({"a":1})");
  EXPECT_EQ(cmd.ops[0].txn, "x");
  EXPECT_EQ(cmd.ops[1].payload, R"("hi")");
  EXPECT_EQ(cmd.ops[1].delay_ms, 0);  // a delay below zero is due now
  EXPECT_EQ(cmd.ops[1].txn, uuid_to_string(cmd.ops[1].message_id));
  Parsed bad = route("POST", "/api/v1/timers",
                     R"({"operations":[{"op":"schedule","queue":"q","timerKey":"k",)"
                     R"("delayMs":0,"payload":"!!"}]})");
  EXPECT_EQ(bad.answer.status, 400u);
  EXPECT_EQ(json::parse(bad.answer.body)["reason"], "timers_bad_payload");
}

TEST(StateCodec, SingleKeyKvRendersTheRowWithAnEtag) {
  Parsed p = route("GET", "/api/v1/kv/ns/k%2F1");
  ASSERT_TRUE(p.command) << p.answer.body;
  EXPECT_EQ(p.render, RenderAs::kv_single);
  EXPECT_EQ(std::get<KvCmd>(p.command->command).ops[0].key, "k/1");
  EXPECT_EQ(route("GET", "/api/v1/kv/ns/k?x=1").answer.status, 400u);
  KvReply reply;
  KvResult r;
  r.op = KvOpKind::get;
  r.found = true;
  r.row.key = "k/1";
  r.row.value = R"({"v":2})";
  r.row.version = 9;
  reply.results.push_back(r);
  HttpAnswer a = render_reply(Reply{reply}, RenderAs::kv_single);
  EXPECT_EQ(a.status, 200u);
  EXPECT_EQ(a.etag, "\"9\"");
  EXPECT_EQ(json::parse(a.body)["value"], json({{"v", 2}}));
  reply.results[0].found = false;
  EXPECT_EQ(render_reply(Reply{reply}, RenderAs::kv_single).status, 404u);
}

TEST(StateCodec, AutopilotPicksBatchAndPartitionsLeftUnset) {
  Parsed p = route("GET", "/api/v1/pop/queue/q?autopilot=true");
  ASSERT_TRUE(p.command) << p.answer.body;
  EXPECT_EQ(std::get<PopCmd>(p.command->command).batch, kAutopilotBatch);
  EXPECT_EQ(std::get<PopCmd>(p.command->command).partitions, kAutopilotPartitions);
  p = route("GET", "/api/v1/pop/queue/q?autopilot=true&batch=7&partitions=2&leaseSeconds=9");
  ASSERT_TRUE(p.command) << p.answer.body;
  const auto& cmd = std::get<PopCmd>(p.command->command);
  EXPECT_EQ(cmd.batch, 7u);
  EXPECT_EQ(cmd.partitions, 2u);
  EXPECT_EQ(cmd.lease_time_s, 9);
  p = route("GET", "/api/v1/pop/queue/q?consumerGroup=g&subscriptionFrom=2024-01-02T03:04:05Z");
  ASSERT_TRUE(p.command) << p.answer.body;
  EXPECT_EQ(std::get<PopCmd>(p.command->command).subscription_mode, SubscriptionMode::from_time);
  p = route("GET", "/api/v1/pop/queue/q?commitOnDelivery=true");
  ASSERT_TRUE(p.command) << p.answer.body;
  EXPECT_TRUE(std::get<PopCmd>(p.command->command).auto_ack);
}

TEST(StateCodec, MalformedBodiesNeverThrow) {
  const char* targets[] = {"/api/v1/transaction", "/api/v1/kv", "/api/v1/locks", "/api/v1/timers"};
  const char* bodies[] = {"",
                          "[]",
                          "{",
                          "null",
                          R"({"operations":[null,1,"x",[],{}]})",
                          R"({"operations":[{"op":1,"ns":[],"key":{},"ttlSeconds":"x"}]})",
                          R"({"kv":[{"op":"incr","ns":"a","key":"b","delta":1e300}]})"};
  for (const char* t : targets) {
    for (const char* b : bodies) {
      Parsed p = route("POST", t, b);
      EXPECT_FALSE(p.command) << t << " " << b;
      EXPECT_GE(p.answer.status, 400u) << t << " " << b;
    }
  }
}

}  // namespace
}  // namespace queen::server
