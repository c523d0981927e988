// Crash test of transactions against the real binary: workers pop an input, then in one
// transaction ack it, push its output and write a KV marker; the node is killed with SIGKILL
// while they run and restarted on the same data folder. Afterwards every step is entirely
// visible or entirely absent (output present iff marker present iff input acked), and every
// step answered success is visible.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "tests/server/api_helpers.h"
#include "tests/server/harness.h"

namespace queen::test {
namespace {

constexpr const char* kIn = "txn-crash-in";
constexpr const char* kOut = "txn-crash-out";
constexpr const char* kNs = "txn-crash";
constexpr int kInputs = 3000;
constexpr int kWorkers = 4;

struct Answers {
  std::mutex mutex;
  std::set<int> committed;  // steps answered success:true
};

json step_body(const json& m) {
  int i = m["data"]["i"].get<int>();
  std::string key = "step-" + std::to_string(i);
  json ack = {{"type", "ack"},
              {"transactionId", m["transactionId"]},
              {"partitionId", m["partitionId"]},
              {"leaseId", m["leaseId"]}};
  json item = {
      {"queue", kOut}, {"transactionId", "out-" + std::to_string(i)}, {"payload", {{"i", i}}}};
  json push = {{"type", "push"}, {"items", json::array({item})}};
  json mark = {{"op", "put"}, {"ns", kNs}, {"key", key}, {"value", i}, {"forever", true}};
  return {{"operations", json::array({ack, push})}, {"kv", json::array({mark})}};
}

void worker(uint16_t port, Answers* answers) {
  HttpClient c(port);
  while (true) {
    HttpResult r = pop(c, {.queue = kIn});
    if (r.status == 0 || r.status == 204) return;
    if (r.status != 200) continue;
    json m = r.body_json()["messages"][0];
    HttpResult t = c.post("/api/v1/transaction", step_body(m));
    if (t.status == 0) return;
    json a = t.body_json();
    if (t.status == 200 && a.value("success", false)) {
      std::lock_guard lock(answers->mutex);
      answers->committed.insert(m["data"]["i"].get<int>());
    }
  }
}

void push_inputs(HttpClient& c) {
  for (int base = 0; base < kInputs; base += 500) {
    std::vector<PushSpec> items;
    for (int i = base; i < base + 500; ++i) {
      items.push_back({kIn, "", "in-" + std::to_string(i), {{"i", i}}});
    }
    ASSERT_EQ(push(c, items).status, 201);
  }
}

std::set<int> markers(HttpClient& c) {
  std::set<int> out;
  std::string after;
  for (int page = 0; page < 100; ++page) {
    json op = {{"op", "getPrefix"}, {"ns", kNs}, {"prefix", "step-"}, {"limit", 1000}};
    if (!after.empty()) op["after"] = after;
    json r = c.post("/api/v1/kv", json{{"operations", json::array({op})}}).body_json()["results"];
    EXPECT_TRUE(r.is_array()) << r.dump();
    if (!r.is_array()) return out;
    for (const json& row : r[0]["rows"]) out.insert(row["value"].get<int>());
    if (!r[0]["truncated"].get<bool>()) return out;
    after = r[0]["nextAfter"].get<std::string>();
  }
  return out;
}

std::set<int> outputs(HttpClient& c) {
  std::vector<json> audit;
  std::string error;
  EXPECT_TRUE(drain(c, kOut, "audit", &audit, &error)) << error;
  std::set<int> out;
  for (const json& m : audit) {
    EXPECT_TRUE(out.insert(m["data"]["i"].get<int>()).second) << "output twice: " << m;
  }
  return out;
}

// Pops what is left of the input (leases from before the crash expire after a second) until
// every input without a marker came back; returns what came back.
std::set<int> unacked_inputs(HttpClient& c, const std::set<int>& marks) {
  std::set<int> back;
  auto done = [&] {
    for (int i = 0; i < kInputs; ++i) {
      if (!marks.count(i) && !back.count(i)) return false;
    }
    return true;
  };
  eventually(std::chrono::seconds(30), [&] {
    HttpResult r = pop(c, {.queue = kIn, .batch = 1000, .wait = true, .timeout_ms = 300});
    if (r.status == 200) {
      json acks = json::array();
      json answer = r.body_json();
      for (const json& m : answer["messages"]) {
        back.insert(m["data"]["i"].get<int>());
        acks.push_back(ack_item(m, "completed"));
      }
      c.post("/api/v1/ack/batch", json{{"acknowledgments", acks}});
    }
    return done();
  });
  return back;
}

TEST(TxnCrashTest, EachStepIsAllOrNothingAcrossKillNine) {
  TempDir dir;
  std::string data = dir.path() + "/data";
  uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  ServerProcess server(data, dir.path() + "/server.log");
  std::string error;
  ASSERT_TRUE(server.start(&error)) << error;
  {
    HttpClient c(server.port());
    ASSERT_EQ(configure(c, kIn, {{"leaseTime", 1}}).status, 200);
    push_inputs(c);
  }
  Answers answers;
  std::vector<std::thread> load;
  for (int i = 0; i < kWorkers; ++i) load.emplace_back(worker, server.port(), &answers);
  std::this_thread::sleep_for(std::chrono::milliseconds(300 + seed % 700));  // the kill moment
  server.kill9();
  for (auto& t : load) t.join();
  std::printf("%zu steps answered committed before the kill\n", answers.committed.size());
  ASSERT_FALSE(answers.committed.empty()) << "no step was answered before the kill";

  ASSERT_TRUE(server.start(&error)) << error;
  HttpClient c(server.port());
  std::set<int> marks = markers(c);
  std::set<int> outs = outputs(c);
  EXPECT_EQ(outs, marks) << "an output without its marker, or the reverse";
  for (int i : answers.committed) EXPECT_TRUE(marks.count(i)) << "answered step lost: " << i;
  std::set<int> back = unacked_inputs(c, marks);
  std::printf("after restart: %zu markers, %zu outputs, %zu inputs came back\n", marks.size(),
              outs.size(), back.size());
  int broken = 0;
  for (int i = 0; i < kInputs; ++i) {
    if (marks.count(i) != back.count(i)) continue;
    if (++broken <= 10) ADD_FAILURE() << "input " << i << ": acked iff marked does not hold";
  }
  EXPECT_EQ(broken, 0);
}

}  // namespace
}  // namespace queen::test
