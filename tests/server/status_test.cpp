// The status and analytics routes the console reads, against the real `queen` binary: the
// queue list and a queue's partitions paged on the server, the throughput history following
// pushes, pops and acks, the overview's counts and disk gate, refusals of bad ranges and
// pages, and the console page itself. The bucket arithmetic is checked on its own below.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "server/status_history.h"
#include "tests/server/api_helpers.h"
#include "tests/server/harness.h"

namespace queen::test {
namespace {

using std::chrono::seconds;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class StatusTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    set_disk_pct(10);
    server_ = new ServerProcess(dir_->path() + "/data", dir_->path() + "/server.log",
                                {{"QUEEN_STATUS_SAMPLE_MS", "100"},
                                 {"QUEEN_TEST_DISK_PCT_FILE", disk_pct_file()},
                                 {"QUEEN_RAFT_DISK_CHECK_MS", "20"}});
    std::string error;
    if (!server_->start(&error)) FAIL() << error;
  }
  static void TearDownTestSuite() {
    delete server_;
    delete dir_;
  }
  void SetUp() override { client_ = std::make_unique<HttpClient>(server_->port()); }

  // What the node's disk gate reads as the disk's use (QUEEN_TEST_DISK_PCT_FILE).
  static std::string disk_pct_file() { return dir_->path() + "/disk_pct"; }
  static void set_disk_pct(int pct) { std::ofstream(disk_pct_file()) << pct << "\n"; }

  static std::string name(const std::string& suffix = "") {
    return ::testing::UnitTest::GetInstance()->current_test_info()->name() + suffix;
  }
  json get_json(const std::string& target, int want = 200) {
    HttpResult r = client_->get(target);
    EXPECT_EQ(r.status, want) << target << " " << r.body;
    return r.status == want && !r.body.empty() ? r.body_json() : json();
  }
  // The sum of `field` over the throughput points since `from_ms`.
  int64_t throughput_sum(int64_t from_ms, const char* field) {
    json s = get_json("/api/v1/status?bucketSeconds=1&from=" + std::to_string(from_ms));
    int64_t sum = 0;
    for (const json& p : s["throughput"]) sum += p[field].get<int64_t>();
    return sum;
  }

  static inline TempDir* dir_ = nullptr;
  static inline ServerProcess* server_ = nullptr;
  std::unique_ptr<HttpClient> client_;
};

