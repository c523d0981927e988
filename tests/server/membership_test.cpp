// Membership changes on real `queen` processes on loopback, under push and pop load: a cluster
// grown from 3 to 5 voters and shrunk back to 3, a dead node replaced by a new one, a rolling
// restart of every node, QUEEN_RAFT_FORCE_RECOVER from one survivor after a majority was
// lost, a wiped node fenced until readmitted, a rolling upgrade of every node that raises the
// cluster version, and (client offload off) a follower forwarding to a leader added after it
// started. After each, every answered push is stored once; each step's unavailability (the longest
// time no push was answered) is printed and bounded.
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
using Clock = std::chrono::steady_clock;

constexpr int kSlots = 5;  // nodes 1-3 form the cluster; 4 and 5 join later
constexpr const char* kClusterId = "membership-test";

class MembershipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < kSlots; ++i) {
      http_[i] = free_loopback_port();
      raft_[i] = free_loopback_port();
    }
    for (int i = 0; i < 3; ++i) make(i, false, first_env(i));
    for (int i = 0; i < 3; ++i) start(i);
    ASSERT_GE(wait_leader(10s), 0) << log_tails();
  }

  void TearDown() override { stop_load(); }

  // Settings of the first three nodes' first start.
  virtual std::map<std::string, std::string> first_env(int) { return {}; }

  std::string peer(int i) const {
    return std::to_string(i + 1) + "=127.0.0.1:" + std::to_string(raft_[i]) +
           "/127.0.0.1:" + std::to_string(http_[i]);
  }

  // Node i's process: one of the first three (a peer list of 1-3), or a node that joins (it is
  // given every slot's address and waits to be added).
  void make(int i, bool join, std::map<std::string, std::string> extra) {
    std::string peers;
    for (int k = 0; k < (join ? kSlots : 3); ++k) peers += (k ? "," : "") + peer(k);
    std::map<std::string, std::string> env{{"QUEEN_RAFT_NODE_ID", std::to_string(i + 1)},
                                           {"QUEEN_RAFT_PEERS", peers},
                                           {"QUEEN_RAFT_TOKEN", "test-token"},
                                           {"QUEEN_RAFT_CLUSTER_ID", kClusterId},
                                           {"QUEEN_RAFT_ELECTION_MS", "600"},
                                           {"QUEEN_RAFT_HEARTBEAT_MS", "50"},
                                           {"QUEEN_CONSUME_LEADER_LEASE_MS", "300"},
                                           {"QUEEN_RAFT_MAX_CLOCK_SKEW_MS", "100"}};
    if (join) env["QUEEN_RAFT_JOIN"] = "true";
    for (auto& [k, v] : extra) env[k] = v;
    nodes_[i] = std::make_unique<ServerProcess>(data(i), log(i), env);
    nodes_[i]->fix_port(http_[i]);
  }

  void start(int i) {
    std::string error;
    ASSERT_TRUE(nodes_[i]->start(&error)) << error;
  }

  std::string data(int i) const { return dir_.path() + "/n" + std::to_string(i + 1); }
  std::string log(int i) const { return dir_.path() + "/n" + std::to_string(i + 1) + ".log"; }
  bool up(int i) { return nodes_[i] && nodes_[i]->running(); }

  json health(int i) {
    HttpClient c(http_[i]);
    return c.get("/health", 1000).body_json();
  }

  int leader() {
    for (int i = 0; i < kSlots; ++i) {
      if (!up(i)) continue;
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

  // A membership request through node i (a follower forwards it to the leader).
  HttpResult admin(int i, const std::string& method, const std::string& path,
                   const json& body = nullptr) {
    HttpClient c(http_[i]);
    return c.request(method, "/api/v1/system/raft/" + path, body.is_null() ? "" : body.dump(),
                     15000);
  }

  // Retried while the answer says the leader moved (a change may meet an election), another
  // change is in flight, or the learner to promote is behind: the runbook's retries. A
  // learner shown caught up can fall behind again before the promotion reaches the leader (a
  // snapshot installed below the configuration in use, a late heartbeat answer).
  HttpResult admin_ok(int i, const std::string& method, const std::string& path,
                      const json& body = nullptr) {
    HttpResult r;
    eventually(20s, [&] {
      r = admin(i, method, path, body);
      std::string code = r.body_json().value("code", "");
      return r.status == 200 || (r.status != 503 && r.status != 504 && r.status != 0 &&
                                 code != "in_flight" && code != "learner_behind");
    });
    return r;
  }

  json learner(int i) const {
    return json{{"id", i + 1},
                {"raft", "127.0.0.1:" + std::to_string(raft_[i])},
                {"http", "127.0.0.1:" + std::to_string(http_[i])}};
  }

  // The voters and learners of node i's answer to GET membership.
  std::pair<std::set<int>, std::set<int>> members(int i) {
    std::set<int> voters, learners;
    json m = admin(i, "GET", "membership").body_json();
    if (!m.is_object() || !m.contains("members")) return {};
    for (const auto& x : m["members"])
      (x["role"] == "voter" ? voters : learners).insert(x["id"].get<int>());
    return {voters, learners};
  }

  // The runbook's wait before a promotion: the leader, asked through node i, shows learner
  // `slot` with a lag of a few entries at most, and the learner serves.
  bool caught_up(int i, int slot) {
    return eventually(10s, [&] {
      json m = admin(i, "GET", "membership").body_json();
      if (!m.is_object() || !m.contains("members")) return false;
      for (const auto& x : m["members"])
        if (x["id"] == slot + 1 && x["match"].get<uint64_t>() > 0 && x["lag"].get<uint64_t>() < 50)
          return health(slot).value("status", "") == "healthy";
      return false;
    });
  }

  // The membership as node i answers it (from the leader).
  json membership(int i) {
    json m = admin(i, "GET", "membership").body_json();
    return m.is_object() && m.contains("members") ? m : json();
  }

  // At cluster version 2, with every member pinned to the disk it speaks from.
  bool all_pinned(int i) {
    json m = membership(i);
    if (m.is_null() || m["clusterVersion"] != kFormatMax) return false;
    for (const auto& x : m["members"])
      if (x["disk"] == "" || x["disk"] != x["heardDisk"]) return false;
    return true;
  }

  bool member_fenced(int i, int slot) {
    json m = membership(i);
    if (m.is_null()) return false;
    for (const auto& x : m["members"])
      if (x["id"] == slot + 1) return x["fenced"] == true;
    return false;
  }

  // ---- load: one producer and one consumer through `entry`, recording every answered push
  void start_load(int entry) {
    stop_ = false;
    producer_ = std::thread([this, entry] {
      HttpClient c(http_[entry]);
      for (int n = 0; !stop_; ++n) {
        std::string txn = "m" + std::to_string(n);
        auto r = c.post(
            "/api/v1/push",
            json{{"items", {{{"queue", "load"}, {"transactionId", txn}, {"payload", n}}}}}, 3000);
        if (r.status != 201) {
          std::this_thread::sleep_for(20ms);
          continue;
        }
        std::lock_guard<std::mutex> g(mu_);
        answered_.insert(txn);
        auto now = Clock::now();
        worst_gap_ = std::max(worst_gap_, now - last_answer_);
        last_answer_ = now;
      }
    });
    consumer_ = std::thread([this, entry] {
      HttpClient c(http_[entry]);
      while (!stop_) {
        auto r = c.get(
            "/api/v1/pop/queue/load?batch=10&wait=true&timeout=300&consumerGroup=w"
            "&subscriptionMode=all&autoAck=true",
            3000);
        if (r.status == 200) consumed_ += r.body_json()["messages"].size();
        if (r.status != 200 && r.status != 204) std::this_thread::sleep_for(50ms);
      }
    });
  }

  void stop_load() {
    stop_ = true;
    if (producer_.joinable()) producer_.join();
    if (consumer_.joinable()) consumer_.join();
  }

  // Starts a step: the longest pause in answered pushes is measured from here.
  void begin_step() {
    std::lock_guard<std::mutex> g(mu_);
    last_answer_ = Clock::now();
    worst_gap_ = {};
  }

  // Ends a step: waits for pushes to be answered again, prints and returns its unavailability.
  int64_t end_step(const std::string& what) {
    size_t before = answered_count();
    eventually(10s, [&] { return answered_count() > before + 5; });
    std::lock_guard<std::mutex> g(mu_);
    int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(worst_gap_).count();
    std::printf("membership step: %-36s longest pause in answered pushes %5lld ms\n", what.c_str(),
                static_cast<long long>(ms));
    return ms;
  }

  size_t answered_count() {
    std::lock_guard<std::mutex> g(mu_);
    return answered_.size();
  }

  // Every answered push is stored exactly once, read through node i by a fresh group.
  void expect_every_answered_push_once(int i) {
    std::multiset<std::string> stored;
    HttpClient c(http_[i]);
    for (int round = 0; round < 2000; ++round) {
      auto r = c.get("/api/v1/pop/queue/load?batch=500&wait=false&consumerGroup=audit" +
                     std::to_string(audits_) + "&subscriptionMode=all&autoAck=true");
      if (r.status == 204) break;
      if (r.status != 200) {
        std::this_thread::sleep_for(100ms);
        continue;
      }
      json body = r.body_json();
      for (const auto& m : body["messages"]) stored.insert(m["transactionId"].get<std::string>());
    }
    ++audits_;
    std::lock_guard<std::mutex> g(mu_);
    size_t missing = 0, twice = 0;
    for (const auto& t : answered_) {
      missing += stored.count(t) == 0;
      twice += stored.count(t) > 1;
    }
    EXPECT_GT(answered_.size(), 20u);
    EXPECT_EQ(missing, 0u) << missing << " answered pushes lost of " << answered_.size() << " ("
                           << stored.size() << " read)";
    EXPECT_EQ(twice, 0u) << twice << " answered pushes stored twice";
  }

  std::string log_tails() {
    std::string out;
    for (int i = 0; i < kSlots; ++i)
      if (nodes_[i]) out += "--- n" + std::to_string(i + 1) + "\n" + nodes_[i]->log_tail(1500);
    return out;
  }

  TempDir dir_;
  uint16_t http_[kSlots] = {};
  uint16_t raft_[kSlots] = {};
  std::unique_ptr<ServerProcess> nodes_[kSlots];
  std::thread producer_, consumer_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> consumed_{0};
  std::mutex mu_;
  std::set<std::string> answered_;
  Clock::time_point last_answer_ = Clock::now();
  Clock::duration worst_gap_{};
  int audits_ = 0;
};

// A step of a membership change may pause writes for an election at most; well under this.
constexpr int64_t kStepPauseMaxMs = 5000;

TEST_F(MembershipTest, GrowsFromThreeToFiveVotersAndBackUnderLoad) {
  make(3, true, {});
  make(4, true, {});
  start(3);
  start(4);
  EXPECT_EQ(HttpClient(http_[3]).get("/health", 1000).status, 503);  // not added yet
  start_load(0);
  std::this_thread::sleep_for(500ms);

  begin_step();
  for (int i : {3, 4}) {
    auto r = admin_ok(1, "POST", "learners", learner(i));
    ASSERT_EQ(r.status, 200) << r.body << log_tails();
  }
  EXPECT_EQ(members(0).second, (std::set<int>{4, 5}));
  EXPECT_TRUE(caught_up(0, 3) && caught_up(0, 4)) << log_tails();
  EXPECT_LT(end_step("add learners 4 and 5"), kStepPauseMaxMs);

  begin_step();
  auto promoted = admin_ok(2, "POST", "promote", json{{"ids", {4, 5}}});
  ASSERT_EQ(promoted.status, 200) << promoted.body << log_tails();
  EXPECT_EQ(members(0).first, (std::set<int>{1, 2, 3, 4, 5}));
  EXPECT_LT(end_step("promote 4 and 5 (one at a time)"), kStepPauseMaxMs);

  begin_step();
  auto voters = admin_ok(0, "PUT", "voters", json{{"voters", {1, 2, 3}}});
  ASSERT_EQ(voters.status, 200) << voters.body << log_tails();
  EXPECT_EQ(members(0).first, (std::set<int>{1, 2, 3}));
  for (int id : {4, 5}) {
    auto removed = admin_ok(0, "DELETE", "members/" + std::to_string(id));
    ASSERT_EQ(removed.status, 200) << removed.body;
  }
  EXPECT_EQ(members(0), (std::pair<std::set<int>, std::set<int>>{{1, 2, 3}, {}}));
  EXPECT_LT(end_step("demote and remove 4 and 5"), kStepPauseMaxMs);

  stop_load();
  EXPECT_GT(consumed_.load(), 0u);
  expect_every_answered_push_once(0);
}

TEST_F(MembershipTest, RefusalsNameTheirCode) {
  auto missing = admin(0, "POST", "learners", json{{"id", 4}});
  EXPECT_EQ(missing.status, 400);
  EXPECT_EQ(missing.body_json()["ok"], false);
  EXPECT_EQ(missing.body_json()["code"], "bad_request");
  auto stranger = admin(0, "DELETE", "members/9");
  EXPECT_EQ(stranger.status, 400);
  EXPECT_EQ(stranger.body_json()["code"], "not_a_member");
  auto voter = admin(0, "POST", "learners", learner(1));
  EXPECT_EQ(voter.status, 409);
  EXPECT_EQ(voter.body_json()["code"], "already_voter");
  json moved = learner(1);
  moved["http"] = "127.0.0.1:1";
  EXPECT_EQ(admin(0, "POST", "learners", moved).body_json()["code"], "address_mismatch");
  auto not_learner = admin(0, "POST", "promote", json{{"ids", {7}}});
  EXPECT_EQ(not_learner.status, 400);
  EXPECT_EQ(not_learner.body_json()["code"], "not_a_learner");
  // A learner that was never started has not been heard from: it cannot be promoted.
  ASSERT_EQ(admin_ok(0, "POST", "learners", learner(3)).status, 200);
  auto behind = admin(0, "POST", "promote", json{{"ids", {4}}});
  EXPECT_EQ(behind.status, 409);
  EXPECT_EQ(behind.body_json()["code"], "learner_behind");
  auto timeout = admin(0, "GET", "membership?timeoutMs=0");
  EXPECT_EQ(timeout.status, 400);
  // The read shows the cluster and each member's progress.
  json m = admin(1, "GET", "membership").body_json();
  EXPECT_EQ(m["ok"], true);
  EXPECT_EQ(m["clusterId"], kClusterId);
  EXPECT_EQ(m["members"].size(), 4u);
}

TEST_F(MembershipTest, ADeadNodeIsReplacedByANewOne) {
  int l = leader();
  int dead = (l + 1) % 3;
  int entry = (l + 2) % 3;
  start_load(entry);
  std::this_thread::sleep_for(500ms);
  nodes_[dead]->kill9();
  std::filesystem::remove_all(data(dead));  // its disk is gone for good

  begin_step();
  auto removed = admin_ok(entry, "DELETE", "members/" + std::to_string(dead + 1));
  ASSERT_EQ(removed.status, 200) << removed.body << log_tails();
  EXPECT_LT(end_step("remove the dead node"), kStepPauseMaxMs);

  begin_step();
  make(3, true, {});
  start(3);
  ASSERT_EQ(admin_ok(entry, "POST", "learners", learner(3)).status, 200);
  ASSERT_TRUE(caught_up(entry, 3)) << log_tails();
  auto promoted = admin_ok(entry, "POST", "promote", json{{"ids", {4}}});
  ASSERT_EQ(promoted.status, 200) << promoted.body << log_tails();
  std::set<int> voters = {l + 1, entry + 1, 4};
  EXPECT_EQ(members(entry).first, voters);
  EXPECT_LT(end_step("add and promote the replacement"), kStepPauseMaxMs);

  stop_load();
  expect_every_answered_push_once(3);  // read through the new node
}

TEST_F(MembershipTest, RollingRestartOfEveryNodeUnderLoad) {
  int entry = leader();
  start_load(entry);
  std::this_thread::sleep_for(500ms);
  for (int i = 0; i < 3; ++i) {
    begin_step();
    EXPECT_EQ(nodes_[i]->stop(), 0);
    start(i);
    EXPECT_TRUE(eventually(10s, [&] { return health(i).value("status", "") == "healthy"; }));
    EXPECT_LT(end_step("restart node " + std::to_string(i + 1)), kStepPauseMaxMs);
  }
  stop_load();
  expect_every_answered_push_once(entry);
}

TEST_F(MembershipTest, ForceRecoverFromOneSurvivorThenGrowAgain) {
  int l = leader();
  start_load(l);
  std::this_thread::sleep_for(800ms);
  stop_load();
  // The operator recovers from the most advanced survivor (the highest commit in /health):
  // here the leader, which held every answered push.
  int survivor = l;
  for (int i = 0; i < 3; ++i) nodes_[i]->kill9();  // two of them are lost for good
  for (int i = 0; i < 3; ++i)
    if (i != survivor) std::filesystem::remove_all(data(i));

  auto t0 = Clock::now();
  make(survivor, false, {{"QUEEN_RAFT_FORCE_RECOVER", std::to_string(survivor + 1)}});
  start(survivor);
  ASSERT_EQ(wait_leader(10s), survivor) << log_tails();
  std::printf(
      "membership step: force recover from node %d: serving after %lld ms\n", survivor + 1,
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count()));
  EXPECT_EQ(members(survivor).first, std::set<int>{survivor + 1});
  expect_every_answered_push_once(survivor);

  // It stays a one-voter cluster after a restart without the variable.
  EXPECT_EQ(nodes_[survivor]->stop(), 0);
  make(survivor, false, {});
  start(survivor);
  ASSERT_EQ(wait_leader(10s), survivor) << log_tails();
  EXPECT_EQ(members(survivor).first, std::set<int>{survivor + 1});

  // The operator adds a wiped node back.
  int back = (survivor + 1) % 3;
  make(back, true, {});
  start(back);
  ASSERT_EQ(admin_ok(survivor, "POST", "learners", learner(back)).status, 200);
  ASSERT_TRUE(caught_up(survivor, back)) << log_tails();
  auto promoted = admin_ok(survivor, "POST", "promote", json{{"ids", {back + 1}}});
  ASSERT_EQ(promoted.status, 200) << promoted.body << log_tails();
  EXPECT_EQ(members(survivor).first, (std::set<int>{survivor + 1, back + 1}));
}

