// JWT authentication against the real `queen` binary (JWT_ENABLED=true, JWT_ALGORITHM=auto
// with both an HS256 secret and an RSA public key generated here): a request without a valid
// token is answered 401, one whose role does not reach the route 403, before it reaches the
// node; the skip paths and CORS preflights stay open.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "tests/server/api_helpers.h"
#include "tests/server/harness.h"
#include "tests/server/jwt_helpers.h"

namespace queen::test {
namespace {

constexpr const char* kSecret = "an-hs256-secret-of-the-test";

class AuthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    rsa_ = new TestKey("RSA");
    dir_ = new TempDir();
    server_ = new ServerProcess(dir_->path() + "/data", dir_->path() + "/server.log",
                                {{"JWT_ENABLED", "true"},
                                 {"JWT_ALGORITHM", "auto"},
                                 {"JWT_SECRET", kSecret},
                                 {"JWT_PUBLIC_KEY", rsa_->public_pem()}});
    std::string error;
    if (!server_->start(&error)) {
      delete server_;
      server_ = nullptr;
      FAIL() << error;
    }
  }
  static void TearDownTestSuite() {
    delete server_;
    delete dir_;
    delete rsa_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr) << "the server did not start";
    client_ = std::make_unique<HttpClient>(server_->port());
  }
  void TearDown() override { ASSERT_TRUE(server_->running()) << server_->log_tail(); }

  HttpResult call(const std::string& method, const std::string& target, const json& body,
                  const std::string& token) {
    std::map<std::string, std::string> headers;
    if (!token.empty()) headers["Authorization"] = "Bearer " + token;
    return client_->request(method, target, body.is_null() ? "" : body.dump(), 10000, headers);
  }
  HttpResult push_with(const std::string& token, const std::string& queue) {
    return call("POST", "/api/v1/push", push_body({{queue, "", "", {{"n", 1}}}}), token);
  }
  static void expect_error(const HttpResult& r, int status, const std::string& code) {
    EXPECT_EQ(r.status, status) << r.body;
    json body = r.body_json();
    ASSERT_TRUE(body.is_object()) << r.body;
    EXPECT_EQ(body["code"], code) << r.body;
    EXPECT_TRUE(body["error"].is_string()) << r.body;
  }

  static inline TestKey* rsa_ = nullptr;
  static inline TempDir* dir_ = nullptr;
  static inline ServerProcess* server_ = nullptr;
  std::unique_ptr<HttpClient> client_;
};

TEST_F(AuthTest, NoTokenIs401AndNothingIsStored) {
  HttpResult r = push_with("", "NoToken");
  expect_error(r, 401, "unauthorized");
  EXPECT_EQ(r.body_json()["error"], "Authentication required");
  expect_error(call("GET", "/api/v1/resources/queues", nullptr, ""), 401, "unauthorized");
  // Nothing of the refused push reached the node.
  std::string admin = hs_token(role_claims("admin"), kSecret);
  EXPECT_EQ(call("GET", "/api/v1/resources/queues/NoToken", nullptr, admin).status, 404);
}

TEST_F(AuthTest, BadSignatureIs401) {
  expect_error(push_with(hs_token(role_claims("admin"), "not-the-secret"), "BadSig"), 401,
               "unauthorized");
  TestKey stranger("RSA");
  expect_error(push_with(key_token(role_claims("admin"), stranger), "BadSig"), 401, "unauthorized");
  std::string good = hs_token(role_claims("admin"), kSecret);
  std::string tampered = good;
  tampered[tampered.find('.') + 3] ^= 1;  // a changed claims byte
  expect_error(push_with(tampered, "BadSig"), 401, "unauthorized");
  expect_error(push_with("not.a.jwt", "BadSig"), 401, "unauthorized");
}

TEST_F(AuthTest, ExpiredOrNotYetValidIs401) {
  json expired = {{"role", "admin"}, {"exp", unix_now_s() - 3600}};
  HttpResult r = push_with(hs_token(expired, kSecret), "Expired");
  expect_error(r, 401, "unauthorized");
  EXPECT_NE(r.body.find("expired"), std::string::npos) << r.body;
  json early = {{"role", "admin"}, {"nbf", unix_now_s() + 3600}};
  expect_error(push_with(key_token(early, *rsa_), "Expired"), 401, "unauthorized");
}