TEST_F(StatusTest, TheQueueListIsPagedAndFilteredOnTheServer) {
  for (const char* q : {"-c", "-a", "-b", "-other"})
    ASSERT_EQ(push(*client_, {{name(q), "", "", 1}}).status, 201);
  std::string target = "/api/v1/status/queues?search=" + name("-") + "&limit=2";
  json first = get_json(target);
  json second = get_json(target + "&offset=2");
  EXPECT_EQ(first["pagination"]["total"], 4) << first.dump();
  EXPECT_EQ(first["pagination"]["limit"], 2);
  ASSERT_EQ(first["queues"].size(), 2u);
  ASSERT_EQ(second["queues"].size(), 2u);
  // By name, and the two pages together hold each queue once.
  std::vector<std::string> names;
  for (const json* page : {&first, &second})
    for (const json& q : (*page)["queues"]) names.push_back(q["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{name("-a"), name("-b"), name("-c"), name("-other")}));
  EXPECT_EQ(first["queues"][0]["messages"]["total"], 1);
  json filtered = get_json("/api/v1/status/queues?search=" + name("-oth"));
  ASSERT_EQ(filtered["queues"].size(), 1u);
  EXPECT_EQ(filtered["pagination"]["total"], 1);
}

TEST_F(StatusTest, AQueuesPartitionsAreAnsweredOnePageAtATime) {
  const int kPartitions = 250;
  std::vector<PushSpec> items;
  for (int i = 0; i < kPartitions; ++i) items.push_back({name(), "p" + std::to_string(i), "", i});
  items.push_back({name(), "p0", "", 1000});
  ASSERT_EQ(push(*client_, items).status, 201);
  std::set<std::string> seen;
  int64_t total_messages = 0;
  for (int offset = 0; offset < kPartitions; offset += 100) {
    json page = get_json("/api/v1/status/queues/" + name() + "?offset=" + std::to_string(offset));
    EXPECT_EQ(page["pagination"]["total"], kPartitions);
    EXPECT_EQ(page["partitions"].size(), std::min<size_t>(100, kPartitions - offset));
    for (const json& p : page["partitions"]) {
      EXPECT_TRUE(seen.insert(p["name"].get<std::string>()).second) << p.dump();
      total_messages += p["messages"]["total"].get<int64_t>();
    }
    EXPECT_EQ(page["totals"]["total"], kPartitions + 1) << "totals cover every partition";
    EXPECT_EQ(page["queue"]["name"], name());
    EXPECT_TRUE(page["queue"]["config"].contains("leaseTime"));
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kPartitions));
  EXPECT_EQ(total_messages, kPartitions + 1);
  json one = get_json("/api/v1/status/queues/" + name() + "?search=p249");
  ASSERT_EQ(one["partitions"].size(), 1u);
  EXPECT_EQ(one["partitions"][0]["name"], "p249");
  get_json("/api/v1/status/queues/" + name("-missing"), 404);
}

TEST_F(StatusTest, ThroughputFollowsPushesPopsAndAcks) {
  int64_t from = now_ms() - 1000;
  std::vector<PushSpec> items;
  for (int i = 0; i < 7; ++i) items.push_back({name(), "", "", i});
  ASSERT_EQ(push(*client_, items).status, 201);
  HttpResult popped = pop(*client_, {.queue = name(), .batch = 3});
  ASSERT_EQ(popped.status, 200) << popped.body;
  json messages = popped.body_json()["messages"];
  ASSERT_EQ(messages.size(), 3u);
  for (const json& m : messages) ASSERT_EQ(ack(*client_, m, "completed").status, 200);
  // Other tests push too (in order, on this one node): at least ours, and it settles.
  EXPECT_TRUE(eventually(seconds(10), [&] {
    return throughput_sum(from, "ingested") >= 7 && throughput_sum(from, "processed") >= 3 &&
           throughput_sum(from, "popMessages") >= 3;
  })) << get_json("/api/v1/status?bucketSeconds=1&from=" + std::to_string(from)).dump();
  json s = get_json("/api/v1/status?bucketSeconds=1&from=" + std::to_string(from));
  EXPECT_EQ(s["raft"]["role"], "leader");
  EXPECT_GT(s["raft"]["commit"].get<int64_t>(), 0);
  EXPECT_EQ(s["bucketSeconds"], 1);
  EXPECT_EQ(s["pointCount"], s["throughput"].size());
  json lag = get_json("/api/v1/analytics/queue-lag?bucketSeconds=1&queue=" + name() +
                      "&from=" + std::to_string(from));
  int64_t pops = 0;
  for (const json& row : lag) {
    EXPECT_EQ(row["queueName"], name());
    pops += row["popCount"].get<int64_t>();
  }
  EXPECT_EQ(pops, 3) << lag.dump();
  json ops = get_json("/api/v1/analytics/queue-ops?bucketSeconds=1&queue=" + name() +
                      "&from=" + std::to_string(from));
  int64_t pushed = 0;
  for (const json& row : ops["series"]) pushed += row["pushMessages"].get<int64_t>();
  EXPECT_EQ(pushed, 7) << ops.dump();
}

TEST_F(StatusTest, TheOverviewCountsWhatTheQueueListHolds) {
  ASSERT_EQ(push(*client_, {{name(), "x", "", 1}, {name(), "y", "", 2}}).status, 201);
  ASSERT_EQ(pop(*client_, {.queue = name(), .partition = "x"}).status, 200);
  json overview = get_json("/api/v1/resources/overview");
  json list = get_json("/api/v1/status/queues?limit=1000");
  int64_t partitions = 0, total = 0;
  for (const json& q : list["queues"]) {
    partitions += q["partitions"].get<int64_t>();
    total += q["messages"]["total"].get<int64_t>();
  }
  EXPECT_EQ(overview["queues"], list["pagination"]["total"]);
  EXPECT_EQ(overview["partitions"], partitions);
  EXPECT_EQ(overview["messages"]["total"], total);
  EXPECT_GE(overview["messages"]["processing"].get<int64_t>(), 1);
  EXPECT_TRUE(overview["throughput"].contains("ingestedPerSecond"));
  json browse = get_json("/api/v1/status/queues/" + name() + "/messages");
  ASSERT_EQ(browse.size(), 2u) << browse.dump();
  std::multiset<std::string> statuses;
  for (const json& m : browse) statuses.insert(m["status"].get<std::string>());
  EXPECT_EQ(statuses, (std::multiset<std::string>{"pending", "processing"}));
}

TEST_F(StatusTest, TheDiskGateShowsInTheOverviewAndTheStatus) {
  auto disk_reads = [&](int pct, bool full) {
    return eventually(seconds(10), [&] {
      json o = get_json("/api/v1/resources/overview")["disk"];
      json s = get_json("/api/v1/status")["disk"];
      return o["usedPct"] == pct && o["storageFull"] == full && s == o;
    });
  };
  EXPECT_TRUE(disk_reads(10, false));
  set_disk_pct(95);  // past QUEEN_RAFT_DISK_HIGH_PCT (85): the gate closes
  struct Reopen {
    ~Reopen() { set_disk_pct(10); }
  } reopen;
  EXPECT_TRUE(disk_reads(95, true));
  EXPECT_EQ(push(*client_, {{name(), "", "", 1}}).status, 507);
  set_disk_pct(10);
  EXPECT_TRUE(disk_reads(10, false));
  EXPECT_EQ(push(*client_, {{name(), "", "", 1}}).status, 201);
}

TEST_F(StatusTest, BadPagesAndRangesAreRefusedNamingTheField) {
  struct Case {
    std::string target, names;
  };
  for (const Case& c : std::vector<Case>{{"/api/v1/status/queues?limit=ten", "limit"},
                                         {"/api/v1/status/queues/q?offset=-1", "offset"},
                                         {"/api/v1/status?from=yesterday", "from"},
                                         {"/api/v1/status?from=2000&to=1000", "from"},
                                         {"/api/v1/status?bucketSeconds=0", "bucketSeconds"},
                                         {"/api/v1/status/analytics?interval=week", "interval"},
                                         {"/api/v1/status?from=0&bucketSeconds=1", "bucket"}}) {
    HttpResult r = client_->get(c.target);
    EXPECT_EQ(r.status, 400) << c.target << " " << r.body;
    EXPECT_NE(r.body.find(c.names), std::string::npos) << c.target << " " << r.body;
  }
}

TEST_F(StatusTest, TheConsoleIsOneSelfContainedPage) {
  HttpResult r = client_->get("/");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type"), "text/html; charset=utf-8");
  EXPECT_FALSE(r.header("etag").empty());
  EXPECT_EQ(r.body.find("/*@console"), std::string::npos) << "a marker was not replaced";
  EXPECT_NE(r.body.find("<script>"), std::string::npos);
  EXPECT_EQ(r.body.find("<script src"), std::string::npos) << "no asset is fetched";
  EXPECT_EQ(r.body.find("http://"), std::string::npos) << "no network address";
  EXPECT_EQ(r.body.find("https://"), std::string::npos) << "no network address";
}

// ---------- the bucket arithmetic ----------

server::StatusSample sample(int64_t at_ms, uint64_t pushed) {
  server::StatusSample s;
  s.at_ms = at_ms;
  s.pushed = pushed;
  return s;
}

TEST(StatusBuckets, CountersGrowBetweenSamplesAndRatesUseTheTimeTheySpan) {
  std::vector<server::StatusSample> s = {sample(900, 10), sample(1500, 20), sample(1900, 30),
                                         sample(2400, 31)};
  auto b = server::bucketize(s, 1000, 4000, 1000);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].pushed, 20u);  // 10 -> 20 -> 30
  EXPECT_EQ(b[0].samples, 2u);
  EXPECT_EQ(b[0].span_ms, 1000);
  EXPECT_DOUBLE_EQ(b[0].per_second(b[0].pushed), 20.0);
  EXPECT_EQ(b[1].pushed, 1u);
  EXPECT_EQ(b[2].samples, 0u);  // an empty bucket is still there
  EXPECT_DOUBLE_EQ(b[2].per_second(b[2].pushed), 0.0);
}

