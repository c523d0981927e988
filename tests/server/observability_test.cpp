// Integration tests of what operators read, against the real `queen` binary: the Prometheus
// exposition (well formed, and its series following pushes, pops, acks and dead letters),
// the namespace and task roll-ups of the queue list, message deletion, and on a 3-node
// cluster a follower's own metrics and a delete applied by every node.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "io/real/latency.h"
#include "server/observability.h"
#include "tests/server/api_helpers.h"
#include "tests/server/harness.h"
#include "tests/server/shared_node.h"

namespace queen::test {
namespace {

using std::chrono::seconds;

// One scrape, checked line by line against the text exposition format.
struct Scrape {
  std::map<std::string, std::string> types;  // family -> counter | gauge | ...
  std::map<std::string, double> samples;     // `name{labels}` as written -> value
  std::vector<std::string> problems;

  std::optional<double> value(const std::string& series) const {
    auto it = samples.find(series);
    if (it == samples.end()) return std::nullopt;
    return it->second;
  }
};

Scrape parse_exposition(const std::string& text) {
  static const std::regex kHelp(R"(^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+$)");
  static const std::regex kType(
      R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$)");
  static const std::string kName = "[a-zA-Z_:][a-zA-Z0-9_:]*";
  static const std::string kLabel = R"([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")";
  static const std::string kValue = R"(-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|[+-]Inf|NaN)";
  static const std::regex kSample("^(" + kName + ")((?:\\{" + kLabel + "(?:," + kLabel +
                                  ")*\\})?) (" + kValue + ")$");
  Scrape s;
  std::set<std::string> helped;
  std::string current;  // the family whose samples may follow
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    std::string at = "line " + std::to_string(n) + ": " + line;
    std::smatch m;
    if (std::regex_match(line, m, kHelp)) {
      if (!helped.insert(m[1]).second) s.problems.push_back("second HELP, " + at);
      current.clear();
    } else if (std::regex_match(line, m, kType)) {
      std::string family = m[1];
      if (!helped.contains(family)) s.problems.push_back("TYPE before HELP, " + at);
      if (!s.types.emplace(family, m[2]).second) s.problems.push_back("second TYPE, " + at);
      if (m[2] == "counter" && !family.ends_with("_total"))
        s.problems.push_back("counter not ending in _total, " + at);
      current = family;
    } else if (std::regex_match(line, m, kSample)) {
      bool of_histogram =
          s.types[current] == "histogram" &&
          (m[1] == current + "_bucket" || m[1] == current + "_sum" || m[1] == current + "_count");
      if (m[1] != current && !of_histogram)
        s.problems.push_back("sample outside its family, " + at);
      std::string series = m[1].str() + m[2].str();
      if (!s.samples.emplace(series, std::stod(m[3])).second)
        s.problems.push_back("series twice, " + at);
    } else {
      s.problems.push_back("not exposition text, " + at);
    }
  }
  return s;
}

std::string series(const std::string& name, const std::string& labels = "") {
  return labels.empty() ? name : name + "{" + labels + "}";
}

class ObservabilityTest : public SharedNodeTest {
 protected:
  static std::string name(const std::string& suffix = "") { return unique_name(suffix); }

  Scrape scrape() {
    HttpResult r = client_->get("/metrics/prometheus");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.header("content-type"), "text/plain; version=0.0.4; charset=utf-8");
    EXPECT_EQ(r.header("cache-control"), "no-cache");
    Scrape s = parse_exposition(r.body);
    for (const std::string& p : s.problems) ADD_FAILURE() << p;
    return s;
  }

  double value_of(const std::string& series_name) {
    return scrape().value(series_name).value_or(-1);
  }

  // Polls the exposition until `series_name` reads `want` (10 s at most).
  bool reads(const std::string& series_name, double want, double* last) {
    return eventually(seconds(10), [&] {
      *last = value_of(series_name);
      return *last == want;
    });
  }

  json pop_one(const std::string& queue) {
    HttpResult r = pop(*client_, {.queue = queue});
    EXPECT_EQ(r.status, 200) << r.body;
    json messages = r.body_json()["messages"];
    EXPECT_EQ(messages.size(), 1u) << r.body;
    return messages.empty() ? json() : messages[0];
  }
};