// The identity fence: a follower restarted on an empty disk under its old id is fenced (not
// counted, so the leader and it are no majority), and counts again once removed and added back.
TEST_F(MembershipTest, AWipedNodeIsFencedUntilRemovedAndAddedBack) {
  int l = leader();
  ASSERT_TRUE(eventually(10s, [&] { return all_pinned(l); })) << membership(l).dump();
  start_load(l);
  int wiped = (l + 1) % 3, other = (l + 2) % 3;
  begin_step();
  EXPECT_EQ(nodes_[wiped]->stop(), 0);
  std::filesystem::remove_all(data(wiped));
  start(wiped);
  ASSERT_TRUE(eventually(10s, [&] { return member_fenced(l, wiped); })) << membership(l).dump();
  EXPECT_LT(end_step("wipe a follower (fenced)"), kStepPauseMaxMs);

  // Not counted: with the other follower down, no push is answered.
  EXPECT_EQ(nodes_[other]->stop(), 0);
  HttpClient c(http_[l]);
  auto r =
      c.post("/api/v1/push",
             json{{"items", {{{"queue", "fence"}, {"transactionId", "x"}, {"payload", 1}}}}}, 3000);
  EXPECT_NE(r.status, 201) << r.body;
  start(other);
  int now = wait_leader(15s);
  ASSERT_GE(now, 0) << log_tails();
  ASSERT_NE(now, wiped);

  // The runbook: remove it, add it back as a learner, promote it once caught up.
  begin_step();
  ASSERT_EQ(admin_ok(now, "DELETE", "members/" + std::to_string(wiped + 1)).status, 200)
      << log_tails();
  ASSERT_EQ(admin_ok(now, "POST", "learners", learner(wiped)).status, 200) << log_tails();
  ASSERT_TRUE(caught_up(now, wiped)) << log_tails();
  ASSERT_TRUE(eventually(10s, [&] { return all_pinned(now); })) << membership(now).dump();
  auto promoted = admin_ok(now, "POST", "promote", json{{"ids", {wiped + 1}}});
  ASSERT_EQ(promoted.status, 200) << promoted.body << log_tails();
  EXPECT_EQ(members(now).first, (std::set<int>{1, 2, 3}));
  EXPECT_LT(end_step("remove and add back the wiped node"), kStepPauseMaxMs);
  stop_load();
  expect_every_answered_push_once(now);
}

