// Integration tests of consumer-group, DLQ and queue administration against the real
// `queen` binary, written as a client uses them: seek then pop, delete a group then pop from
// the start, replay a dead letter then pop it, list, get and delete queues.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tests/server/api_helpers.h"
#include "tests/server/harness.h"
#include "tests/server/shared_node.h"

namespace queen::test {
namespace {

class AdminTest : public SharedNodeTest {
 protected:
  static std::string name(const std::string& suffix = "") { return unique_name(suffix); }

  // Pops `queue` for `group` from the beginning and acks what came; the payloads received.
  json pop_all(const std::string& queue, const std::string& group) {
    HttpResult r =
        pop(*client_, {.queue = queue, .group = group, .batch = 100, .subscription_mode = "all"});
    if (r.status == 204) return json::array();
    EXPECT_EQ(r.status, 200) << r.body;
    json answer = r.body_json();
    json acks = json::array(), data = json::array();
    for (const json& m : answer["messages"]) {
      acks.push_back(ack_item(m, "completed"));
      data.push_back(m["data"]);
    }
    json batch = {{"acknowledgments", acks}};
    if (!group.empty()) batch["consumerGroup"] = group;
    EXPECT_EQ(client_->post("/api/v1/ack/batch", batch).status, 200);
    return data;
  }
};

TEST_F(AdminTest, SeekToEndThenPopSeesOnlyNewMessages) {
  std::string q = name();
  ASSERT_EQ(push(*client_, {{q, "", "", 1}}).status, 201);
  EXPECT_EQ(pop_all(q, "G"), json({1}));
  ASSERT_EQ(push(*client_, {{q, "", "", 2}, {q, "", "", 3}}).status, 201);
  HttpResult s =
      client_->post("/api/v1/consumer-groups/G/queues/" + q + "/seek", {{"toEnd", true}});
  ASSERT_EQ(s.status, 200) << s.body;
  EXPECT_EQ(s.body_json()["success"], true);
  EXPECT_EQ(pop_all(q, "G"), json::array());
  ASSERT_EQ(push(*client_, {{q, "", "", 4}}).status, 201);
  EXPECT_EQ(pop_all(q, "G"), json({4}));
  EXPECT_EQ(client_->post("/api/v1/consumer-groups/G/queues/" + q + "/seek", json::object()).status,
            400);
  HttpResult back = client_->post("/api/v1/consumer-groups/G/queues/" + q + "/seek",
                                  {{"timestamp", "2000-01-01T00:00:00Z"}});
  EXPECT_EQ(back.status, 200) << back.body;
  EXPECT_EQ(pop_all(q, "G"), json({1, 2, 3, 4}));
}

TEST_F(AdminTest, DeletedGroupPopsFromTheStart) {
  std::string q = name();
  ASSERT_EQ(push(*client_, {{q, "", "", 1}, {q, "", "", 2}}).status, 201);
  EXPECT_EQ(pop_all(q, "D"), json({1, 2}));
  HttpResult groups = client_->get("/api/v1/consumer-groups");
  ASSERT_EQ(groups.status, 200) << groups.body;
  bool listed = false;
  for (const json& g : groups.body_json()) listed |= g["name"] == "D" && g["queueName"] == q;
  EXPECT_TRUE(listed) << groups.body;
  HttpResult details = client_->get("/api/v1/consumer-groups/D");
  ASSERT_EQ(details.status, 200) << details.body;
  EXPECT_TRUE(details.body_json().contains(q)) << details.body;
  HttpResult del = client_->request("DELETE", "/api/v1/consumer-groups/D?deleteMetadata=true");
  ASSERT_EQ(del.status, 200) << del.body;
  EXPECT_EQ(del.body_json()["consumerGroup"], "D");
  EXPECT_EQ(pop_all(q, "D"), json({1, 2}));
  HttpResult one = client_->request("DELETE", "/api/v1/consumer-groups/D/queues/" + q);
  EXPECT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(pop_all(q, "D"), json({1, 2}));
  HttpResult sub = client_->post("/api/v1/consumer-groups/D/subscription",
                                 {{"subscriptionTimestamp", "2030-01-01T00:00:00Z"}});
  EXPECT_EQ(sub.status, 200) << sub.body;
  EXPECT_EQ(client_->post("/api/v1/consumer-groups/D/subscription", json::object()).status, 400);
}

// The group's summary for `queue` in GET /api/v1/consumer-groups, or null.
json group_summary(HttpClient& c, const std::string& group, const std::string& queue) {
  HttpResult r = c.get("/api/v1/consumer-groups");
  EXPECT_EQ(r.status, 200) << r.body;
  for (const json& g : r.body_json())
    if (g["name"] == group && g["queueName"] == queue) return g;
  return nullptr;
}

// The lagging rows of (group, queue) in GET /api/v1/consumer-groups/lagging.
json lagging_rows(HttpClient& c, const std::string& min, const std::string& group,
                  const std::string& queue) {
  HttpResult r = c.get("/api/v1/consumer-groups/lagging?minLagSeconds=" + min);
  EXPECT_EQ(r.status, 200) << r.body;
  json rows = json::array();
  for (const json& row : r.body_json())
    if (row["consumer_group"] == group && row["queue_name"] == queue) rows.push_back(row);
  return rows;
}

TEST_F(AdminTest, LaggingGroupsAndGroupStates) {
  std::string q = name();
  ASSERT_EQ(push(*client_, {{q, "", "", 1}, {q, "", "", 2}}).status, 201);
  HttpResult r = pop(*client_, {.queue = q, .group = "L", .batch = 1, .subscription_mode = "all"});
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(ack(*client_, r.body_json()["messages"][0], "completed", "L").status, 200);
  EXPECT_EQ(group_summary(*client_, "L", q)["state"], "Stable");
  // Message 2 waits; once it is a second old the group lags by it.
  json rows;
  EXPECT_TRUE(eventually(std::chrono::milliseconds(5000), [&] {
    rows = lagging_rows(*client_, "0", "L", q);
    return rows.size() == 1;
  })) << rows.dump();
  if (rows.size() == 1) {
    EXPECT_EQ(rows[0]["partition_name"], "Default");
    EXPECT_EQ(rows[0]["offset_lag"], 1);
    EXPECT_GE(rows[0]["time_lag_seconds"].get<int64_t>(), 1);
    EXPECT_TRUE(rows[0]["oldest_unconsumed_at"].is_string()) << rows[0].dump();
    EXPECT_TRUE(rows[0]["last_consumed_at"].is_string()) << rows[0].dump();
  }
  EXPECT_TRUE(lagging_rows(*client_, "3600", "L", q).empty());
  EXPECT_EQ(client_->get("/api/v1/consumer-groups/lagging?minLagSeconds=soon").status, 400);
  // Cursors gone, subscription kept: the group is listed Dead until it consumes again.
  ASSERT_EQ(client_->request("DELETE", "/api/v1/consumer-groups/L?deleteMetadata=false").status,
            200);
  EXPECT_EQ(group_summary(*client_, "L", q)["state"], "Dead");
}

// The whole lists of a queue's and a group's partitions answer by name, not in the order the
// partitions were made (the node reads them in id order, a slice at a time).
void expect_whole_lists_by_name(HttpClient& client, const std::string& q) {
  for (const char* part : {"b", "c", "a"}) ASSERT_EQ(push(client, {{q, part, "", 1}}).status, 201);
  HttpResult r = pop(
      client, {.queue = q, .partition = "b", .group = "N", .batch = 1, .subscription_mode = "all"});
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(ack(client, r.body_json()["messages"][0], "completed", "N").status, 200);
  auto names = [](const json& partitions, const char* key) {
    std::vector<std::string> out;
    for (const json& p : partitions) out.push_back(p[key].get<std::string>());
    return out;
  };
  const std::vector<std::string> sorted{"a", "b", "c"};
  HttpResult get = client.get("/api/v1/resources/queues/" + q);
  ASSERT_EQ(get.status, 200) << get.body;
  EXPECT_EQ(names(get.body_json()["partitions"], "name"), sorted) << get.body;
  EXPECT_EQ(get.body_json()["totals"]["total"], 3) << get.body;
  HttpResult details = client.get("/api/v1/consumer-groups/N");
  ASSERT_EQ(details.status, 200) << details.body;
  EXPECT_EQ(names(details.body_json()[q]["partitions"], "partition"), sorted) << details.body;
  EXPECT_EQ(details.body_json()[q]["totalLag"], 2) << details.body;
  json rows;  // a and c wait; once a second old they lag, in name order
  EXPECT_TRUE(eventually(std::chrono::milliseconds(5000), [&] {
    rows = lagging_rows(client, "0", "N", q);
    return rows.size() == 2;
  })) << rows.dump();
  EXPECT_EQ(names(rows, "partition_name"), (std::vector<std::string>{"a", "c"}));
}

TEST_F(AdminTest, WholePartitionListsAreOrderedByName) {
  expect_whole_lists_by_name(*client_, name());
}

// The same lists read one partition at a time by the node, and rendered apart from the edge
// thread (every answer of a row or more): the same answers.
TEST(AdminWholeLists, ReadInSlicesAndRenderedApartTheyAnswerAlike) {
  TempDir dir;
  ServerProcess server(
      dir.path() + "/data", dir.path() + "/server.log",
      {{"QUEEN_LIST_SLICE_PARTITIONS", "1"}, {"QUEEN_HTTP_RENDER_APART_ROWS", "1"}});
  std::string error;
  ASSERT_TRUE(server.start(&error)) << error;
  HttpClient client(server.port());
  expect_whole_lists_by_name(client, "sliced");
  expect_whole_lists_by_name(client, "sliced2");  // a second queue read by the same group
  ASSERT_TRUE(server.running()) << server.log_tail();
}

TEST_F(AdminTest, DeadLetterReplayIsPoppedAgain) {
  std::string q = name();
  ASSERT_EQ(push(*client_, {{q, "", "poison", {{"p", 1}}}}).status, 201);
  HttpResult r = pop(*client_, {.queue = q});
  ASSERT_EQ(r.status, 200) << r.body;
  json m = r.body_json()["messages"][0];
  ASSERT_EQ(ack(*client_, m, "dlq").status, 200);
  HttpResult dlq = client_->get("/api/v1/dlq?queue=" + q);
  ASSERT_EQ(dlq.status, 200) << dlq.body;
  json records = dlq.body_json()["messages"];
  ASSERT_EQ(records.size(), 1u) << dlq.body;
  uint64_t id = records[0]["dlqId"].get<uint64_t>();
  HttpResult replay =
      client_->post("/api/v1/dlq/" + std::to_string(id) + "/replay", json::object());
  ASSERT_EQ(replay.status, 200) << replay.body;
  EXPECT_EQ(replay.body_json()["transactionId"], "dlq:" + std::to_string(id));
  EXPECT_EQ(pop_all(q, ""), json({{{"p", 1}}}));
  EXPECT_EQ(client_->post("/api/v1/dlq/999999/replay", json::object()).status, 404);
  EXPECT_EQ(client_->post("/api/v1/dlq/x/replay", json::object()).status, 400);
}

TEST_F(AdminTest, QueuesListGetAndDelete) {
  std::string q = name();
  ASSERT_EQ(configure(*client_, q, {{"retryLimit", 5}}).status, 200);
  ASSERT_EQ(push(*client_, {{q, "", "", 1}}).status, 201);
  HttpResult list = client_->get("/api/v1/resources/queues");
  ASSERT_EQ(list.status, 200) << list.body;
  bool listed = false;
  json queues = list.body_json()["queues"];
  for (const json& v : queues) listed |= v["name"] == q;
  EXPECT_TRUE(listed) << list.body;
  HttpResult get = client_->get("/api/v1/resources/queues/" + q);
  ASSERT_EQ(get.status, 200) << get.body;
  EXPECT_EQ(get.body_json()["name"], q);
  EXPECT_EQ(get.body_json()["options"]["retryLimit"], 5) << get.body;
  HttpResult del = client_->request("DELETE", "/api/v1/resources/queues/" + q);
  ASSERT_EQ(del.status, 200) << del.body;
  EXPECT_EQ(del.body_json()["deleted"], true);
  EXPECT_EQ(client_->get("/api/v1/resources/queues/" + q).status, 404);
}

TEST_F(AdminTest, MessagesBrowseAndGet) {
  std::string q = name();
  ASSERT_EQ(push(*client_, {{q, "", "m-1", {{"n", 1}}}, {q, "", "m-2", {{"n", 2}}}}).status, 201);
  HttpResult list = client_->get("/api/v1/messages?queue=" + q + "&limit=5000");
  ASSERT_EQ(list.status, 200) << list.body;
  json messages = list.body_json()["messages"];
  ASSERT_EQ(messages.size(), 2u) << list.body;
  EXPECT_EQ(messages[0]["transactionId"], "m-2");  // newest first
  std::string pid = messages[0]["partitionId"];
  EXPECT_EQ(client_->get("/api/v1/messages?queue=" + q + "&limit=1").body_json()["messages"].size(),
            1u);
  EXPECT_EQ(client_->get("/api/v1/messages?from=yesterday").status, 400);
  HttpResult one = client_->get("/api/v1/messages/" + pid + "/m-1");
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(one.body_json()["transactionId"], "m-1");
  EXPECT_EQ(client_->get("/api/v1/messages/x/m-1").status, 400);
}

TEST_F(AdminTest, TracesRecordedOnAMessageAreReadByMessageByNameAndAsNames) {
  std::string q = name();
  std::string tag = name("trace");
  ASSERT_EQ(push(*client_, {{q, "", "t-1", {{"n", 1}}}}).status, 201);
  HttpResult got = client_->get("/api/v1/messages?queue=" + q);
  ASSERT_EQ(got.status, 200) << got.body;
  std::string pid = got.body_json()["messages"][0]["partitionId"];
  json trace = {{"transactionId", "t-1"},    {"partitionId", pid},  {"data", {{"step", "parsed"}}},
                {"eventType", "processing"}, {"traceNames", {tag}}, {"consumerGroup", "workers"}};
  HttpResult rec = client_->post("/api/v1/traces", trace);
  ASSERT_EQ(rec.status, 201) << rec.body;
  EXPECT_EQ(rec.body_json()["success"], true);
  std::string trace_id = rec.body_json()["traceId"];
  trace["data"] = "done";
  trace["traceNames"] = tag;  // one name as a string
  ASSERT_EQ(client_->post("/api/v1/traces", trace).status, 201);

  HttpResult of_msg = client_->get("/api/v1/traces/" + pid + "/t-1");
  ASSERT_EQ(of_msg.status, 200) << of_msg.body;
  json traces = of_msg.body_json()["traces"];
  ASSERT_EQ(traces.size(), 2u) << of_msg.body;
  EXPECT_EQ(traces[0]["id"], trace_id);  // oldest first
  EXPECT_EQ(traces[0]["event_type"], "processing");
  EXPECT_EQ(traces[0]["data"], json({{"step", "parsed"}}));
  EXPECT_EQ(traces[0]["consumer_group"], "workers");
  EXPECT_EQ(traces[0]["trace_names"], json({tag}));
  EXPECT_TRUE(traces[0]["created_at"].is_string());
  EXPECT_EQ(traces[1]["data"], "done");

  HttpResult by = client_->get("/api/v1/traces/by-name/" + tag + "?limit=1&offset=1");
  ASSERT_EQ(by.status, 200) << by.body;
  EXPECT_EQ(by.body_json()["total"], 2);
  ASSERT_EQ(by.body_json()["traces"].size(), 1u);
  json located = by.body_json()["traces"][0];
  EXPECT_EQ(located["queue_name"], q);
  EXPECT_EQ(located["transaction_id"], "t-1");
  EXPECT_EQ(located["partition_id"], pid);
  EXPECT_EQ(located["message_payload"], json({{"n", 1}}));
  EXPECT_EQ(by.body_json()["pagination"], json({{"limit", 1}, {"offset", 1}}));

  HttpResult names = client_->get("/api/v1/traces/names?limit=10000");
  ASSERT_EQ(names.status, 200) << names.body;
  bool seen = false;
  json all_names = names.body_json()["trace_names"];
  for (const json& n : all_names) {
    if (n["trace_name"] != tag) continue;
    seen = true;
    EXPECT_EQ(n["trace_count"], 2);
    EXPECT_EQ(n["message_count"], 1);
  }
  EXPECT_TRUE(seen) << names.body;

  // Bad input names the problem; an unknown message is 404.
  HttpResult no_ids = client_->post("/api/v1/traces", {{"data", 1}});
  EXPECT_EQ(no_ids.status, 400);
  EXPECT_NE(no_ids.body.find("transactionId and partitionId are required"), std::string::npos);
  HttpResult no_data =
      client_->post("/api/v1/traces", {{"transactionId", "t-1"}, {"partitionId", pid}});
  EXPECT_EQ(no_data.status, 400);
  EXPECT_NE(no_data.body.find("data is required"), std::string::npos);
  trace["traceNames"] = {1, 2};
  EXPECT_EQ(client_->post("/api/v1/traces", trace).status, 400);
  trace["traceNames"] = tag;
  trace["transactionId"] = "missing";
  EXPECT_EQ(client_->post("/api/v1/traces", trace).status, 404);
  EXPECT_EQ(client_->get("/api/v1/traces/names?limit=0").status, 400);
}

}  // namespace
}  // namespace queen::test