TEST_F(ObservabilityTest, PrometheusTextIsWellFormed) {
  ASSERT_EQ(push(*client_, {{name(), "", "", 1}}).status, 201);
  HttpResult r = client_->get("/metrics/prometheus");
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_FALSE(r.body.empty());
  EXPECT_EQ(r.body.back(), '\n');
  Scrape s = parse_exposition(r.body);
  EXPECT_TRUE(s.problems.empty()) << s.problems.front();
  EXPECT_EQ(s.types["queen_raft_role"], "gauge");
  EXPECT_EQ(s.types["queen_raft_entries_committed_total"], "counter");
  EXPECT_EQ(s.types["queen_queue_depth"], "gauge");
  EXPECT_EQ(s.value(series("queen_raft_role", R"(role="leader")")), 1);
  EXPECT_EQ(s.value(series("queen_raft_role", R"(role="follower")")), 0);
  EXPECT_GE(s.value(series("queen_raft_term")).value_or(0), 1);
  double commit = s.value(series("queen_raft_index", R"(kind="commit")")).value_or(0);
  double applied = s.value(series("queen_raft_index", R"(kind="applied")")).value_or(0);
  EXPECT_GE(applied, 1);
  EXPECT_GE(commit, applied);
  EXPECT_GE(s.value(series("queen_raft_entries_committed_total")).value_or(0), 1);
  EXPECT_GE(s.value(series("queen_raft_fsyncs_total")).value_or(0), 1);
  EXPECT_GT(s.value(series("queen_uptime_seconds")).value_or(0), 0);
  EXPECT_EQ(s.value(series("queen_queue_depth", "queue=\"" + name() + "\"")), 1);
  // A scrape is not a client command: it leaves the traffic counters alone.
  double pops = s.value(series("queen_pop_messages_total")).value_or(-1);
  EXPECT_EQ(scrape().value(series("queen_pop_messages_total")), pops);
}

// Request latencies by kind and fsync latencies are Prometheus histograms: cumulative buckets
// ending in +Inf equal to the count, and a push moves the push histogram and the fsync one.
TEST_F(ObservabilityTest, RequestAndFsyncLatenciesAreHistograms) {
  std::string push_count = series("queen_request_duration_seconds_count", R"(kind="push")");
  std::string fsyncs = series("queen_fsync_duration_seconds_count");
  Scrape before = scrape();
  ASSERT_EQ(push(*client_, {{name(), "", "", 1}}).status, 201);
  Scrape after = scrape();
  EXPECT_EQ(after.types["queen_request_duration_seconds"], "histogram");
  EXPECT_EQ(after.types["queen_fsync_duration_seconds"], "histogram");
  EXPECT_EQ(after.value(push_count).value_or(0) - before.value(push_count).value_or(0), 1);
  EXPECT_GE(after.value(fsyncs).value_or(0) - before.value(fsyncs).value_or(0), 1);
  for (const char* kind : {"push", "pop", "ack", "transaction", "other"}) {
    std::string k = std::string("kind=\"") + kind + "\"";
    double previous = 0;
    for (const char* le : {"0.0005", "0.001", "0.01", "0.1", "1", "10", "+Inf"}) {
      auto b =
          after.value(series("queen_request_duration_seconds_bucket", k + ",le=\"" + le + "\""));
      ASSERT_TRUE(b.has_value()) << kind << " " << le;
      EXPECT_GE(*b, previous) << kind << " " << le << ": buckets are cumulative";
      previous = *b;
    }
    EXPECT_EQ(previous, after.value(series("queen_request_duration_seconds_count", k)));
  }
  EXPECT_GT(after.value(series("queen_request_duration_seconds_sum", R"(kind="push")")).value_or(0),
            0);
}

// A push crosses every hand-off between threads once: edge to node, node to disk writer,
// fsync done to node, node to edge; each stage's histogram counts it.
TEST_F(ObservabilityTest, HandoffWaitsBetweenThreadsAreHistograms) {
  auto count_of = [](const Scrape& s, const char* stage) {
    return s.value(
        series("queen_handoff_wait_seconds_count", std::string("stage=\"") + stage + "\""));
  };
  Scrape before = scrape();
  ASSERT_EQ(push(*client_, {{name(), "", "", 1}}).status, 201);
  Scrape after = scrape();
  EXPECT_EQ(after.types["queen_handoff_wait_seconds"], "histogram");
  for (const char* stage : {"command", "disk", "sync", "reply"}) {
    ASSERT_TRUE(count_of(after, stage).has_value()) << stage;
    EXPECT_GE(*count_of(after, stage) - count_of(before, stage).value_or(0), 1) << stage;
    auto inf = after.value(series("queen_handoff_wait_seconds_bucket",
                                  std::string("stage=\"") + stage + "\",le=\"+Inf\""));
    EXPECT_EQ(inf, count_of(after, stage)) << stage;
  }
}

// Every series the example dashboard and alert rules query is one the node exports: a
// renamed metric cannot leave them blank.
TEST_F(ObservabilityTest, TheDashboardAndAlertsQueryExportedMetrics) {
  Scrape s = scrape();
  std::regex metric("queen_[a-z0-9_]+");
  std::regex suffix("_(bucket|sum|count)$");
  for (const char* doc : {"/docs/grafana-dashboard.json", "/docs/alerts.yml"}) {
    std::ifstream in(std::string(QUEEN_SOURCE_DIR) + doc);
    ASSERT_TRUE(in) << doc;
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t found = 0;
    for (std::sregex_iterator it(text.begin(), text.end(), metric), end; it != end; ++it) {
      std::string family = std::regex_replace(it->str(), suffix, "");
      EXPECT_TRUE(s.types.count(family)) << doc << ": " << it->str();
      ++found;
    }
    EXPECT_GT(found, 0u) << doc;
  }
}