// Every node starts as an older build would (QUEEN_RAFT_FORMAT_MAX=1: it reports format 1
// and writes nothing newer) and is upgraded in turn under load: the cluster stays at version 1,
// pinning nothing, while any node is still old, and rises to the newest format (disks pinned,
// format-3 checkpoints) once the last one is upgraded. An older build before the format report
// cannot join a rolling upgrade at all (the README: a full stop and start), so this is the
// oldest build that can.
class UpgradeTest : public MembershipTest {
 protected:
  std::map<std::string, std::string> first_env(int) override {
    return {{"QUEEN_RAFT_FORMAT_MAX", "1"}};
  }

  // Through node i, for `span` (a few version checks): the version stays 1, nothing pinned.
  void expect_version_held(int i, std::chrono::milliseconds span) {
    auto until = Clock::now() + span;
    int seen = 0;
    while (Clock::now() < until) {
      json m = membership(i);
      if (!m.is_null()) {
        ++seen;
        ASSERT_EQ(m["clusterVersion"], 1) << m.dump();
        for (const auto& x : m["members"]) ASSERT_EQ(x["disk"], "") << m.dump();
      }
      std::this_thread::sleep_for(100ms);  // a sampling interval, not a wait for a condition
    }
    EXPECT_GT(seen, 0) << "no membership answer in " << span.count() << " ms";
  }
};

