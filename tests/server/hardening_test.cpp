// Integration tests of the edge's refusals against the real `queen` binary: admission permits
// (429 overloaded), header, body and idle timeouts, the request deadline (503 timeout), the
// disk gate (507 storage_full) and thousands of idle keep-alive connections. Each test starts
// its own node with small limits set through environment variables.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/server/api_helpers.h"
#include "tests/server/harness.h"

namespace queen::test {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

int64_t ms_since(Clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
}

// A blocking loopback socket for bytes a well-behaved client would never send.
class RawConn {
 public:
  explicit RawConn(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RawConn() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;

  bool ok() const { return fd_ >= 0; }
  bool send(const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }
  // Reads what arrives until `out` holds `needle` or `timeout` passes; true when it does.
  bool read_until(const std::string& needle, milliseconds timeout, std::string* out) {
    auto deadline = Clock::now() + timeout;
    while (out->find(needle) == std::string::npos) {
      if (read_some(deadline, out) != Read::data) return false;
    }
    return true;
  }
  // Reads what arrives until the peer closes or `timeout` passes; true when it closed.
  bool read_until_closed(milliseconds timeout, std::string* out) {
    auto deadline = Clock::now() + timeout;
    for (;;) {
      Read r = read_some(deadline, out);
      if (r != Read::data) return r == Read::closed;
    }
  }

 private:
  enum class Read { data, closed, deadline };
  // Appends the next bytes to arrive before `deadline` to `out`.
  Read read_some(Clock::time_point deadline, std::string* out) {
    char buf[4096];
    for (;;) {
      int left = static_cast<int>(
          std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count());
      if (left <= 0) return Read::deadline;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, left) <= 0) continue;
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return Read::closed;
      out->append(buf, static_cast<size_t>(n));
      return Read::data;
    }
  }

  int fd_ = -1;
};

std::string post_header(const std::string& target, size_t content_length) {
  return "POST " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
         "Content-Length: " + std::to_string(content_length) + "\r\n\r\n";
}

// A push body of about `bytes` bytes.
json push_of_size(const std::string& queue, size_t bytes) {
  return push_body({{queue, "p", "", std::string(bytes, 'x')}});
}

using Env = std::map<std::string, std::string>;

class TestNode {
 public:
  explicit TestNode(std::map<std::string, std::string> env)
      : server_(dir_.path() + "/data", dir_.path() + "/server.log", std::move(env)) {}
  bool start(std::string* error) { return server_.start(error); }
  uint16_t port() const { return server_.port(); }
  ServerProcess& process() { return server_; }
  const std::string& dir() const { return dir_.path(); }

 private:
  TempDir dir_;
  ServerProcess server_;
};

#define START_NODE(node)                        \
  do {                                          \
    std::string error;                          \
    ASSERT_TRUE((node).start(&error)) << error; \
  } while (0)

// ---------- admission ----------

TEST(Hardening, AdmissionAnswers429WhenTheBudgetStaysFullThenAdmitsOnceReleased) {
  TestNode node({{"QUEEN_RAFT_ADMIT_MAX_MB", "1"}, {"QUEEN_RAFT_ADMIT_HOLD_MS", "400"}});
  START_NODE(node);
  // A client announces ~1 MB and sends none of it: it holds almost the whole budget.
  auto hog = std::make_unique<RawConn>(node.port());
  ASSERT_TRUE(hog->ok());
  ASSERT_TRUE(hog->send(post_header("/api/v1/push", 1000000)));

  HttpClient client(node.port());
  // Requests without a body take no permit. The hog's permit is half the budget (the most one
  // client address may hold); the push waits until it is held.
  const double client_share_bytes = (1 << 20) / 2;
  ASSERT_TRUE(eventually(milliseconds(5000), [&] {
    return metric(client, "queen_raft_admit_in_use_bytes") == client_share_bytes;
  }));
  auto start = Clock::now();
  HttpResult refused = client.post("/api/v1/push", push_of_size("adm", 100000), 10000);
  int64_t waited = ms_since(start);
  ASSERT_EQ(refused.status, 429) << refused.body << refused.transport_error;
  EXPECT_EQ(refused.body_json()["code"], "overloaded");
  EXPECT_TRUE(refused.body_json()["error"].is_string());
  int retry_after = std::stoi(refused.header("retry-after"));
  EXPECT_GE(retry_after, 1);
  EXPECT_LE(retry_after, 5);
  EXPECT_GE(waited, 300 - 50) << "refused before the hold (400 ms -25%)";
  EXPECT_LT(waited, 3000);
  EXPECT_EQ(metric(client, R"(queen_raft_admit_total{outcome="overloaded"})"), 1);
  EXPECT_GE(metric(client, R"(queen_raft_admit_total{outcome="admitted"})"), 1);
  EXPECT_EQ(metric(client, "queen_raft_admit_in_use_bytes"), client_share_bytes);
  EXPECT_EQ(metric(client, "queen_raft_admit_waiting"), 0);
  std::printf("admission: 429 after %lld ms of hold\n", static_cast<long long>(waited));

  // The hog goes away: its permit comes back and the same push is admitted.
  hog.reset();
  HttpResult admitted;
  ASSERT_TRUE(eventually(milliseconds(5000),
                         [&] {
                           admitted =
                               client.post("/api/v1/push", push_of_size("adm", 100000), 10000);
                           return admitted.status == 201;
                         }))
      << admitted.status << admitted.body;
  EXPECT_TRUE(eventually(milliseconds(5000), [&] {
    return metric(client, "queen_raft_admit_in_use_bytes") == 0;
  })) << "every permit comes back once its answer is sent";
}

