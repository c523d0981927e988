#include <utility>  // before Asio (Boost 1.74)

#include "server/jwks.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <optional>

#include "io/real/base64.h"
#include "io/real/log.h"

namespace queen::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using json = nlohmann::json;

namespace {

constexpr uint64_t kJwksBytesMax = 1u << 20;

struct Url {
  bool tls = false;
  std::string host;
  uint16_t port = 0;
  std::string target;
};

std::optional<Url> parse_url(std::string_view url) {
  Url u;
  if (url.starts_with("https://")) {
    u.tls = true;
    u.port = 443;
    url.remove_prefix(8);
  } else if (url.starts_with("http://")) {
    u.port = 80;
    url.remove_prefix(7);
  } else {
    return std::nullopt;
  }
  size_t slash = url.find('/');
  std::string_view authority = url.substr(0, slash);
  u.target = slash == std::string_view::npos ? "/" : std::string(url.substr(slash));
  size_t colon = authority.rfind(':');
  if (colon != std::string_view::npos) {
    std::string_view port = authority.substr(colon + 1);
    unsigned value = 0;
    for (char c : port) {
      if (c < '0' || c > '9' || value > 65535) return std::nullopt;
      value = value * 10 + static_cast<unsigned>(c - '0');
    }
    if (port.empty() || value == 0 || value > 65535) return std::nullopt;
    u.port = static_cast<uint16_t>(value);
    authority = authority.substr(0, colon);
  }
  if (authority.empty()) return std::nullopt;
  u.host = std::string(authority);
  return u;
}

// Starts one asynchronous operation with a completion handler and runs the context until it
// completes; the tcp_stream's deadline makes every operation complete by then.
template <class Start>
beast::error_code await(asio::io_context& io, Start start) {
  beast::error_code result = asio::error::timed_out;
  start([&result](beast::error_code ec, auto&&...) { result = ec; });
  io.restart();
  io.run();
  return result;
}

template <class Stream>
Result<std::string> exchange(asio::io_context& io, Stream& stream, const Url& u) {
  http::request<http::empty_body> req{http::verb::get, u.target, 11};
  req.set(http::field::host, u.host);
  req.set(http::field::accept, "application/json");
  req.set(http::field::user_agent, "queen");
  req.keep_alive(false);
  auto ec = await(io, [&](auto done) { http::async_write(stream, req, done); });
  if (ec) return make_error(Errc::io, "sending the request failed: " + ec.message());
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(kJwksBytesMax);
  ec = await(io, [&](auto done) { http::async_read(stream, buffer, parser, done); });
  if (ec) return make_error(Errc::io, "reading the answer failed: " + ec.message());
  if (parser.get().result() != http::status::ok)
    return make_error(Errc::io, "answered HTTP " + std::to_string(parser.get().result_int()));
  return std::move(parser.get().body());
}

Result<std::string> get(const Url& u, int64_t timeout_ms) {
  asio::io_context io;
  beast::tcp_stream plain(io);
  plain.expires_after(std::chrono::milliseconds(timeout_ms));  // the whole exchange
  tcp::resolver resolver(io);
  tcp::resolver::results_type where;
  auto ec = await(io, [&](auto done) {
    resolver.async_resolve(u.host, std::to_string(u.port),
                           [&where, done](beast::error_code e, tcp::resolver::results_type r) {
                             where = std::move(r);
                             done(e);
                           });
  });
  if (ec) return make_error(Errc::io, "cannot resolve " + u.host + ": " + ec.message());
  ec = await(io, [&](auto done) { plain.async_connect(where, done); });
  if (ec) {
    return make_error(Errc::io, "cannot connect to " + u.host + ":" + std::to_string(u.port) +
                                    ": " + ec.message());
  }
  plain.socket().set_option(tcp::no_delay(true), ec);
  if (!u.tls) return exchange(io, plain, u);
  ssl::context context(ssl::context::tls_client);
  context.set_default_verify_paths();
  context.set_verify_mode(ssl::verify_peer);
  beast::ssl_stream<beast::tcp_stream> stream(std::move(plain), context);
  SSL_set_tlsext_host_name(stream.native_handle(), u.host.c_str());
  stream.set_verify_callback(ssl::host_name_verification(u.host));
  ec = await(io, [&](auto done) { stream.async_handshake(ssl::stream_base::client, done); });
  if (ec) return make_error(Errc::io, "TLS handshake failed: " + ec.message());
  return exchange(io, stream, u);
}

void free_key(evp_pkey_st* key) {
  EVP_PKEY_free(key);
}

std::optional<std::string> b64url(const json& field) {
  if (!field.is_string()) return std::nullopt;
  std::string_view text = field.get_ref<const std::string&>();
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  return real::base64_decode(text, real::Base64::url);
}

PublicKey rsa_key(const std::string& n, const std::string& e) {
  BIGNUM* bn_n = BN_bin2bn(reinterpret_cast<const unsigned char*>(n.data()),
                           static_cast<int>(n.size()), nullptr);
  BIGNUM* bn_e = BN_bin2bn(reinterpret_cast<const unsigned char*>(e.data()),
                           static_cast<int>(e.size()), nullptr);
  OSSL_PARAM_BLD* build = OSSL_PARAM_BLD_new();
  OSSL_PARAM* params = nullptr;
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_from_name(nullptr, "RSA", nullptr);
  EVP_PKEY* key = nullptr;
  if (bn_n && bn_e && build && ctx && OSSL_PARAM_BLD_push_BN(build, OSSL_PKEY_PARAM_RSA_N, bn_n) &&
      OSSL_PARAM_BLD_push_BN(build, OSSL_PKEY_PARAM_RSA_E, bn_e) &&
      (params = OSSL_PARAM_BLD_to_param(build)) != nullptr && EVP_PKEY_fromdata_init(ctx) == 1) {
    if (EVP_PKEY_fromdata(ctx, &key, EVP_PKEY_PUBLIC_KEY, params) != 1) key = nullptr;
  }
  EVP_PKEY_CTX_free(ctx);
  OSSL_PARAM_free(params);
  OSSL_PARAM_BLD_free(build);
  BN_free(bn_n);
  BN_free(bn_e);
  return key ? PublicKey(key, free_key) : PublicKey();
}

PublicKey ed25519_key(const std::string& x) {
  if (x.size() != 32) return {};
  EVP_PKEY* key = EVP_PKEY_new_raw_public_key(
      EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(x.data()), x.size());
  return key ? PublicKey(key, free_key) : PublicKey();
}

PublicKey key_of(const json& jwk) {
  std::string kty = jwk.value("kty", "");
  if (kty == "RSA") {
    auto n = b64url(jwk.value("n", json())), e = b64url(jwk.value("e", json()));
    return n && e && !n->empty() && !e->empty() ? rsa_key(*n, *e) : PublicKey();
  }
  if (kty == "OKP" && jwk.value("crv", "") == "Ed25519") {
    auto x = b64url(jwk.value("x", json()));
    return x ? ed25519_key(*x) : PublicKey();
  }
  return {};
}

}  // namespace