TEST_F(UpgradeTest, ARollingUpgradeRaisesTheClusterVersionOnlyOnceEveryNodeReadsIt) {
  int entry = leader();
  start_load(entry);
  expect_version_held(entry, 1500ms);
  for (int i = 0; i < 3; ++i) {
    begin_step();
    EXPECT_EQ(nodes_[i]->stop(), 0);
    make(i, false, {});  // the new build: reads and reports every format
    start(i);
    EXPECT_TRUE(eventually(10s, [&] { return health(i).value("status", "") == "healthy"; }));
    if (i < 2) expect_version_held(i, 2500ms);
    EXPECT_LT(end_step("upgrade node " + std::to_string(i + 1)), kStepPauseMaxMs);
  }
  ASSERT_TRUE(eventually(15s, [&] { return all_pinned(entry); })) << membership(entry).dump();
  stop_load();
  expect_every_answered_push_once(entry);
}

// With client offload off, a follower forwards the whole HTTP request to the leader's HTTP
// address: one added after the follower started is reached too (the member list in use, not
// the first boot's peers).
class OffloadOffTest : public MembershipTest {
 protected:
  std::map<std::string, std::string> first_env(int) override { return offload_off(); }
  static std::map<std::string, std::string> offload_off() {
    return {{"QUEEN_RAFT_CLIENT_OFFLOAD", "off"}};
  }
};

