// Payload encryption at rest against the real `queen` binary: a queue configured with
// encryptionEnabled keeps its payloads sealed (AES-256-GCM under QUEEN_ENCRYPTION_KEY) in
// the data folder, and every reader (pop, message browse and get, the DLQ, a DLQ replay, a
// transaction's push) sees the payload as it was sent. Without a key such pushes are
// refused; a malformed key stops the node at start.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "tests/server/api_helpers.h"
#include "tests/server/harness.h"

namespace queen::test {
namespace {

constexpr const char* kKey = "6a2f1c9e0b4d8e7f3a5c1b2d4e6f8091a3b5c7d9e1f20314253647586978a9b1";
constexpr const char* kOtherKey =
    "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100";

// Every byte of every file under `dir`.
std::string tree_bytes(const std::string& dir) {
  std::string all;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    all += ss.str();
  }
  return all;
}

bool on_disk(const std::string& dir, const std::string& needle) {
  return tree_bytes(dir).find(needle) != std::string::npos;
}

using EnvVars = std::map<std::string, std::string>;

// A node of its own with `env`, in a temporary folder; started by start().
class Node {
 public:
  explicit Node(EnvVars env) : server_(data_dir(), dir_.path() + "/server.log", std::move(env)) {}
  std::string data_dir() const { return dir_.path() + "/data"; }
  ServerProcess& server() { return server_; }

 private:
  TempDir dir_;
  ServerProcess server_;
};

class EncryptionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    node_ = new Node(EnvVars{{"QUEEN_ENCRYPTION_KEY", kKey}});
    std::string error;
    if (!node_->server().start(&error)) {
      delete node_;
      node_ = nullptr;
      FAIL() << error;
    }
  }
  static void TearDownTestSuite() {
    delete node_;
    node_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(node_, nullptr) << "the server did not start";
    client_ = std::make_unique<HttpClient>(node_->server().port());
  }
  void TearDown() override { ASSERT_TRUE(node_->server().running()) << node_->server().log_tail(); }
  static std::string name() {
    return ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  // Configures `queue` with encryptionEnabled and checks the answer says so.
  void encrypt(const std::string& queue) {
    HttpResult r = configure(*client_, queue, {{"encryptionEnabled", true}});
    ASSERT_EQ(r.status, 200) << r.body;
    ASSERT_EQ(r.body_json()["options"]["encryptionEnabled"], true) << r.body;
  }
  json pop_one(const std::string& queue, const std::string& group) {
    HttpResult r = pop(*client_, {.queue = queue, .group = group, .subscription_mode = "all"});
    EXPECT_EQ(r.status, 200) << r.body;
    json body = r.body_json();
    if (!body.is_object() || body["messages"].size() != 1) return json();
    return body["messages"][0];
  }

  static inline Node* node_ = nullptr;
  std::unique_ptr<HttpClient> client_;
};

TEST_F(EncryptionTest, PayloadIsStoredSealedAndPoppedAsSent) {
  std::string q = name();
  std::string secret = "card-4111-" + q;
  std::string control = "control-in-clear-" + q;
  encrypt(q);
  json payload = {{"secret", secret}, {"amount", 42}, {"nested", {{"ok", true}}}};
  HttpResult pushed = push(*client_, {{q, "p1", "txn-" + q, payload}});
  ASSERT_EQ(pushed.status, 201) << pushed.body;
  ASSERT_EQ(pushed.body_json()[0]["status"], "queued") << pushed.body;
  ASSERT_EQ(push(*client_, {{q + "-plain", "", "", {{"secret", control}}}}).status, 201);

  json m = pop_one(q, "g");
  EXPECT_EQ(m["data"], payload) << m;
  EXPECT_EQ(m["transactionId"], "txn-" + q);
  // The answered pushes are durable: the clear one is in the files, the sealed one is not.
  EXPECT_TRUE(on_disk(node_->data_dir(), control));
  EXPECT_FALSE(on_disk(node_->data_dir(), secret));
  EXPECT_FALSE(on_disk(node_->data_dir(), payload.dump()));
}

TEST_F(EncryptionTest, BrowseGetAndTheDeadLetterListServeThePlaintext) {
  std::string q = name();
  json payload = {{"secret", "ssn-078-05-1120-" + q}};
  encrypt(q);
  ASSERT_EQ(push(*client_, {{q, "", "m-1", payload}}).status, 201);

  HttpResult list = client_->get("/api/v1/messages?queue=" + q);
  ASSERT_EQ(list.status, 200) << list.body;
  ASSERT_EQ(list.body_json()["messages"].size(), 1u) << list.body;  // listed without payloads
  std::string pid = list.body_json()["messages"][0]["partitionId"];
  HttpResult one = client_->get("/api/v1/messages/" + pid + "/m-1");
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(one.body_json()["payload"], payload) << one.body;

  HttpResult r = pop(*client_, {.queue = q});
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(ack(*client_, r.body_json()["messages"][0], "dlq").status, 200);
  HttpResult dlq = client_->get("/api/v1/dlq?queue=" + q);
  ASSERT_EQ(dlq.status, 200) << dlq.body;
  ASSERT_EQ(dlq.body_json()["messages"].size(), 1u) << dlq.body;
  EXPECT_EQ(dlq.body_json()["messages"][0]["data"], payload) << dlq.body;

  // A replay pushes it again: sealed again on disk, plaintext to the consumer.
  uint64_t id = dlq.body_json()["messages"][0]["dlqId"].get<uint64_t>();
  HttpResult replay = client_->post("/api/v1/dlq/" + std::to_string(id) + "/replay", json{});
  ASSERT_EQ(replay.status, 200) << replay.body;
  EXPECT_EQ(pop_one(q, "after-replay")["data"], payload);
  EXPECT_FALSE(on_disk(node_->data_dir(), payload["secret"].get<std::string>()));
}

