// Crash test against the real binary: pushers and ackers run concurrently, the node is
// killed with SIGKILL at a random moment, restarted on the same data folder, and checked:
// - every push answered 201 is present exactly once, at its offset, with its message id and
//   payload, and offsets per partition are gapless from 0;
// - no answered ack is undone: a message whose ack was answered success for group G is never
//   delivered to G again.
// Several rounds run on the same data folder, so recovery also runs over earlier recoveries.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "tests/server/api_helpers.h"
#include "tests/server/harness.h"

namespace queen::test {
namespace {

constexpr const char* kQueue = "crash";
constexpr const char* kGroup = "G";
constexpr int kPartitions = 4;
constexpr int kPushers = 3;
constexpr int kAckers = 2;
constexpr int kRounds = 4;
constexpr int kPushBatchMax = 20;

struct Key {
  std::string partition;
  int64_t offset = 0;
  auto operator<=>(const Key&) const = default;
};

struct AnsweredPush {
  std::string transaction_id;
  std::string message_id;
};

// What the clients were told, shared by the load threads.
struct Ledger {
  std::mutex mutex;
  std::map<Key, AnsweredPush> pushes;  // answered 201, by where they landed
  std::set<Key> acked;                 // answered success for kGroup
  std::set<Key> ack_sent;              // sent for kGroup, answered or not
  std::map<std::string, Key> key_of_txn;
  std::string problem;  // first inconsistency seen while running