TEST_F(AuthTest, RoleBelowTheRouteIs403) {
  std::string read_only = hs_token(role_claims("read-only"), kSecret);
  HttpResult r = push_with(read_only, "Forbidden");
  expect_error(r, 403, "forbidden");
  EXPECT_EQ(r.body_json()["error"], "Insufficient permissions");
  std::string writer = key_token(role_claims("write-only"), *rsa_);
  expect_error(call("GET", pop_target({.queue = "Forbidden"}), nullptr, writer), 403, "forbidden");
  std::string rw = hs_token(role_claims("read-write"), kSecret);
  expect_error(call("DELETE", "/api/v1/resources/queues/Forbidden", nullptr, rw), 403, "forbidden");
  // The read-only token still reads.
  EXPECT_EQ(call("GET", "/api/v1/resources/queues", nullptr, read_only).status, 200);
}

TEST_F(AuthTest, GoodHs256AndRs256TokensAreServed) {
  std::string hs = hs_token(role_claims("read-write"), kSecret);
  std::string rs = key_token(role_claims("admin"), *rsa_);
  HttpResult pushed = push_with(hs, "Good");
  ASSERT_EQ(pushed.status, 201) << pushed.body;
  EXPECT_EQ(push_with(rs, "Good").status, 201);
  HttpResult popped = call("GET", pop_target({.queue = "Good", .batch = 10}), nullptr, rs);
  ASSERT_EQ(popped.status, 200) << popped.body;
  EXPECT_EQ(popped.body_json()["messages"].size(), 2u) << popped.body;
  // A write-only producer may push but nothing else.
  EXPECT_EQ(push_with(hs_token(role_claims("write-only"), kSecret), "Good").status, 201);
  EXPECT_EQ(call("DELETE", "/api/v1/resources/queues/Good", nullptr, rs).status, 200);
}

TEST_F(AuthTest, APushersSubIsStampedOnItsMessagesAndABodyCannotForgeIt) {
  json claims = role_claims("admin");
  claims["sub"] = "producer-7";
  std::string token = hs_token(claims, kSecret);
  json body = push_body({{"Stamped", "", "s1", {{"n", 1}}}});
  body["items"][0]["producerSub"] = "someone-else";
  ASSERT_EQ(call("POST", "/api/v1/push", body, token).status, 201);
  json anonymous = role_claims("admin");
  anonymous.erase("sub");
  ASSERT_EQ(push_with(hs_token(anonymous, kSecret), "Stamped").status, 201);
  HttpResult popped = call("GET", pop_target({.queue = "Stamped", .batch = 10}), nullptr, token);
  ASSERT_EQ(popped.status, 200) << popped.body;
  json msgs = popped.body_json()["messages"];
  ASSERT_EQ(msgs.size(), 2u) << popped.body;
  EXPECT_EQ(msgs[0]["producerSub"], "producer-7") << popped.body;
  EXPECT_TRUE(msgs[1]["producerSub"].is_null()) << popped.body;
  std::string pid = msgs[0]["partitionId"];
  HttpResult got = call("GET", "/api/v1/messages/" + pid + "/s1", nullptr, token);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.body_json()["producerSub"], "producer-7") << got.body;
}

TEST_F(AuthTest, SkipPathsAndPreflightsAreOpen) {
  HttpResult health = client_->get("/health");
  EXPECT_EQ(health.status, 200) << health.body;
  HttpResult preflight = client_->request("OPTIONS", "/api/v1/push");
  EXPECT_EQ(preflight.status, 204);
  EXPECT_EQ(preflight.header("access-control-allow-headers"), "Content-Type, Authorization");
  // "/" is the console: a skip path, so the page loads without a token (its API calls carry
  // one).
  HttpResult console = client_->get("/");
  EXPECT_EQ(console.status, 200);
  EXPECT_EQ(console.header("content-type"), "text/html; charset=utf-8");
  EXPECT_EQ(client_->get("/api/v1/status").status, 401) << "the console's feeds need a token";
}

}  // namespace
}  // namespace queen::test