TEST(StatusBuckets, ARestartedProcessCountsFromZero) {
  std::vector<server::StatusSample> s = {sample(0, 500), sample(500, 4)};
  auto b = server::bucketize(s, 0, 1000, 1000);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].pushed, 4u);
}

TEST(StatusBuckets, TheDefaultBucketFollowsTheReference) {
  EXPECT_EQ(server::default_bucket_ms(3'600'000), 60'000);
  EXPECT_EQ(server::default_bucket_ms(6 * 3'600'000), 300'000);
  EXPECT_EQ(server::default_bucket_ms(24 * 3'600'000), 900'000);
  EXPECT_EQ(server::default_bucket_ms(7 * 24 * 3'600'000LL), 3'600'000);
  EXPECT_EQ(server::default_bucket_ms(8 * 24 * 3'600'000LL), 21'600'000);
}

TEST(StatusBuckets, TheRingKeepsTheLastSamples) {
  server::StatusHistory h;
  for (size_t i = 0; i < server::kSamplesMax + 10; ++i) h.add(sample(static_cast<int64_t>(i), i));
  auto all = h.range(0, 1'000'000);
  ASSERT_EQ(all.size(), server::kSamplesMax);
  EXPECT_EQ(all.front().at_ms, 10);
  // A range brings the sample before its first, so its first bucket has a growth.
  auto tail = h.range(100, 101);
  ASSERT_EQ(tail.size(), 3u);
  EXPECT_EQ(tail.front().at_ms, 99);
}

}  // namespace
}  // namespace queen::test
