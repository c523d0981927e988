// A 3-node cluster of real `queen` processes on loopback: every node serves clients (a
// follower forwards to the leader), an answered push is on every node, kill -9 of the leader
// under load elects another within 5 s and loses no answered push while consumers carry on,
// SIGTERM of the leader hands over in under a second, a restarted node catches up, and a node
// whose data folder was wiped is brought back by a snapshot of a log the leader reclaimed.
// Small log files, frequent checkpoints and a one-second hold for an absent follower make
// every node reclaim its log within a test.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "core/state/entry.h"
#include "tests/server/api_helpers.h"
#include "tests/server/harness.h"

namespace queen::test {
namespace {

using namespace std::chrono_literals;

constexpr int kNodes = 3;

class ClusterTest : public ::testing::Test {
 protected:
  // QUEEN_RAFT_CLIENT_OFFLOAD: on (the default) forwards prepared commands.
  virtual std::string offload() const { return "on"; }

  void SetUp() override {
    std::string peers;
    for (int i = 0; i < kNodes; ++i) {
      http_[i] = free_loopback_port();
      raft_[i] = free_loopback_port();
    }
    for (int i = 0; i < kNodes; ++i) {
      if (!peers.empty()) peers += ",";
      peers += std::to_string(i + 1) + "=127.0.0.1:" + std::to_string(raft_[i]) +
               "/127.0.0.1:" + std::to_string(http_[i]);
    }
    for (int i = 0; i < kNodes; ++i) {
      std::map<std::string, std::string> env{{"QUEEN_RAFT_NODE_ID", std::to_string(i + 1)},
                                             {"QUEEN_RAFT_PEERS", peers},
                                             {"QUEEN_RAFT_TOKEN", "test-token"},
                                             {"QUEEN_RAFT_ELECTION_MS", "600"},
                                             {"QUEEN_RAFT_HEARTBEAT_MS", "50"},
                                             {"QUEEN_CONSUME_LEADER_LEASE_MS", "300"},
                                             {"QUEEN_RAFT_MAX_CLOCK_SKEW_MS", "100"},
                                             {"QUEEN_RAFT_SEGMENT_BYTES", "8192"},
                                             {"QUEEN_RAFT_DURABLE_EVERY_MS", "100"},
                                             {"QUEEN_RAFT_DURABLE_EVERY_BYTES", "16384"},
                                             {"QUEEN_RAFT_PURGE_HOLD_S", "1"},
                                             {"QUEEN_RAFT_CLIENT_OFFLOAD", offload()}};
      nodes_[i] = std::make_unique<ServerProcess>(
          data(i), dir_.path() + "/n" + std::to_string(i + 1) + ".log", env);
      nodes_[i]->fix_port(http_[i]);
    }
    for (int i = 0; i < kNodes; ++i) start(i);
    ASSERT_GE(wait_leader(10s), 0) << log_tails();
  }

  void start(int i) {
    std::string error;
    ASSERT_TRUE(nodes_[i]->start(&error)) << error;
  }

  std::string data(int i) const { return dir_.path() + "/n" + std::to_string(i + 1); }

  json health(int i) {
    HttpClient c(http_[i]);
    return c.get("/health", 1000).body_json();
  }

  // The node (index) that leads and serves, or -1.
  int leader() {
    for (int i = 0; i < kNodes; ++i) {
      if (!nodes_[i]->running()) continue;
      json h = health(i);
      if (h.is_object() && h["raft"]["role"] == "leader" && h["status"] == "healthy") return i;
    }
    return -1;
  }

  int wait_leader(std::chrono::milliseconds within, int not_this = -1) {
    int found = -1;
    eventually(within, [&] {
      found = leader();
      return found >= 0 && found != not_this;
    });
    return found != not_this ? found : -1;
  }

  HttpResult push(int i, const std::string& queue, const std::string& txn) {
    HttpClient c(http_[i]);
    return c.post(
        "/api/v1/push",
        json{{"items", {{{"queue", queue}, {"transactionId", txn}, {"payload", {{"txn", txn}}}}}}});
  }