Result<std::vector<Jwk>> parse_jwks(std::string_view text) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("keys") || !doc["keys"].is_array())
    return make_error(Errc::bad_request, "not a JWKS (no \"keys\" array)");
  std::vector<Jwk> keys;
  for (const json& jwk : doc["keys"]) {
    if (!jwk.is_object()) continue;
    if (jwk.contains("use") && jwk["use"] != "sig") continue;
    PublicKey key = key_of(jwk);
    if (!key) continue;
    std::string kid = jwk.contains("kid") && jwk["kid"].is_string() ? jwk["kid"].get<std::string>()
                                                                    : std::string();
    keys.push_back(Jwk{std::move(kid), std::move(key)});
  }
  if (keys.empty()) return make_error(Errc::bad_request, "the JWKS has no RSA or Ed25519 key");
  return keys;
}

Result<std::string> fetch_url(const std::string& url, int64_t timeout_ms) {
  auto u = parse_url(url);
  if (!u) return make_error(Errc::bad_request, "not an http:// or https:// URL");
  return get(*u, timeout_ms);
}

JwksCache::~JwksCache() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (refresher_.joinable()) refresher_.join();
}

Status JwksCache::start() {
  Status first = refresh();
  if (!first.ok()) return first;
  refresher_ = std::thread([this] { run(); });
  return ok_status();
}

Status JwksCache::refresh() {
  auto body = fetch_url(options_.url, options_.timeout_ms);
  if (!body.ok()) return make_error(body.error().code, "fetching it: " + body.error().message);
  auto keys = parse_jwks(body.value());
  if (!keys.ok()) return keys.error();
  std::lock_guard lock(mutex_);
  keys_ = std::move(keys.value());
  return ok_status();
}

void JwksCache::run() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (wake_.wait_for(lock, std::chrono::seconds(options_.refresh_s),
                       [this] { return stopping_; }))
      return;
    lock.unlock();
    Status s = refresh();
    if (!s.ok())
      real::log_line(LogLevel::warn, "auth",
                     "JWKS refresh failed, the keys fetched before stay: " + s.error().message);
    lock.lock();
  }
}

bool JwksCache::has(bool (*fits)(evp_pkey_st*)) const {
  std::lock_guard lock(mutex_);
  for (const Jwk& k : keys_)
    if (fits(k.key.get())) return true;
  return false;
}

PublicKey JwksCache::find(const std::string& kid, bool (*fits)(evp_pkey_st*)) const {
  std::lock_guard lock(mutex_);
  PublicKey only;
  int fitting = 0;
  for (const Jwk& k : keys_) {
    if (!fits(k.key.get())) continue;
    if (!kid.empty() && k.kid == kid) return k.key;
    ++fitting;
    only = k.key;
  }
  return kid.empty() && fitting == 1 ? only : PublicKey();
}

}  // namespace queen::server