TEST(Hardening, PermitsComeBackWhenAnswersAreSent) {
  TestNode node({{"QUEEN_RAFT_ADMIT_MAX_MB", "1"}, {"QUEEN_RAFT_ADMIT_HOLD_MS", "2000"}});
  START_NODE(node);
  HttpClient client(node.port());
  // Forty pushes of 300 KB each: far more than the budget in total, one at a time.
  for (int i = 0; i < 40; ++i) {
    HttpResult r = client.post("/api/v1/push", push_of_size("permits", 300000), 10000);
    ASSERT_EQ(r.status, 201) << i << " " << r.body;
  }
  // A body larger than the whole budget waits for all of it, then is admitted.
  HttpResult big = client.post("/api/v1/push", push_of_size("permits", 1500000), 10000);
  EXPECT_EQ(big.status, 201) << big.body;
}

// ---------- slow clients and deadlines ----------

TEST(Hardening, SlowHeadersAndBodiesAreDroppedWhileOthersAreServed) {
  TestNode node({{"QUEEN_HTTP_HEADER_TIMEOUT_MS", "500"}, {"QUEEN_HTTP_BODY_TIMEOUT_MS", "500"}});
  START_NODE(node);
  RawConn slow_header(node.port());
  RawConn slow_body(node.port());
  ASSERT_TRUE(slow_header.ok() && slow_body.ok());
  ASSERT_TRUE(slow_header.send("POST /api/v1/push HTTP/1.1\r\nHo"));
  ASSERT_TRUE(slow_body.send(post_header("/api/v1/push", 100) + "{\"items\":"));
  auto start = Clock::now();
  // Trickle a byte now and then: the header never completes within its timeout.
  bool header_dropped = false;
  std::string ignored;
  while (!header_dropped && ms_since(start) < 5000) {
    slow_header.send("x");
    header_dropped = slow_header.read_until_closed(milliseconds(100), &ignored);
  }
  EXPECT_TRUE(header_dropped);
  EXPECT_TRUE(slow_body.read_until_closed(milliseconds(5000), &ignored));
  HttpClient client(node.port());
  EXPECT_EQ(push(client, {{"slow", "", "t"}}).status, 201);
  EXPECT_TRUE(node.process().running());
}

TEST(Hardening, ATruncatedBodyLosesNothingAccepted) {
  TestNode node(Env{{"QUEEN_HTTP_BODY_TIMEOUT_MS", "500"}});
  START_NODE(node);
  HttpClient client(node.port());
  ASSERT_EQ(push(client, {{"trunc", "", "kept"}}).status, 201);
  {
    RawConn cut(node.port());
    std::string body = push_body({{"trunc", "", "cut"}}).dump();
    ASSERT_TRUE(cut.send(post_header("/api/v1/push", body.size()) + body.substr(0, 10)));
  }  // closed mid-body
  std::vector<json> got;
  std::string error;
  ASSERT_TRUE(drain(client, "trunc", "g", &got, &error)) << error;
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]["transactionId"], "kept");
}