// The names of the broker's threads (top -H, ps -L, perf tell them apart), each as often as
// it runs.
std::multiset<std::string> thread_names(pid_t pid) {
  std::multiset<std::string> names;
  std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(tasks)) {
    std::ifstream comm(task.path() / "comm");
    std::string n;
    std::getline(comm, n);
    names.insert(n);
  }
  return names;
}

// By default two edge threads (the main thread and a queen-http thread) serve the connections.
TEST_F(ObservabilityTest, TheBrokersThreadsAreNamed) {
  std::multiset<std::string> names = thread_names(server_->pid());
  for (const char* expected :
       {"queen-node", "queen-disk", "queen-sync", "queen-render", "queen-http"})
    EXPECT_GE(names.count(expected), 1u) << expected;
}

// QUEEN_HTTP_THREADS=0: no edge threads of their own; the node thread serves every
// connection, and requests over each are answered.
TEST(EdgeThreads, WithNoEdgeThreadsTheNodeThreadServesTheConnections) {
  TempDir dir;
  ServerProcess server(dir.path() + "/data", dir.path() + "/server.log",
                       {{"QUEEN_HTTP_THREADS", "0"}});
  std::string error;
  ASSERT_TRUE(server.start(&error)) << error;
  EXPECT_EQ(thread_names(server.pid()).count("queen-http"), 0u);
  std::vector<std::unique_ptr<HttpClient>> clients;
  for (int i = 0; i < 4; ++i) {
    clients.push_back(std::make_unique<HttpClient>(server.port()));
    ASSERT_EQ(push(*clients.back(), {{"edge", "p" + std::to_string(i), "", i}}).status, 201);
  }
  std::set<int> popped;
  for (auto& c : clients) {
    HttpResult r = pop(*c, {.queue = "edge", .auto_ack = true});
    ASSERT_EQ(r.status, 200) << r.body;
    popped.insert(r.body_json()["messages"][0]["data"].get<int>());
  }
  EXPECT_EQ(popped, (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(server.stop(), 0) << server.log_tail();
}

// With the connections on the node thread, a stop closes them there before the node hands
// over and checkpoints: a pop waiting for messages ends with the stop, not at its timeout, an
// idle keep-alive connection is closed, and the process exits 0.
TEST(EdgeThreads, AStopClosesTheConnectionsOnTheNodeThread) {
  TempDir dir;
  ServerProcess server(dir.path() + "/data", dir.path() + "/server.log",
                       {{"QUEEN_HTTP_THREADS", "0"}});
  std::string error;
  ASSERT_TRUE(server.start(&error)) << error;
  HttpClient idle(server.port());
  ASSERT_EQ(idle.get("/health").status, 200);
  HttpClient waiting(server.port());
  ASSERT_EQ(waiting.get("/health").status, 200);
  // Each scrape is a command handed to the node, counted before it is answered: the pop has
  // reached the node once the count runs ahead of the scrapes.
  const std::string commands = R"(queen_handoff_wait_seconds_count{stage="command"})";
  double before = metric(idle, commands);
  auto began = std::chrono::steady_clock::now();
  HttpResult waited;
  std::thread pop_thread(
      [&] { waited = pop(waiting, {.queue = "held", .wait = true, .timeout_ms = 60000}); });
  int scrapes = 0;
  EXPECT_TRUE(eventually(seconds(10), [&] { return metric(idle, commands) > before + ++scrapes; }));
  EXPECT_EQ(server.stop(), 0) << server.log_tail();
  pop_thread.join();
  EXPECT_EQ(waited.status, 0) << waited.body;  // closed, never answered
  EXPECT_LT(std::chrono::steady_clock::now() - began, seconds(30));
  EXPECT_EQ(idle.get("/health", 2000).status, 0);
}

// QUEEN_HTTP_NODE_BUSY_MAX: the node thread serves the connections while few requests are in
// flight; more in flight for a while moves them to the edge threads, and when that load ends
// they come back. A keep-alive connection pushing throughout moves with them and loses
// nothing: every push is answered 201 and every message is there once.
TEST(EdgeThreads, ConnectionsMoveOffTheNodeThreadUnderLoadAndBack) {
  TempDir dir;
  ServerProcess server(dir.path() + "/data", dir.path() + "/server.log",
                       {{"QUEEN_HTTP_NODE_BUSY_MAX", "2"}});
  std::string error;
  ASSERT_TRUE(server.start(&error)) << error;
  HttpClient pusher(server.port());
  HttpClient watcher(server.port());
  const std::string on_node = "queen_http_serving_on_node";
  const std::string moved = "queen_http_connections_moved_total";
  EXPECT_EQ(metric(watcher, on_node), 1);
  int pushed = 0;
  auto push_one = [&] {
    HttpResult r = push(pusher, {{"moving", "", "", pushed}});
    EXPECT_EQ(r.status, 201) << r.body << r.transport_error;
    ++pushed;
  };
  // Six connections, each always holding a pop that waits on an empty queue: six requests in
  // flight, over the bound of two.
  ASSERT_EQ(configure(watcher, "empty", json::object()).status, 200);
  std::atomic<bool> loading{true};
  std::vector<std::thread> waiters;
  for (int i = 0; i < 6; ++i)
    waiters.emplace_back([&] {
      HttpClient c(server.port());
      while (loading) pop(c, {.queue = "empty", .wait = true, .timeout_ms = 300});
    });
  // The pusher and the watcher came in before the load, so they move off at least (the
  // waiters too, unless they came in after the move).
  EXPECT_TRUE(eventually(seconds(20), [&] {
    push_one();
    return metric(watcher, on_node) == 0 && metric(watcher, moved) >= 2;
  }));
  loading = false;
  for (auto& t : waiters) t.join();
  double moved_off = metric(watcher, moved);
  EXPECT_TRUE(eventually(seconds(20), [&] {
    push_one();
    return metric(watcher, on_node) == 1 && metric(watcher, moved) >= moved_off + 2;
  }));  // the pusher and the watcher came back
  std::vector<json> got;
  ASSERT_TRUE(drain(pusher, "moving", "check", &got, &error)) << error;
  std::vector<int> values;
  for (const json& m : got) values.push_back(m["data"].get<int>());
  std::sort(values.begin(), values.end());
  std::vector<int> expected(pushed);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(values, expected);
  EXPECT_EQ(server.stop(), 0) << server.log_tail();
}

TEST_F(ObservabilityTest, MetricsJsonHasTheReferenceShapeAndCountsPushes) {
  auto get = [&] {
    HttpResult r = client_->get("/metrics");
    EXPECT_EQ(r.status, 200) << r.body;
    return r.body_json();
  };
  json before = get();
  ASSERT_EQ(push(*client_, {{name(), "", "", 1}, {name(), "", "", 2}}).status, 201);
  json after = get();
  for (const char* key : {"uptime", "requests", "messages", "database", "memory", "cpu"})
    EXPECT_TRUE(after.contains(key)) << key << " " << after.dump();
  EXPECT_EQ(after["messages"]["total"].get<int64_t>() - before["messages"]["total"].get<int64_t>(),
            2);
  EXPECT_GE(after["requests"]["total"].get<int64_t>() - before["requests"]["total"].get<int64_t>(),
            2);  // the push and the first /metrics
  EXPECT_GT(after["memory"]["rss"].get<int64_t>(), 0);
  EXPECT_TRUE(after["cpu"]["user"].is_number());
  EXPECT_EQ(after["database"]["waitingRequests"], 0);
}

TEST(LatencyHistogram, CountsEachSampleInItsBucketAndCumulatesUpward) {
  real::LatencyHistogram h;
  h.record_us(100);                        // <= 0.5 ms
  h.record_us(500);                        // <= 0.5 ms (bounds are inclusive)
  h.record_us(3000);                       // <= 5 ms
  h.record_us(-7);                         // clamped to 0
  h.record_us(int64_t{60} * 1000 * 1000);  // above every bound: +Inf only
  auto s = h.snapshot();
  EXPECT_EQ(s.cumulative[0], 3u);
  EXPECT_EQ(s.cumulative[2], 3u);  // <= 2.5 ms
  EXPECT_EQ(s.cumulative[3], 4u);  // <= 5 ms
  EXPECT_EQ(s.cumulative[real::LatencyHistogram::kBuckets - 2], 4u);
  EXPECT_EQ(s.cumulative.back(), 5u);
  EXPECT_EQ(s.count, 5u);
  EXPECT_EQ(s.sum_us, 100 + 500 + 3000 + 60000000);
}

// The alerting series of the 2.x reference: commit time as a histogram, and how old messages
// were when popped, per queue (0 before any pop).
TEST_F(ObservabilityTest, CommitTimesAndPopLagAreReported) {
  std::string q = name();
  std::string lag_max =
      series("queen_queue_pop_lag_milliseconds", "queue=\"" + q + "\",stat=\"max\"");
  std::string lag_avg =
      series("queen_queue_pop_lag_milliseconds", "queue=\"" + q + "\",stat=\"avg\"");
  std::string commits = series("queen_raft_commit_duration_seconds_count");
  Scrape before = scrape();
  auto pushed_at = std::chrono::steady_clock::now();
  ASSERT_EQ(push(*client_, {{q, "", "a", 1}}).status, 201);
  Scrape pushed = scrape();
  EXPECT_GT(pushed.value(commits).value_or(0), before.value(commits).value_or(0));
  EXPECT_EQ(pushed.value(lag_max), 0);
  pop_one(q);
  double since_push_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - pushed_at)
          .count();
  Scrape popped = scrape();
  double max = popped.value(lag_max).value_or(-1), avg = popped.value(lag_avg).value_or(-1);
  EXPECT_GE(avg, 0);
  EXPECT_LE(avg, max);
  EXPECT_LE(max, since_push_ms + 1) << "older than the message can be";
  EXPECT_EQ(popped.types["queen_raft_commit_duration_seconds"], "histogram");
  EXPECT_EQ(popped.types["queen_raft_admit_total"], "counter");
  EXPECT_EQ(popped.value(series("queen_raft_storage_full")), 0);
}

TEST_F(ObservabilityTest, LabelValuesAreEscaped) {
  std::string q = name("-\"quoted\\slash");
  ASSERT_EQ(push(*client_, {{q, "", "", 1}}).status, 201);
  Scrape s = scrape();
  EXPECT_EQ(s.value(series("queen_queue_depth", "queue=\"" + name("-\\\"quoted\\\\slash") + "\"")),
            1);
}

TEST_F(ObservabilityTest, SeriesFollowPushPopAckAndDeadLetters) {
  std::string q = name();
  std::string depth = series("queen_queue_depth", "queue=\"" + q + "\"");
  std::string lag =
      series("queen_consumer_group_lag_messages", "queue=\"" + q + "\",group=\"__QUEUE_MODE__\"");
  Scrape before = scrape();
  ASSERT_EQ(push(*client_, {{q, "", "a", 1}, {q, "", "b", 2}, {q, "", "c", 3}}).status, 201);
  double last = 0;
  EXPECT_TRUE(reads(depth, 3, &last)) << last;
  Scrape pushed = scrape();
  EXPECT_EQ(pushed.value(series("queen_queue_messages_total", "queue=\"" + q + "\"")), 3);
  EXPECT_EQ(pushed.value(series("queen_push_messages_total", R"(status="queued")")).value_or(0) -
                before.value(series("queen_push_messages_total", R"(status="queued")")).value_or(0),
            3);
  EXPECT_EQ(pushed.value(series("queen_push_requests_total")).value_or(0) -
                before.value(series("queen_push_requests_total")).value_or(0),
            1);
  EXPECT_GT(pushed.value(series("queen_raft_entries_committed_total")).value_or(0),
            before.value(series("queen_raft_entries_committed_total")).value_or(0));

  json m = pop_one(q);
  ASSERT_EQ(ack(*client_, m, "completed").status, 200);
  EXPECT_TRUE(reads(depth, 2, &last)) << last;
  EXPECT_TRUE(reads(lag, 2, &last)) << last;
  Scrape acked = scrape();
  EXPECT_EQ(acked.value(series("queen_pop_messages_total")).value_or(0) -
                pushed.value(series("queen_pop_messages_total")).value_or(0),
            1);
  EXPECT_EQ(
      acked.value(series("queen_pop_requests_total", R"(result="delivered")")).value_or(0) -
          pushed.value(series("queen_pop_requests_total", R"(result="delivered")")).value_or(0),
      1);
  EXPECT_EQ(acked.value(series("queen_ack_total", R"(result="success")")).value_or(0) -
                pushed.value(series("queen_ack_total", R"(result="success")")).value_or(0),
            1);
  EXPECT_GT(acked.value(series("queen_consume_checkpoints_total")).value_or(0),
            pushed.value(series("queen_consume_checkpoints_total")).value_or(0));

  json poison = pop_one(q);
  ASSERT_EQ(ack(*client_, poison, "dlq").status, 200);
  EXPECT_TRUE(reads(series("queen_dlq_depth_by_queue", "queue=\"" + q + "\""), 1, &last)) << last;
  EXPECT_TRUE(reads(depth, 1, &last)) << last;
  Scrape dead = scrape();
  EXPECT_GE(dead.value(series("queen_dlq_depth", R"(scope="cluster")")).value_or(0), 1);
  EXPECT_EQ(dead.value(series("queen_consume_dlq_moves_total")).value_or(0) -
                acked.value(series("queen_consume_dlq_moves_total")).value_or(0),
            1);
}

TEST_F(ObservabilityTest, NamespacesAndTasksListTheConfiguredQueues) {
  std::string ns = name("-ns");
  std::string task_a = name("-task-a"), task_b = name("-task-b");
  std::string q1 = name("-q1"), q2 = name("-q2");
  for (const auto& [q, task] : {std::pair{q1, task_a}, std::pair{q2, task_b}}) {
    HttpResult c = client_->post(
        "/api/v1/configure",
        {{"queue", q}, {"namespace", ns}, {"task", task}, {"options", json::object()}});
    ASSERT_EQ(c.status, 200) << c.body;
  }
  ASSERT_EQ(push(*client_, {{q1, "", "", 1}, {q1, "", "", 2}}).status, 201);
  std::string pushed_ns = name("push"), pushed_task = name("job");
  ASSERT_EQ(push(*client_, {{pushed_ns + "." + pushed_task + ".orders", "", "", 1}}).status, 201);

  HttpResult r = client_->get("/api/v1/resources/namespaces");
  ASSERT_EQ(r.status, 200) << r.body;
  json list = r.body_json()["namespaces"];
  ASSERT_TRUE(list.is_array()) << r.body;
  std::map<std::string, json> by_name;
  std::vector<std::string> order;
  for (const json& e : list) {
    order.push_back(e["namespace"]);
    by_name[e["namespace"]] = e;
  }
  EXPECT_TRUE(std::is_sorted(order.begin(), order.end())) << r.body;
  ASSERT_TRUE(by_name.contains(ns)) << r.body;
  EXPECT_EQ(by_name[ns]["queues"], 2);
  EXPECT_EQ(by_name[ns]["partitions"], 2);  // configure creates the Default partition
  EXPECT_EQ(by_name[ns]["messages"]["total"], 2);
  EXPECT_EQ(by_name[ns]["messages"]["pending"], 2);
  ASSERT_TRUE(by_name.contains(pushed_ns)) << r.body;
  EXPECT_EQ(by_name[pushed_ns]["queues"], 1);

  HttpResult t = client_->get("/api/v1/resources/tasks");
  ASSERT_EQ(t.status, 200) << t.body;
  std::map<std::string, json> tasks;
  json task_list = t.body_json()["tasks"];
  for (const json& e : task_list) tasks[e["task"]] = e;
  ASSERT_TRUE(tasks.contains(task_a)) << t.body;
  ASSERT_TRUE(tasks.contains(task_b)) << t.body;
  ASSERT_TRUE(tasks.contains(pushed_task)) << t.body;
  EXPECT_EQ(tasks[task_a]["queues"], 1);
  EXPECT_EQ(tasks[task_a]["partitions"], 1);
  EXPECT_EQ(tasks[task_a]["messages"]["total"], 2);
  EXPECT_EQ(tasks[task_b]["messages"]["total"], 0);
  EXPECT_EQ(tasks[pushed_task]["messages"]["pending"], 1);

  ASSERT_EQ(pop_one(q1)["data"], 1);
  EXPECT_TRUE(eventually(seconds(10), [&] {
    json l = client_->get("/api/v1/resources/tasks").body_json()["tasks"];
    for (const json& e : l)
      if (e["task"] == task_a) return e["messages"]["pending"] == 2;  // leased, not acked
    return false;
  }));
}

TEST_F(ObservabilityTest, DeletedMessageIsNeverDeliveredNorRead) {
  std::string q = name();
  HttpResult p = push(*client_, {{q, "", "m-1", 1}, {q, "", "m-2", 2}, {q, "", "m-3", 3}});
  ASSERT_EQ(p.status, 201) << p.body;
  std::string pid = p.body_json()[0]["partitionId"];

  HttpResult del = client_->request("DELETE", "/api/v1/messages/" + pid + "/m-2");
  ASSERT_EQ(del.status, 200) << del.body;
  EXPECT_EQ(del.body_json(), json({{"success", true},
                                   {"partitionId", pid},
                                   {"transactionId", "m-2"},
                                   {"message", "Message deleted successfully"}}));
  HttpResult again = client_->request("DELETE", "/api/v1/messages/" + pid + "/m-2");
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.body_json()["success"], false);
  EXPECT_EQ(again.body_json()["message"], "Message not found");

  EXPECT_EQ(client_->get("/api/v1/messages/" + pid + "/m-2").status, 404);
  EXPECT_EQ(client_->get("/api/v1/messages/" + pid + "/m-3").status, 200);
  json listed = client_->get("/api/v1/messages?queue=" + q).body_json()["messages"];
  ASSERT_EQ(listed.size(), 2u) << listed.dump();
  EXPECT_EQ(listed[0]["transactionId"], "m-3");
  EXPECT_EQ(listed[1]["transactionId"], "m-1");

  for (const std::string group : {"", "other"}) {
    HttpResult r =
        pop(*client_, {.queue = q, .group = group, .batch = 10, .subscription_mode = "all"});
    ASSERT_EQ(r.status, 200) << r.body;
    json messages = r.body_json()["messages"];
    ASSERT_EQ(messages.size(), 2u) << r.body;
    EXPECT_EQ(messages[0]["transactionId"], "m-1");
    EXPECT_EQ(messages[1]["transactionId"], "m-3");
  }
  Scrape s = scrape();
  EXPECT_EQ(s.value(series("queen_queue_messages_deleted_total", "queue=\"" + q + "\"")), 1);
  EXPECT_EQ(s.value(series("queen_queue_depth", "queue=\"" + q + "\"")), 2);  // leased

  EXPECT_EQ(client_->request("DELETE", "/api/v1/messages/x/m-1").status, 400);
  EXPECT_EQ(client_->request("DELETE", "/api/v1/messages/" + pid).status, 404);
  EXPECT_EQ(client_->request("DELETE", "/api/v1/messages").status, 404);
}