  // Every transactionId stored in `queue`, read through node i with group `group`.
  std::set<std::string> drain(int i, const std::string& queue, const std::string& group) {
    std::set<std::string> seen;
    HttpClient c(http_[i]);
    for (int round = 0; round < 1000; ++round) {
      auto r = c.get("/api/v1/pop/queue/" + queue + "?batch=100&wait=false&consumerGroup=" + group +
                     "&subscriptionMode=all&autoAck=true");
      if (r.status == 204) break;
      if (r.status != 200) {
        std::this_thread::sleep_for(100ms);  // a leader change: try again
        continue;
      }
      json body = r.body_json();
      for (const auto& m : body["messages"]) seen.insert(m["transactionId"].get<std::string>());
    }
    return seen;
  }

  // A counter or gauge of node i's /metrics/prometheus, by name and labels (-1 when absent).
  double metric(int i, const std::string& name) {
    HttpClient c(http_[i]);
    std::string text = c.get("/metrics/prometheus", 1000).body;
    size_t at = text.find("\n" + name + " ");
    if (at == std::string::npos) return -1;
    return std::stod(text.substr(at + name.size() + 2));
  }

  std::string log_tails() {
    std::string out;
    for (int i = 0; i < kNodes; ++i)
      out += "--- n" + std::to_string(i + 1) + "\n" + nodes_[i]->log_tail(1500);
    return out;
  }

