// JWT verification with the keys of a JWKS (JWT_JWKS_URL, server/jwks.h): the set is fetched
// from a server of the test, a token is checked with the key its kid names, a rotated set is
// picked up on refresh, and a set that cannot be fetched stops the start.
#include <utility>  // before Asio (Boost 1.74)

#include <gtest/gtest.h>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "server/auth.h"
#include "server/jwks.h"
#include "tests/server/harness.h"
#include "tests/server/jwt_helpers.h"

namespace queen::test {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using nlohmann::json;

// Serves one JSON body on every GET, on a loopback port, until destroyed.
class JwksServer {
 public:
  explicit JwksServer(std::string body) : acceptor_(io_), body_(std::move(body)) {
    acceptor_.open(tcp::v4());
    acceptor_.bind(tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] { serve(); });
  }
  ~JwksServer() {
    stopping_ = true;
    beast::error_code ec;
    tcp::socket wake(io_);
    wake.connect(tcp::endpoint(asio::ip::address_v4::loopback(), port_), ec);
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/jwks"; }
  void set_body(std::string body) {
    std::lock_guard lock(mutex_);
    body_ = std::move(body);
  }

 private:
  void serve() {
    while (!stopping_) {
      tcp::socket socket(io_);
      beast::error_code ec;
      acceptor_.accept(socket, ec);
      if (ec || stopping_) continue;
      beast::flat_buffer buffer;
      http::request<http::string_body> req;
      http::read(socket, buffer, req, ec);
      if (ec) continue;
      http::response<http::string_body> res{http::status::ok, 11};
      {
        std::lock_guard lock(mutex_);
        res.body() = body_;
      }
      res.set(http::field::content_type, "application/json");
      res.prepare_payload();
      http::write(socket, res, ec);
      socket.shutdown(tcp::socket::shutdown_both, ec);
    }
  }

  asio::io_context io_;
  tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::mutex mutex_;
  std::string body_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

std::string jwks_of(std::initializer_list<json> keys) {
  return json{{"keys", json(keys)}}.dump();
}

server::AuthSettings jwks_settings(const std::string& url, int64_t refresh_s = 3600) {
  server::AuthSettings s;
  s.algorithm = "auto";
  s.jwks.url = url;
  s.jwks.refresh_s = refresh_s;
  s.jwks.timeout_ms = 2000;
  return s;
}

bool valid(const server::Authenticator& auth, const std::string& token) {
  return auth.verify(token, unix_now_s()).ok();
}

TEST(Jwks, KeepsRsaAndEd25519SigningKeysAndSkipsTheRest) {
  TestKey rsa("RSA"), ed("ED25519");
  json enc = rsa.jwk("enc-key");
  enc["use"] = "enc";
  json ec_key = {{"kty", "EC"}, {"crv", "P-256"}, {"x", "AA"}, {"y", "AA"}, {"kid", "ec"}};
  auto keys = server::parse_jwks(jwks_of({rsa.jwk("r1"), ed.jwk("e1"), enc, ec_key}));
  ASSERT_TRUE(keys.ok()) << keys.error().message;
  ASSERT_EQ(keys.value().size(), 2u);
  EXPECT_EQ(keys.value()[0].kid, "r1");
  EXPECT_EQ(keys.value()[1].kid, "e1");
  EXPECT_FALSE(server::parse_jwks("not json").ok());
  EXPECT_FALSE(server::parse_jwks(R"({"keys":"no"})").ok());
  EXPECT_FALSE(server::parse_jwks(jwks_of({ec_key})).ok()) << "no usable key";
}

TEST(Jwks, ATokenIsVerifiedWithTheKeyItsKidNames) {
  TestKey r1("RSA"), e1("ED25519"), stranger("RSA");
  JwksServer jwks(jwks_of({r1.jwk("r1"), e1.jwk("e1")}));
  auto created = server::Authenticator::create(jwks_settings(jwks.url()));
  ASSERT_TRUE(created.ok()) << created.error().message;
  const server::Authenticator& auth = *created.value();
  json claims = role_claims("admin");
  EXPECT_TRUE(valid(auth, key_token(claims, r1, "RS256", "r1")));
  EXPECT_TRUE(valid(auth, key_token(claims, e1, "EdDSA", "e1")));
  // With no kid, the set's only key of the token's type.
  EXPECT_TRUE(valid(auth, key_token(claims, r1, "RS256")));
  EXPECT_FALSE(valid(auth, key_token(claims, stranger, "RS256", "r1"))) << "another key";
  EXPECT_FALSE(valid(auth, key_token(claims, r1, "RS256", "nope"))) << "an unknown kid";
  EXPECT_FALSE(valid(auth, key_token(claims, r1, "EdDSA", "r1"))) << "a key of another type";
  auto refused = auth.check("POST", "/api/v1/push", "Bearer " + key_token(claims, stranger), 0);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status, 401u);
}

TEST(Jwks, ARotatedSetIsPickedUpOnRefresh) {
  TestKey old_key("RSA"), new_key("RSA");
  JwksServer jwks(jwks_of({old_key.jwk("2025")}));
  auto created = server::Authenticator::create(jwks_settings(jwks.url(), /*refresh_s=*/1));
  ASSERT_TRUE(created.ok()) << created.error().message;
  const server::Authenticator& auth = *created.value();
  json claims = role_claims("read-only");
  std::string old_token = key_token(claims, old_key, "RS256", "2025");
  std::string new_token = key_token(claims, new_key, "RS256", "2026");
  EXPECT_TRUE(valid(auth, old_token));
  EXPECT_FALSE(valid(auth, new_token));
  jwks.set_body(jwks_of({new_key.jwk("2026")}));
  EXPECT_TRUE(eventually(std::chrono::seconds(10), [&] { return valid(auth, new_token); }));
  EXPECT_FALSE(valid(auth, old_token)) << "the rotated-out key no longer verifies";
}

TEST(Jwks, ASetThatCannotBeFetchedStopsTheStart) {
  uint16_t closed = free_loopback_port();
  auto unreachable = server::Authenticator::create(
      jwks_settings("http://127.0.0.1:" + std::to_string(closed) + "/jwks"));
  ASSERT_FALSE(unreachable.ok());
  EXPECT_NE(unreachable.error().message.find("JWT_JWKS_URL"), std::string::npos);
  auto not_http = server::Authenticator::create(jwks_settings("ftp://example/jwks"));
  ASSERT_FALSE(not_http.ok());
  EXPECT_NE(not_http.error().message.find("http"), std::string::npos);
  JwksServer empty(R"({"keys":[]})");
  auto no_keys = server::Authenticator::create(jwks_settings(empty.url()));
  ASSERT_FALSE(no_keys.ok());
  EXPECT_NE(no_keys.error().message.find("no RSA or Ed25519 key"), std::string::npos);
}

}  // namespace
}  // namespace queen::test