TEST(Hardening, ARequestPastItsDeadlineIs503TimeoutAndTheWriteMayStillLand) {
  TestNode node({{"POP_DEFAULT_TIMEOUT_MS", "300"}, {"QUEEN_TEST_PUSH_DELAY_MS", "2500"}});
  START_NODE(node);
  HttpClient client(node.port());
  auto start = Clock::now();
  HttpResult r = push(client, {{"late", "", "late-1"}});
  int64_t took = ms_since(start);
  ASSERT_EQ(r.status, 503) << r.body << r.transport_error;
  EXPECT_EQ(r.body_json(), (json{{"error", "the request deadline elapsed"}, {"code", "timeout"}}));
  EXPECT_EQ(r.header("retry-after"), "1");
  EXPECT_LT(took, 2500) << "answered by the node, not at the deadline";
  // Answered past QUEEN_RAFT_SLOW_COMMAND_MS (50): a slow command; the scrape itself is not.
  EXPECT_GE(metric(client, "queen_raft_slow_commands_total"), 1);
  std::printf("deadline: 503 timeout after %lld ms (deadline 300 ms)\n",
              static_cast<long long>(took));
  // The node still gets the push after the edge gave up on it: it lands.
  std::vector<json> got;
  ASSERT_TRUE(eventually(milliseconds(10000), [&] {
    std::string error;
    drain(client, "late", "g", &got, &error);
    return !got.empty();
  }));
  EXPECT_EQ(got[0]["transactionId"], "late-1");
}

// ---------- idle connections ----------

void raise_open_files_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);
}