// A partition past DedupIndex::kColdScanHashesMax hashes gets a hash ring; a retried
// transactionId is then found through an offset the ring names.
TEST_F(ObservabilityTest, DedupSeriesFollowLookupsDuplicatesAndTheRing) {
  std::string q = name();
  std::vector<PushSpec> items;
  for (int i = 0; i < 300; ++i) items.push_back({q, "p", "t" + std::to_string(i), i});
  Scrape before = scrape();
  ASSERT_EQ(push(*client_, items).status, 201);
  ASSERT_EQ(push(*client_, {{q, "p", "t5", 5}, {q, "p", "new", 0}}).status, 201);
  Scrape after = scrape();
  auto delta = [&](const std::string& s) {
    return after.value(s).value_or(0) - before.value(s).value_or(0);
  };
  EXPECT_EQ(delta(series("queen_dedup_checks_total")), 302);
  EXPECT_EQ(delta(series("queen_dedup_duplicates_total")), 1);
  EXPECT_GE(delta(series("queen_dedup_exact_checks_total", R"(by="ring_candidate")")), 1);
  EXPECT_GT(after.value(series("queen_dedup_ring_bytes")).value_or(0), 0);
  // The original's hash was read from its message record, and that row is now cached.
  EXPECT_GE(delta(series("queen_row_hash_reads_total")), 1);
  EXPECT_GT(after.value(series("queen_row_hash_cache_bytes")).value_or(0), 0);
}