TEST_F(EncryptionTest, TransactionPushesAreSealedToo) {
  std::string q = name();
  json payload = {{"secret", "txn-secret-" + q}};
  encrypt(q);
  json body = {{"operations", {{{"type", "push"}, {"queue", q}, {"payload", payload}}}}};
  HttpResult r = client_->post("/api/v1/transaction", body);
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.body_json()["success"], true) << r.body;
  EXPECT_EQ(pop_one(q, "g")["data"], payload);
  EXPECT_FALSE(on_disk(node_->data_dir(), payload["secret"].get<std::string>()));
}

TEST(EncryptionRestart, SameKeyReadsAfterARestartAnotherKeyGetsTheEnvelope) {
  Node node(EnvVars{{"QUEEN_ENCRYPTION_KEY", kKey}});
  std::string error;
  ASSERT_TRUE(node.server().start(&error)) << error;
  json payload = {{"secret", "survives-restart"}};
  {
    HttpClient client(node.server().port());
    ASSERT_EQ(configure(client, "vault", {{"encryptionEnabled", true}}).status, 200);
    ASSERT_EQ(push(client, {{"vault", "", "t-1", payload}}).status, 201);
  }
  ASSERT_EQ(node.server().stop(), 0);
  ASSERT_TRUE(node.server().start(&error)) << error;
  {
    HttpClient client(node.server().port());
    HttpResult r = pop(client, {.queue = "vault", .group = "a", .subscription_mode = "all"});
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.body_json()["messages"][0]["data"], payload) << r.body;
  }
  ASSERT_EQ(node.server().stop(), 0);

  // Another key cannot open it: the consumer gets the stored envelope, as the reference does.
  ServerProcess other(node.data_dir(), node.data_dir() + "/../other.log",
                      {{"QUEEN_ENCRYPTION_KEY", kOtherKey}});
  ASSERT_TRUE(other.start(&error)) << error;
  HttpClient client(other.port());
  HttpResult r = pop(client, {.queue = "vault", .group = "b", .subscription_mode = "all"});
  ASSERT_EQ(r.status, 200) << r.body;
  json data = r.body_json()["messages"][0]["data"];
  EXPECT_TRUE(data.contains("encrypted") && data.contains("iv") && data.contains("authTag"))
      << data;
  EXPECT_EQ(r.body.find("survives-restart"), std::string::npos);
}

TEST(EncryptionWithoutKey, PushesToAnEncryptedQueueAreRefusedNotStoredInClear) {
  Node node(EnvVars{});
  std::string error;
  ASSERT_TRUE(node.server().start(&error)) << error;
  HttpClient client(node.server().port());
  ASSERT_EQ(configure(client, "vault", {{"encryptionEnabled", true}}).status, 200);
  json payload = {{"secret", "never-in-clear"}};
  HttpResult r = push(client, {{"vault", "", "t-1", payload}});
  ASSERT_EQ(r.status, 500) << r.body;
  json body = r.body_json();
  EXPECT_EQ(body["code"], "encryption_unavailable") << r.body;
  EXPECT_NE(body["error"].get<std::string>().find("QUEEN_ENCRYPTION_KEY"), std::string::npos);

  json txn = {{"operations", {{{"type", "push"}, {"queue", "vault"}, {"payload", payload}}}}};
  HttpResult t = client.post("/api/v1/transaction", txn);
  EXPECT_EQ(t.status, 500) << t.body;
  EXPECT_EQ(t.body_json()["code"], "encryption_unavailable") << t.body;
  json timer = {{"operations",
                 {{{"op", "schedule"},
                   {"queue", "vault"},
                   {"timerKey", "k"},
                   {"delayMs", 0},
                   {"payload", "eyJzZWNyZXQiOiJuZXZlci1pbi1jbGVhciJ9"}}}}};  // the payload
  HttpResult tm = client.post("/api/v1/timers", timer);
  EXPECT_EQ(tm.status, 500) << tm.body;
  EXPECT_EQ(tm.body_json()["code"], "encryption_unavailable") << tm.body;

  EXPECT_EQ(pop(client, {.queue = "vault", .subscription_mode = "all"}).status, 204);
  EXPECT_EQ(push(client, {{"plain", "", "", {{"secret", "in-clear-on-purpose"}}}}).status, 201);
  EXPECT_TRUE(on_disk(node.data_dir(), "in-clear-on-purpose"));
  EXPECT_FALSE(on_disk(node.data_dir(), "never-in-clear"));
}

TEST(EncryptionBadKey, AMalformedKeyStopsTheNodeAtStartWithoutEchoingIt) {
  std::string not_hex(64, 'z');
  for (const std::string& bad : {std::string("abc123"), not_hex}) {
    Node node(EnvVars{{"QUEEN_ENCRYPTION_KEY", bad}});
    std::string error;
    EXPECT_FALSE(node.server().start(&error)) << bad;
    EXPECT_EQ(node.server().exit_code(), 1) << bad;
    std::string log = node.server().log_tail();
    EXPECT_NE(log.find("QUEEN_ENCRYPTION_KEY"), std::string::npos) << log;
    EXPECT_EQ(log.find(bad), std::string::npos) << log;
  }
}

}  // namespace
}  // namespace queen::test