TEST(Hardening, FiveThousandIdleConnectionsDoNotSlowOthersDown) {
  constexpr int kIdle = 5000;
  raise_open_files_limit();
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  if (limit.rlim_cur < 2 * kIdle + 100) GTEST_SKIP() << "RLIMIT_NOFILE too low";
  TestNode node(Env{});
  START_NODE(node);
  HttpClient client(node.port());
  ASSERT_EQ(push(client, {{"idle", "", "before"}}).status, 201);
  std::vector<std::unique_ptr<RawConn>> idle;
  auto open_start = Clock::now();
  for (int i = 0; i < kIdle; ++i) {
    idle.push_back(std::make_unique<RawConn>(node.port()));
    ASSERT_TRUE(idle.back()->ok()) << "connection " << i;
  }
  int64_t opened_ms = ms_since(open_start);
  // Half of them also complete one request, so they are keep-alive connections at rest. Their
  // answers are awaited: the node has accepted them all and is idle with them before the
  // pushes below are timed (a slow build may still be catching up on the accepts otherwise).
  for (int i = 0; i < kIdle; i += 2) {
    ASSERT_TRUE(idle[i]->send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  }
  auto answer_start = Clock::now();
  for (int i = 0; i < kIdle; i += 2) {
    std::string answer;
    ASSERT_TRUE(idle[i]->read_until("\r\n\r\n", milliseconds(30000), &answer)) << i;
    ASSERT_NE(answer.find(" 200 "), std::string::npos) << i << " " << answer;
  }
  int64_t answered_ms = ms_since(answer_start);
  int64_t worst = 0;
  for (int i = 0; i < 20; ++i) {
    auto start = Clock::now();
    HttpResult r = push(client, {{"idle", "", "t" + std::to_string(i)}});
    worst = std::max(worst, ms_since(start));
    ASSERT_EQ(r.status, 201) << r.body << r.transport_error;
  }
  std::printf(
      "idle: %d connections opened in %lld ms, %d requests on them answered in %lld ms; "
      "slowest push beside them %lld ms\n",
      kIdle, static_cast<long long>(opened_ms), kIdle / 2, static_cast<long long>(answered_ms),
      static_cast<long long>(worst));
  EXPECT_LT(worst, 1000);
  EXPECT_TRUE(node.process().running());
}

TEST(Hardening, IdleConnectionsAreClosedAfterTheIdleTimeout) {
  TestNode node(Env{{"QUEEN_HTTP_IDLE_TIMEOUT_MS", "300"}});
  START_NODE(node);
  RawConn idle(node.port());
  ASSERT_TRUE(idle.ok());
  std::string got;
  ASSERT_TRUE(idle.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_TRUE(idle.read_until_closed(milliseconds(5000), &got));
  EXPECT_NE(got.find("200 OK"), std::string::npos) << got;
  // A long poll held at the node is not idle: it is answered at its own timeout.
  HttpClient client(node.port());
  auto start = Clock::now();
  HttpResult r = pop(client, {.queue = "idle-poll", .wait = true, .timeout_ms = 1000});
  EXPECT_EQ(r.status, 204) << r.body << r.transport_error;
  EXPECT_GE(ms_since(start), 700);
}

// ---------- disk gate ----------

void write_pct(const std::string& path, int pct) {
  std::ofstream(path, std::ios::trunc) << pct << "\n";
}

TEST(Hardening, DiskGateRefusesGrowingWritesAndKeepsAcksAndPops) {
  TempDir pct_dir;
  std::string pct_file = pct_dir.path() + "/pct";
  write_pct(pct_file, 50);
  TestNode node({{"QUEEN_TEST_DISK_PCT_FILE", pct_file}, {"QUEEN_RAFT_DISK_CHECK_MS", "20"}});
  START_NODE(node);
  HttpClient client(node.port());
  ASSERT_EQ(push(client, {{"disk", "", "a"}, {"disk", "", "b"}}).status, 201);

  write_pct(pct_file, 85);
  HttpResult full;
  ASSERT_TRUE(eventually(milliseconds(5000),
                         [&] {
                           full = push(client, {{"disk", "", "c"}});
                           return full.status == 507;
                         }))
      << full.status << full.body;
  EXPECT_EQ(full.body_json()["code"], "storage_full");
  EXPECT_TRUE(full.body_json()["error"].is_string());
  EXPECT_EQ(metric(client, "queen_raft_storage_full"), 1);
  EXPECT_GE(metric(client, R"(queen_raft_admit_total{outcome="storage_full"})"), 1);
  json push_op = {{"type", "push"}, {"items", {{{"queue", "disk"}, {"payload", 1}}}}};
  EXPECT_EQ(client.post("/api/v1/transaction", json{{"operations", {push_op}}}).status, 507);
  json schedule = {{"op", "schedule"}, {"queue", "disk"}, {"timerKey", "t"}, {"delayMs", 10}};
  EXPECT_EQ(client.post("/api/v1/timers", json{{"operations", {schedule}}}).status, 507);
  json put = {{"op", "put"}, {"ns", "n"}, {"key", "k"}, {"value", 1}, {"forever", true}};
  EXPECT_EQ(client.post("/api/v1/kv", json{{"operations", {put}}}).status, 507);
  EXPECT_EQ(client.request("PUT", "/api/v1/kv/ns/key", "{}").status, 507);
  // Reads and deletes sent as POST bodies pass the gate.
  json get = {{"op", "get"}, {"ns", "n"}, {"key", "k"}};
  HttpResult read = client.post("/api/v1/kv", json{{"operations", {get}}});
  EXPECT_EQ(read.status, 200) << read.body;
  json cancel = {{"op", "cancel"}, {"queue", "disk"}, {"timerKey", "t"}};
  HttpResult cancelled = client.post("/api/v1/timers", json{{"operations", {cancel}}});
  EXPECT_NE(cancelled.status, 507) << cancelled.body;
  // Pops, acks and reads are served.
  HttpResult popped = pop(client, {.queue = "disk", .batch = 1});
  ASSERT_EQ(popped.status, 200) << popped.body;
  json message = popped.body_json()["messages"][0];
  EXPECT_EQ(ack(client, message, "completed").status, 200);
  EXPECT_EQ(client.get("/health").status, 200);

  // Below the high mark but not below the low one: still refused.
  write_pct(pct_file, 82);
  // Let several checks pass (this waits for time, not for a condition): none may release.
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(push(client, {{"disk", "", "c"}}).status, 507);
  write_pct(pct_file, 79);
  ASSERT_TRUE(eventually(milliseconds(5000), [&] {
    return push(client, {{"disk", "", "c"}}).status == 201;
  }));
  EXPECT_EQ(metric(client, "queen_raft_storage_full"), 0);
}

}  // namespace
}  // namespace queen::test