// A push item that names no transactionId is given one the broker makes, which is never
// looked up: a partition pushed to only so holds no dedup ring (its backlog costs its rows
// alone). The first push that names one builds the ring from the rows.
TEST_F(ObservabilityTest, PushesWithoutTransactionIdsBuildNoDedupRing) {
  std::string q = name();
  std::vector<PushSpec> minted(300, PushSpec{q, "p", ""});
  Scrape before = scrape();
  ASSERT_EQ(push(*client_, minted).status, 201);
  ASSERT_EQ(push(*client_, minted).status, 201);
  Scrape mid = scrape();
  auto ring_bytes = [](const Scrape& s) {
    return s.value(series("queen_dedup_ring_bytes")).value_or(-1);
  };
  auto checks = [](const Scrape& s) {
    return s.value(series("queen_dedup_checks_total")).value_or(0);
  };
  EXPECT_EQ(checks(mid) - checks(before), 0);
  EXPECT_EQ(ring_bytes(mid), ring_bytes(before));
  ASSERT_EQ(push(*client_, {{q, "p", ""}, {q, "p", "named"}}).status, 201);
  Scrape after = scrape();
  EXPECT_EQ(checks(after) - checks(mid), 1);
  EXPECT_GT(ring_bytes(after), ring_bytes(mid));
}