  TempDir dir_;
  uint16_t http_[kNodes] = {};
  uint16_t raft_[kNodes] = {};
  std::unique_ptr<ServerProcess> nodes_[kNodes];
};

TEST_F(ClusterTest, PushToAFollowerIsAnswered201AndAppliedOnEveryNode) {
  int l = leader();
  int f = (l + 1) % kNodes;
  HttpResult r = push(f, "cq", "via-follower");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(r.body_json()[0]["status"], "queued");
  uint64_t commit = health(l)["raft"]["commit"];
  for (int i = 0; i < kNodes; ++i) {
    EXPECT_TRUE(eventually(5s, [&] { return health(i)["raft"]["applied"] >= commit; }))
        << "node " << i + 1 << " did not apply the push";
    // Any node answers a read (a follower forwards it).
    HttpClient c(http_[i]);
    auto q = c.get("/api/v1/resources/queues/cq");
    EXPECT_EQ(q.status, 200) << q.body;
  }
  EXPECT_EQ(drain(f, "cq", "g"), std::set<std::string>{"via-follower"});
  // Only the prepared command travelled, over the raft port's forward streams.
  EXPECT_GE(metric(f, R"(queen_raft_forwarded_commands_total{event="sent"})"), 1);
  EXPECT_GE(metric(l, R"(queen_raft_forwarded_commands_total{event="served"})"), 1);
}

// Every kind of request a client sends a follower is answered as the leader would: the
// prepared command and its typed reply carry every field.
TEST_F(ClusterTest, AFollowerServesAWorkerStepThroughTheLeader) {
  int f = (leader() + 1) % kNodes;
  HttpClient c(http_[f]);
  ASSERT_EQ(configure(c, "steps", {{"leaseTime", 30}, {"retryLimit", 5}}).status, 200);
  json q = c.get("/api/v1/resources/queues/steps").body_json();
  EXPECT_EQ(q["options"]["retryLimit"], 5) << q;
  HttpResult pushed =
      queen::test::push(c, {{"steps", "p1", "in-1", {{"n", 1}}}, {"steps", "p1", "in-2", 2}});
  ASSERT_EQ(pushed.status, 201) << pushed.body;
  HttpResult again = queen::test::push(c, {{"steps", "p1", "in-1", {{"n", 1}}}});
  ASSERT_EQ(again.status, 201) << again.body;
  EXPECT_EQ(again.body_json()[0]["status"], "duplicate") << again.body;
  EXPECT_EQ(again.body_json()[0]["message_id"], pushed.body_json()[0]["message_id"]);

  HttpResult popped =
      pop(c, {.queue = "steps", .group = "w", .batch = 2, .subscription_mode = "all"});
  ASSERT_EQ(popped.status, 200) << popped.body;
  json batch = popped.body_json();
  ASSERT_EQ(batch["messages"].size(), 2u) << popped.body;
  EXPECT_EQ(batch["messages"][0]["data"], json({{"n", 1}}));
  EXPECT_FALSE(batch["leaseId"].get<std::string>().empty());
  HttpResult acked = ack(c, batch["messages"][0], "completed", "w");
  ASSERT_EQ(acked.status, 200) << acked.body;

  // One step: ack the second input, push an output and write KV, atomically.
  json step = {
      {"operations",
       {{{"type", "ack"},
         {"transactionId", batch["messages"][1]["transactionId"]},
         {"partitionId", batch["messages"][1]["partitionId"]},
         {"leaseId", batch["leaseId"]},
         {"consumerGroup", "w"},
         {"status", "completed"}},
        {{"type", "push"}, {"queue", "out"}, {"payload", {{"from", "in-2"}}}}}},
      {"kv", {{{"op", "put"}, {"ns", "steps"}, {"key", "k"}, {"value", 7}, {"forever", true}}}}};
  HttpResult txn = c.post("/api/v1/transaction", step);
  ASSERT_EQ(txn.status, 200) << txn.body;
  EXPECT_EQ(txn.body_json()["success"], true) << txn.body;
  HttpResult kv =
      c.post("/api/v1/kv", json{{"operations", {{{"op", "get"}, {"ns", "steps"}, {"key", "k"}}}}});
  ASSERT_EQ(kv.status, 200) << kv.body;
  EXPECT_EQ(kv.body_json()["results"][0]["value"], 7) << kv.body;
  HttpResult groups = c.get("/api/v1/consumer-groups");
  ASSERT_EQ(groups.status, 200) << groups.body;
  EXPECT_NE(groups.body.find("\"w\""), std::string::npos) << groups.body;
  EXPECT_EQ(pop(c, {.queue = "steps", .group = "w", .subscription_mode = "all"}).status, 204);
  EXPECT_EQ(drain(f, "out", "g").size(), 1u);
  // A bad request is refused at the follower's edge, naming the field, and never forwarded.
  HttpResult bad =
      c.post("/api/v1/push", json{{"items", {{{"queue", "steps"}, {"partition", 5}}}}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("partition"), std::string::npos) << bad.body;
}

TEST_F(ClusterTest, FollowerAnswersWithTheLeaderWhenForwardingIsRefused) {
  int l = leader();
  int f = (l + 1) % kNodes;
  HttpClient c(http_[f]);
  // A request that already went through one node is not forwarded again.
  auto r =
      c.request("POST", "/api/v1/push", json{{"items", {{{"queue", "cq"}, {"payload", 1}}}}}.dump(),
                5000, {{"x-queen-forwarded", "9"}, {"content-type", "application/json"}});
  ASSERT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(r.body_json()["code"], "retry");
  EXPECT_EQ(r.body_json()["leader"], l + 1);
  EXPECT_FALSE(r.header("retry-after").empty());
}

// A follower forwards under the request id its edge gave the command and resends under the
// same id after a leader change; the leader keeps that id, so the resend is answered with the
// first outcome and stored once. An id from a sender that is not a configured peer is ignored.
TEST_F(ClusterTest, ALeaderKeepsTheRequestIdOfAForwardingPeer) {
  int l = leader();
  ASSERT_GE(l, 0);
  std::string peer = std::to_string((l + 1) % kNodes + 1);
  HttpClient c(http_[l]);
  auto send = [&](const std::string& from, const std::string& id, const std::string& txn) {
    json body = {{"items", {{{"queue", "rid"}, {"transactionId", txn}, {"payload", 1}}}}};
    return c.request("POST", "/api/v1/push", body.dump(), 5000,
                     {{"x-queen-forwarded", from},
                      {"x-queen-request-id", id},
                      {"content-type", "application/json"}});
  };
  const std::string id = "01900000-0000-7000-8000-00000000a001";
  HttpResult first = send(peer, id, "first");
  ASSERT_EQ(first.status, 201) << first.body;
  // The resend carries a fresh transactionId (the edge mints message ids anew): only the
  // request id makes it the same command.
  HttpResult again = send(peer, id, "resent");
  ASSERT_EQ(again.status, 201) << again.body;
  EXPECT_EQ(again.body_json()[0]["message_id"], first.body_json()[0]["message_id"]);
  EXPECT_EQ(again.body_json()[0]["offset"], first.body_json()[0]["offset"]);
  // Not a configured peer: its request id is not trusted, the push is a new one.
  HttpResult stranger = send("9", id, "stranger");
  ASSERT_EQ(stranger.status, 201) << stranger.body;
  EXPECT_NE(stranger.body_json()[0]["message_id"], first.body_json()[0]["message_id"]);
  EXPECT_EQ(drain(l, "rid", "g"), (std::set<std::string>{"first", "stranger"}));
}

TEST_F(ClusterTest, KillOfTheLeaderUnderLoadLosesNoAnsweredPushAndConsumersCarryOn) {
  int l = leader();
  int entry = (l + 1) % kNodes;  // clients talk to a follower that survives
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::set<std::string> answered;
  std::atomic<int> consumed_after{0};
  std::atomic<bool> killed{false};
  std::thread producer([&] {
    HttpClient c(http_[entry]);
    for (int n = 0; !stop; ++n) {
      std::string txn = "m" + std::to_string(n);
      auto r = c.post(
          "/api/v1/push",
          json{{"items", {{{"queue", "load"}, {"transactionId", txn}, {"payload", n}}}}}, 3000);
      if (r.status == 201) {
        std::lock_guard<std::mutex> g(mu);
        answered.insert(txn);
      }
    }
  });
  std::thread consumer([&] {
    HttpClient c(http_[entry]);
    while (!stop) {
      auto r = c.get(
          "/api/v1/pop/queue/load?batch=10&wait=true&timeout=500&consumerGroup=w"
          "&subscriptionMode=all&autoAck=true",
          3000);
      if (r.status == 200 && killed)
        consumed_after += static_cast<int>(r.body_json()["messages"].size());
      if (r.status != 200 && r.status != 204) std::this_thread::sleep_for(50ms);
    }
  });
  std::this_thread::sleep_for(1500ms);
  auto killed_at = std::chrono::steady_clock::now();
  nodes_[l]->kill9();
  killed = true;
  int l2 = wait_leader(5s, l);
  auto took = std::chrono::steady_clock::now() - killed_at;
  ASSERT_GE(l2, 0) << "no new leader within 5 s\n" << log_tails();
  EXPECT_LT(took, 5s);
  std::this_thread::sleep_for(1500ms);
  stop = true;
  producer.join();
  consumer.join();
  EXPECT_GT(consumed_after.load(), 0) << "consumers made no progress after the failover";
  std::set<std::string> stored = drain(entry, "load", "audit");
  size_t missing = 0;
  for (const auto& t : answered) missing += stored.count(t) ? 0 : 1;
  EXPECT_GT(answered.size(), 10u);
  EXPECT_EQ(missing, 0u) << missing << " answered pushes lost of " << answered.size();
}

TEST_F(ClusterTest, SigtermOfTheLeaderHandsOverInUnderASecond) {
  int l = leader();
  ASSERT_EQ(push(l, "cq", "before").status, 201);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(nodes_[l]->stop(), 0);
  int l2 = -1;
  eventually(3s, [&] {
    for (int i = 0; i < kNodes; ++i) {
      if (i == l) continue;
      json h = health(i);
      if (h.is_object() && h["raft"]["role"] == "leader") l2 = i;
    }
    return l2 >= 0;
  });
  auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_GE(l2, 0) << log_tails();
  EXPECT_LT(took, 1s) << "handover took "
                      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                      << " ms";
  EXPECT_TRUE(eventually(3s, [&] { return push(l2, "cq", "after").status == 201; }));
}

// Every member pinned to the disk it speaks from (the identity fence is armed).
bool all_pinned(uint16_t http_port) {
  HttpClient c(http_port);
  json m = c.get("/api/v1/system/raft/membership", 2000).body_json();
  if (!m.is_object() || m["clusterVersion"] != kFormatMax) return false;
  for (const auto& x : m["members"])
    if (x["disk"] == "" || x["disk"] != x["heardDisk"]) return false;
  return true;
}

// A follower restarts and catches up from the log; a wiped one, fenced under its old id, still
// catches up by snapshot (the leader reclaimed the log it missed) and counts once the runbook
// removed it and added it back.
TEST_F(ClusterTest, RestartedAndWipedNodesCatchUp) {
  int l = leader();
  int f = (l + 1) % kNodes;
  int w = (l + 2) % kNodes;
  ASSERT_TRUE(eventually(10s, [&] { return all_pinned(http_[l]); }));
  nodes_[w]->kill9();
  std::filesystem::remove_all(data(w));
  for (int n = 0; n < 30; ++n) ASSERT_EQ(push(l, "cq", "p" + std::to_string(n)).status, 201);
  // Consumer traffic (entries that carry no message) fills the system log; once two
  // checkpoints hold it, the leader removes its files, and the wiped node, silent all along,
  // can only come back by snapshot. Where the checkpoints fall depends on timing, so the
  // traffic goes on until the leader has reclaimed a file.
  HttpClient c(http_[l]);
  int pushed = 0, popped = 0;
  auto traffic_until_reclaimed = [&] {
    for (int n = 0; n < 10; ++n) {
      if (push(l, "wq", "w" + std::to_string(pushed)).status == 201) ++pushed;
      auto r = c.get(
          "/api/v1/pop/queue/wq?batch=1&wait=false&consumerGroup=warm"
          "&subscriptionMode=all&autoAck=true");
      popped += r.status == 200 ? 1 : 0;
    }
    return pushed >= 60 && metric(l, "queen_log_files_reclaimed_total") > 0;
  };
  ASSERT_TRUE(eventually(60s, traffic_until_reclaimed))
      << pushed << " pushed, " << popped << " popped\n"
      << log_tails();
  start(w);
  EXPECT_TRUE(eventually(10s, [&] {
    return metric(w, "queen_raft_snapshots_installed_total") >= 1;
  })) << log_tails();
  // The operator removes the wiped node and adds it back; then it is counted.
  std::string raft = "127.0.0.1:" + std::to_string(raft_[w]);
  std::string http = "127.0.0.1:" + std::to_string(http_[w]);
  auto del = c.request("DELETE", "/api/v1/system/raft/members/" + std::to_string(w + 1), "", 15000);
  ASSERT_EQ(del.status, 200) << del.body;
  auto add = c.post("/api/v1/system/raft/learners",
                    json{{"id", w + 1}, {"raft", raft}, {"http", http}}, 15000);
  ASSERT_EQ(add.status, 200) << add.body;
  ASSERT_TRUE(eventually(10s, [&] { return all_pinned(http_[l]); })) << log_tails();
  std::string promote_body = json{{"ids", {w + 1}}}.dump();
  HttpResult promoted;
  eventually(10s, [&] {
    promoted = c.request("POST", "/api/v1/system/raft/promote", promote_body, 15000);
    return promoted.status == 200;
  });
  ASSERT_EQ(promoted.status, 200) << promoted.body;
  // The re-added node is needed for a majority while the other follower restarts.
  nodes_[f]->stop();
  for (int n = 30; n < 35; ++n) ASSERT_EQ(push(l, "cq", "p" + std::to_string(n)).status, 201);
  start(f);  // a restarted node: it recovers, then catches up
  uint64_t commit = health(l)["raft"]["commit"];
  for (int i : {f, w}) {
    EXPECT_TRUE(eventually(10s, [&] { return health(i)["raft"]["applied"] >= commit; }))
        << "node " << i + 1 << " did not catch up\n"
        << log_tails();
  }
  // Either can lead now: stop the old leader and read everything through the wiped node.
  nodes_[l]->stop();
  ASSERT_GE(wait_leader(5s, l), 0) << log_tails();
  EXPECT_EQ(drain(w, "cq", "g").size(), 35u);
}

// QUEEN_RAFT_CLIENT_OFFLOAD=off: a follower forwards the whole HTTP request instead.
class ClusterWithoutOffloadTest : public ClusterTest {
 protected:
  std::string offload() const override { return "off"; }
};

TEST_F(ClusterWithoutOffloadTest, AFollowerForwardsTheWholeRequest) {
  int l = leader();
  int f = (l + 1) % kNodes;
  HttpResult r = push(f, "cq", "whole-request");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(drain(f, "cq", "g"), std::set<std::string>{"whole-request"});
  EXPECT_EQ(metric(f, R"(queen_raft_forwarded_commands_total{event="sent"})"), 0);
  EXPECT_EQ(metric(l, R"(queen_raft_forwarded_commands_total{event="served"})"), 0);
}

}  // namespace
}  // namespace queen::test