TEST_F(OffloadOffTest, AFollowerForwardsToALeaderAddedAfterItStarted) {
  int l = leader();
  make(3, true, offload_off());
  start(3);
  ASSERT_EQ(admin_ok(l, "POST", "learners", learner(3)).status, 200) << log_tails();
  ASSERT_TRUE(caught_up(l, 3)) << log_tails();
  auto promoted = admin_ok(l, "POST", "promote", json{{"ids", {4}}});
  ASSERT_EQ(promoted.status, 200) << promoted.body << log_tails();
  // Node 4 becomes the only voter (one change at a time; asked again when a demoted leader
  // hands over midway): the leader it must be.
  ASSERT_TRUE(eventually(30s, [&] {
    int at = leader();
    if (at >= 0) admin(at, "PUT", "voters", json{{"voters", {4}}});
    return members(3).first == std::set<int>{4};
  })) << log_tails();
  int now = wait_leader(15s);
  ASSERT_EQ(now, 3) << log_tails();
  for (int f = 0; f < 3; ++f) {
    HttpClient c(http_[f]);
    auto r = c.post(
        "/api/v1/push",
        json{{"items",
              {{{"queue", "fwd"}, {"transactionId", "f" + std::to_string(f)}, {"payload", f}}}}},
        5000);
    EXPECT_EQ(r.status, 201) << "through node " << f + 1 << ": " << r.body;
  }
}

}  // namespace
}  // namespace queen::test