TEST(ObservabilityRender, EveryFamilyOnceAndTheAnswerIsPlainText) {
  MetricsReply m;
  m.role = "candidate";
  m.term = 7;
  m.traffic.errors = {{api::Errc::no_leader, 2}, {api::Errc::timeout, 1}};
  m.queues.push_back(QueueMetrics{"a\nb", "ns", "t", 2, 10, 4, 1, 0});
  m.groups_known = true;
  m.groups.push_back(GroupLagMetrics{"a\nb", "g\"1", 4, 30, 2});
  server::HttpAnswer a = server::render_metrics(m);
  EXPECT_EQ(a.status, 200u);
  EXPECT_EQ(a.content_type, "text/plain; version=0.0.4; charset=utf-8");
  Scrape s = parse_exposition(a.body);
  EXPECT_TRUE(s.problems.empty()) << s.problems.front();
  EXPECT_EQ(s.value(series("queen_raft_role", R"(role="candidate")")), 1);
  EXPECT_EQ(s.value(series("queen_raft_term")), 7);
  EXPECT_EQ(s.value(series("queen_errors_total", R"(code="no_leader")")), 2);
  EXPECT_EQ(s.value(series("queen_queue_depth", R"(queue="a\nb")")), 4);
  EXPECT_EQ(s.value(series("queen_dlq_depth", R"(scope="cluster")")), 1);
  EXPECT_EQ(s.value(series("queen_consumer_group_lag_seconds", R"(queue="a\nb",group="g\"1")")),
            30);
}

// Three real nodes: a follower answers /metrics/prometheus itself (its own role and applied
// state), and a delete sent to a follower reaches the leader and is applied by every node.
TEST(ObservabilityClusterTest, FollowersReportTheirOwnMetricsAndEveryNodeAppliesADelete) {
  constexpr int kNodes = 3;
  TempDir dir;
  uint16_t http[kNodes], raft[kNodes];
  std::string peers;
  for (int i = 0; i < kNodes; ++i) {
    http[i] = free_loopback_port();
    raft[i] = free_loopback_port();
    if (!peers.empty()) peers += ",";
    peers += std::to_string(i + 1) + "=127.0.0.1:" + std::to_string(raft[i]) +
             "/127.0.0.1:" + std::to_string(http[i]);
  }
  std::unique_ptr<ServerProcess> nodes[kNodes];
  for (int i = 0; i < kNodes; ++i) {
    std::string n = std::to_string(i + 1);
    nodes[i] =
        std::make_unique<ServerProcess>(dir.path() + "/n" + n, dir.path() + "/n" + n + ".log",
                                        std::map<std::string, std::string>{
                                            {"QUEEN_RAFT_NODE_ID", n},
                                            {"QUEEN_RAFT_PEERS", peers},
                                            {"QUEEN_RAFT_ELECTION_MS", "600"},
                                            {"QUEEN_RAFT_HEARTBEAT_MS", "50"},
                                        });
    nodes[i]->fix_port(http[i]);
  }
  for (auto& node : nodes) {
    std::string error;
    ASSERT_TRUE(node->start(&error)) << error;
  }
  auto metrics_of = [&](int i) {
    HttpClient c(http[i]);
    HttpResult r = c.get("/metrics/prometheus", 2000);
    return r.status == 200 ? parse_exposition(r.body) : Scrape{};
  };
  int leader = -1;
  ASSERT_TRUE(eventually(seconds(15), [&] {
    for (int i = 0; i < kNodes; ++i) {
      json h = HttpClient(http[i]).get("/health", 1000).body_json();
      if (h.is_object() && h["raft"]["role"] == "leader" && h["status"] == "healthy") leader = i;
    }
    return leader >= 0;
  }));
  int follower = (leader + 1) % kNodes;

  HttpClient to_follower(http[follower]);
  HttpResult p =
      to_follower.post("/api/v1/push", push_body({{"cq", "", "m-1", 1}, {"cq", "", "m-2", 2}}));
  ASSERT_EQ(p.status, 201) << p.body;
  std::string pid = p.body_json()[0]["partitionId"];
  std::string depth = series("queen_queue_depth", R"(queue="cq")");
  for (int i = 0; i < kNodes; ++i) {
    EXPECT_TRUE(eventually(seconds(10), [&] { return metrics_of(i).value(depth) == 2; }))
        << "node " << i + 1;
  }
  Scrape f = metrics_of(follower);
  EXPECT_TRUE(f.problems.empty());
  EXPECT_EQ(f.value(series("queen_raft_role", R"(role="follower")")), 1);
  EXPECT_EQ(f.value(series("queen_raft_role", R"(role="leader")")), 0);
  EXPECT_EQ(f.value(series("queen_raft_leader")), leader + 1);
  EXPECT_EQ(f.value(series("queen_raft_node_id")), follower + 1);
  EXPECT_EQ(f.value(series("queen_raft_writable")), 0);
  // The follower's node forwarded the push to the leader, without a retry answer in between.
  EXPECT_GE(f.value(series("queen_raft_forwarded_commands_total", R"(event="sent")")).value_or(0),
            1);
  EXPECT_EQ(f.value(series("queen_errors_total", R"(code="retry")")).value_or(0), 0);
  EXPECT_EQ(metrics_of(leader).value(series("queen_raft_role", R"(role="leader")")), 1);

  HttpResult del = to_follower.request("DELETE", "/api/v1/messages/" + pid + "/m-1");
  ASSERT_EQ(del.status, 200) << del.body;
  EXPECT_EQ(del.body_json()["success"], true) << del.body;
  std::string deleted = series("queen_queue_messages_deleted_total", R"(queue="cq")");
  for (int i = 0; i < kNodes; ++i) {
    EXPECT_TRUE(eventually(seconds(10),
                           [&] {
                             Scrape s = metrics_of(i);
                             return s.value(deleted) == 1 && s.value(depth) == 1;
                           }))
        << "node " << i + 1;
  }
}

}  // namespace
}  // namespace queen::test