  void note(const std::string& what) {
    std::lock_guard lock(mutex);
    if (problem.empty()) problem = what;
  }
};

void pusher(uint16_t port, int round, int id, uint64_t seed, Ledger* ledger) {
  HttpClient c(port);
  std::mt19937_64 rng(seed);
  for (int seq = 0;; ++seq) {
    int n = 1 + static_cast<int>(rng() % kPushBatchMax);
    std::vector<PushSpec> items;
    for (int i = 0; i < n; ++i) {
      std::string txn = "r" + std::to_string(round) + "-w" + std::to_string(id) + "-" +
                        std::to_string(seq) + "-" + std::to_string(i);
      items.push_back({kQueue, "p" + std::to_string(rng() % kPartitions), txn, {{"txn", txn}}});
    }
    HttpResult r = push(c, items);
    if (r.status == 0) return;  // the node is gone
    if (r.status != 201) continue;
    json answer = r.body_json();
    std::lock_guard lock(ledger->mutex);
    for (const json& a : answer) {
      Key key{a["partition"], a["offset"].get<int64_t>()};
      std::string txn = a["transaction_id"];
      if (a["status"] != "queued") ledger->problem = "fresh transactionId not queued: " + a.dump();
      auto [it, fresh] = ledger->pushes.emplace(key, AnsweredPush{txn, a["message_id"]});
      if (!fresh) {
        ledger->problem = "two answered pushes at " + key.partition + "@" +
                          std::to_string(key.offset) + ": " + it->second.transaction_id + " and " +
                          txn;
      }
      ledger->key_of_txn[txn] = key;
    }
  }
}

void acker(uint16_t port, Ledger* ledger) {
  HttpClient c(port);
  for (;;) {
    HttpResult r = pop(c, {.queue = kQueue,
                           .group = kGroup,
                           .batch = 50,
                           .wait = true,
                           .timeout_ms = 200,
                           .subscription_mode = "all"});
    if (r.status == 0) return;
    if (r.status != 200) continue;
    json messages = r.body_json()["messages"];
    json acks = json::array();
    {
      std::lock_guard lock(ledger->mutex);
      for (const json& m : messages) {
        acks.push_back(ack_item(m, "completed"));
        ledger->ack_sent.insert(Key{m["partition"], m["offset"].get<int64_t>()});
      }
    }
    HttpResult a =
        c.post("/api/v1/ack/batch", json{{"acknowledgments", acks}, {"consumerGroup", kGroup}});
    if (a.status == 0) return;
    if (a.status != 200) continue;
    json results = a.body_json();
    std::lock_guard lock(ledger->mutex);
    for (size_t i = 0; i < results.size() && i < messages.size(); ++i) {
      if (results[i]["success"] != true) continue;
      ledger->acked.insert(Key{messages[i]["partition"], messages[i]["offset"].get<int64_t>()});
    }
  }
}

// Every answered push is stored once at its offset; offsets are gapless per partition.
void check_pushes(const std::vector<json>& audit, const Ledger& ledger) {
  std::map<std::string, std::set<int64_t>> offsets;
  std::map<Key, json> stored;
  std::set<std::string> txns;
  for (const json& m : audit) {
    Key key{m["partition"], m["offset"].get<int64_t>()};
    EXPECT_TRUE(stored.emplace(key, m).second) << "delivered twice to a fresh group: " << m;
    EXPECT_TRUE(txns.insert(m["transactionId"].get<std::string>()).second)
        << "transactionId stored twice: " << m;
    EXPECT_EQ(m["data"]["txn"], m["transactionId"]) << "payload does not match: " << m;
    offsets[key.partition].insert(key.offset);
  }
  for (const auto& [partition, set] : offsets) {
    EXPECT_EQ(*set.rbegin() + 1, static_cast<int64_t>(set.size()))
        << "offsets of " << partition << " are not gapless from 0";
  }
  for (const auto& [key, push] : ledger.pushes) {
    auto it = stored.find(key);
    ASSERT_NE(it, stored.end()) << "answered push lost: " << push.transaction_id << " at "
                                << key.partition << "@" << key.offset;
    EXPECT_EQ(it->second["transactionId"], push.transaction_id)
        << key.partition << "@" << key.offset;
    EXPECT_EQ(it->second["id"], push.message_id) << key.partition << "@" << key.offset;
  }
}

// Drains kGroup after the restart: what it receives must not include an answered ack.
// Leases taken before the crash may hold partitions until they expire, so this polls, with
// a deadline, until every stored message is acked, received, or had an ack sent whose
// answer was lost in the crash (that ack may or may not have applied).
void check_acks(HttpClient& c, const std::vector<json>& audit, Ledger* ledger) {
  std::set<Key> all;
  for (const json& m : audit) all.insert(Key{m["partition"], m["offset"].get<int64_t>()});
  std::set<Key> settled = ledger->acked;
  settled.insert(ledger->ack_sent.begin(), ledger->ack_sent.end());
  std::set<Key> received;
  auto done = [&] {
    return std::all_of(all.begin(), all.end(), [&](const Key& k) { return settled.count(k); });
  };
  bool drained = eventually(std::chrono::seconds(60), [&] {
    HttpResult r = pop(c, {.queue = kQueue,
                           .group = kGroup,
                           .batch = 1000,
                           .wait = true,
                           .timeout_ms = 300,
                           .subscription_mode = "all"});
    if (r.status == 200) {
      json messages = r.body_json()["messages"];
      json acks = json::array();
      for (const json& m : messages) {
        Key key{m["partition"], m["offset"].get<int64_t>()};
        EXPECT_EQ(ledger->acked.count(key), 0u) << "acked before the crash, delivered again: " << m;
        settled.insert(key);
        received.insert(key);
        acks.push_back(ack_item(m, "completed"));
      }
      HttpResult a =
          c.post("/api/v1/ack/batch", json{{"acknowledgments", acks}, {"consumerGroup", kGroup}});
      EXPECT_EQ(a.status, 200) << a.body;
      json results = a.body_json();
      for (size_t i = 0; i < results.size(); ++i) {
        EXPECT_EQ(results[i]["success"], true) << results[i];
      }
    }
    return done();
  });
  EXPECT_TRUE(drained) << "group " << kGroup << " did not reach the end of the queue";
  ledger->acked.insert(received.begin(), received.end());
}

TEST(CrashTest, AnsweredPushesAndAcksSurviveKillNine) {
  TempDir dir;
  std::string data = dir.path() + "/data";
  uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  Ledger ledger;
  ServerProcess server(data, dir.path() + "/server.log");
  std::string error;
  ASSERT_TRUE(server.start(&error)) << error;
  {
    HttpClient c(server.port());
    ASSERT_EQ(configure(c, kQueue, {{"leaseTime", 2}}).status, 200);
  }

  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::vector<std::thread> load;
    for (int i = 0; i < kPushers; ++i) {
      load.emplace_back(pusher, server.port(), round, i, rng(), &ledger);
    }
    for (int i = 0; i < kAckers; ++i) load.emplace_back(acker, server.port(), &ledger);
    // The kill lands at a random moment of the load.
    std::this_thread::sleep_for(std::chrono::milliseconds(200 + rng() % 1300));
    server.kill9();
    for (auto& t : load) t.join();
    ASSERT_TRUE(ledger.problem.empty()) << ledger.problem;
    std::printf("round %d: %zu pushes and %zu acks answered so far\n", round, ledger.pushes.size(),
                ledger.acked.size());
    ASSERT_FALSE(ledger.pushes.empty()) << "no push was answered before the kill";

    ASSERT_TRUE(server.start(&error)) << error;
    HttpClient c(server.port());
    std::vector<json> audit;
    ASSERT_TRUE(drain(c, kQueue, "audit-" + std::to_string(round), &audit, &error)) << error;
    check_pushes(audit, ledger);
    check_acks(c, audit, &ledger);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// A graceful stop (SIGTERM) writes a store checkpoint holding everything applied: the next
// start replays no entry from the log, and every message is there. The periodic checkpoint
// is put off for the test, so only the stop's can have written it.
TEST(GracefulStop, TheNextStartReplaysNothing) {
  TempDir dir;
  ServerProcess server(dir.path() + "/data", dir.path() + "/server.log",
                       {{"QUEEN_RAFT_DURABLE_EVERY_MS", "3600000"}});
  std::string error;
  ASSERT_TRUE(server.start(&error)) << error;
  {
    HttpClient c(server.port());
    for (int i = 0; i < 30; ++i) {
      std::string n = std::to_string(i);
      ASSERT_EQ(push(c, {{"graceful", "p" + std::to_string(i % 5), "t" + n, {{"n", i}}}}).status,
                201);
    }
  }
  ASSERT_EQ(server.stop(), 0) << server.log_tail();
  ASSERT_TRUE(server.start(&error)) << error;
  HttpClient c(server.port());
  HttpResult metrics = c.get("/metrics/prometheus");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("\nqueen_raft_recovered_entries 0\n"), std::string::npos)
      << metrics.body.substr(0, 2000);
  std::set<int> seen;
  for (int p = 0; p < 5; ++p) {
    HttpResult r = pop(c, {.queue = "graceful", .partition = "p" + std::to_string(p),
                           .group = "g", .batch = 100, .subscription_mode = "all"});
    ASSERT_EQ(r.status, 200) << r.body;
    json body = r.body_json();
    for (const json& m : body["messages"]) seen.insert(m["data"]["n"].get<int>());
  }
  EXPECT_EQ(seen.size(), 30u);
}

// Pushes transactionIds t0-t299 into rings/p and one more push, which builds the partition's
// dedup ring; `t7_id` gets t7's message id.
void push_and_build_ring(HttpClient& c, std::string* t7_id) {
  std::vector<PushSpec> items;
  for (int i = 0; i < 300; ++i) items.push_back({"rings", "p", "t" + std::to_string(i), i});
  HttpResult r = push(c, items);
  ASSERT_EQ(r.status, 201) << r.body;
  *t7_id = r.body_json()[7]["message_id"].get<std::string>();
  ASSERT_EQ(push(c, {{"rings", "p", "warm", 0}}).status, 201);  // the ring is built here
}

// A graceful stop also writes the partitions' dedup rings: the next start has them before its
// first push (no partition warms its ring from its message records), and a retried
// transactionId is still answered as the duplicate of its original.
TEST(GracefulStop, TheNextStartHasTheDedupRingsAtOnce) {
  TempDir dir;
  ServerProcess server(dir.path() + "/data", dir.path() + "/server.log", {});
  std::string error;
  ASSERT_TRUE(server.start(&error)) << error;
  std::string first_id;
  {
    HttpClient c(server.port());
    ASSERT_NO_FATAL_FAILURE(push_and_build_ring(c, &first_id));
  }
  ASSERT_EQ(server.stop(), 0) << server.log_tail();
  ASSERT_TRUE(server.start(&error)) << error;
  HttpClient c(server.port());
  EXPECT_GT(metric(c, "queen_dedup_ring_bytes"), 0) << server.log_tail();
  HttpResult again = push(c, {{"rings", "p", "t7", 7}, {"rings", "p", "fresh", 0}});
  ASSERT_EQ(again.status, 201) << again.body;
  json results = again.body_json();
  EXPECT_EQ(results[0]["status"], "duplicate");
  EXPECT_EQ(results[0]["message_id"], first_id);
  EXPECT_EQ(results[1]["status"], "queued");
  double reads = metric(c, "queen_row_hash_reads_total");
  EXPECT_GE(reads, 0);
  EXPECT_LE(reads, 1) << "only the original's row is read, to check the candidate the ring named";
}

// A store checkpoint writes the dedup rings beside it once the log has grown enough since the
// last rings file: a start after a kill -9 has them before its first push, catches the ring
// up from the rows written after the file, and still answers retries as duplicates.
TEST(Crash, ARestartAfterAKill9HasTheRingsOfACheckpoint) {
  TempDir dir;
  const std::string data = dir.path() + "/data";
  // Rings files for rings of any size: these are a few KiB.
  ServerProcess server(
      data, dir.path() + "/server.log",
      {{"QUEEN_RAFT_DURABLE_EVERY_MS", "50"}, {"QUEEN_RAFT_RINGS_FILE_MIN_MB", "0"}});
  std::string error;
  ASSERT_TRUE(server.start(&error)) << error;
  auto rings_file_exists = [&] {
    std::error_code ec;
    for (const auto& f : std::filesystem::directory_iterator(data + "/store", ec))
      if (f.path().filename().string().rfind("rings.", 0) == 0) return true;
    return false;
  };
  std::string first_id, late_id;
  {
    HttpClient c(server.port());
    ASSERT_NO_FATAL_FAILURE(push_and_build_ring(c, &first_id));
    int batch = 0;
    ASSERT_TRUE(eventually(std::chrono::seconds(30), [&] {
      std::vector<PushSpec> more;
      for (int i = 0; i < 100; ++i)
        more.push_back({"rings", "p", "b" + std::to_string(batch) + "-" + std::to_string(i), i});
      ++batch;
      return push(c, more).status == 201 && rings_file_exists();
    })) << server.log_tail();
    HttpResult late = push(c, {{"rings", "p", "late", 0}});
    ASSERT_EQ(late.status, 201) << late.body;
    late_id = late.body_json()[0]["message_id"].get<std::string>();
  }
  server.kill9();
  ASSERT_TRUE(server.start(&error)) << error;
  HttpClient c(server.port());
  EXPECT_GT(metric(c, "queen_dedup_ring_bytes"), 0) << server.log_tail();
  HttpResult again =
      push(c, {{"rings", "p", "t7", 7}, {"rings", "p", "late", 0}, {"rings", "p", "fresh", 0}});
  ASSERT_EQ(again.status, 201) << again.body;
  json results = again.body_json();
  EXPECT_EQ(results[0]["status"], "duplicate");
  EXPECT_EQ(results[0]["message_id"], first_id);
  EXPECT_EQ(results[1]["status"], "duplicate");
  EXPECT_EQ(results[1]["message_id"], late_id);
  EXPECT_EQ(results[2]["status"], "queued");
  EXPECT_EQ(metric(c, "queen_dedup_ring_catch_ups_total"), 1) << server.log_tail();
}

// A start whose checkpoint is large enough (QUEEN_START_ARENA_MIN_MB) faults its memory in
// on a helper thread while it decodes into it, through the broker's own allocator: every
// partition comes back, each retried transactionId is the duplicate of its original, and
// the partitions still take pushes and pops.
TEST(GracefulStop, AStartThatFaultsItsLoadInOnAHelperLosesNothing) {
  TempDir dir;
  ServerProcess server(dir.path() + "/data", dir.path() + "/server.log",
                       {{"QUEEN_START_ARENA_MIN_MB", "1"}, {"LOG_LEVEL", "info"}});
  std::string error;
  ASSERT_TRUE(server.start(&error)) << error;
  constexpr int kPartitions = 20000;
  auto batch = [](int first) {
    std::vector<PushSpec> items;
    for (int i = first; i < first + 100; ++i)
      items.push_back({"arena", "p" + std::to_string(i), "t" + std::to_string(i), i});
    return items;
  };
  std::vector<std::string> ids(kPartitions);
  {
    HttpClient c(server.port());
    for (int first = 0; first < kPartitions; first += 100) {
      HttpResult r = push(c, batch(first));
      ASSERT_EQ(r.status, 201) << r.body;
      json results = r.body_json();
      for (int i = 0; i < 100; ++i) ids[first + i] = results[i]["message_id"].get<std::string>();
    }
  }
  ASSERT_EQ(server.stop(), 0) << server.log_tail();
  ASSERT_TRUE(server.start(&error)) << error;
  // The broker built here links mimalloc; a sanitizer's broker (QUEEN_TEST_BINARY) keeps its
  // own allocator, which takes no arena, and only the rest of the test applies to it.
  if (std::getenv("QUEEN_TEST_BINARY") == nullptr) {
    EXPECT_NE(server.log_tail(100000).find("the helper faulted in"), std::string::npos)
        << server.log_tail();
  }
  HttpClient c(server.port());
  for (int first = 0; first < kPartitions; first += 100) {
    HttpResult r = push(c, batch(first));
    ASSERT_EQ(r.status, 201) << r.body;
    json results = r.body_json();
    for (int i = 0; i < 100; ++i) {
      ASSERT_EQ(results[i]["status"], "duplicate") << first + i;
      ASSERT_EQ(results[i]["message_id"], ids[first + i]) << first + i;
    }
  }
  for (int p : {0, 7777, kPartitions - 1}) {
    std::string name = "p" + std::to_string(p);
    ASSERT_EQ(push(c, {{"arena", name, "after" + name, -p}}).status, 201);
    HttpResult r = pop(c, {.queue = "arena",
                           .partition = name,
                           .group = "g",
                           .batch = 10,
                           .subscription_mode = "all"});
    ASSERT_EQ(r.status, 200) << r.body;
    json messages = r.body_json()["messages"];
    ASSERT_EQ(messages.size(), 2u) << r.body;
    EXPECT_EQ(messages[0]["data"], p);
    EXPECT_EQ(messages[1]["data"], -p);
  }
}

}  // namespace
}  // namespace queen::test
