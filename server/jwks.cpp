#include "server/jwks.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <optional>

#include "io/real/base64.h"
#include "io/real/log.h"
#include "io/real/thread_name.h"

namespace queen::server {

using json = nlohmann::json;

namespace {

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
  refresher_ = std::thread([this] {
    real::name_this_thread("queen-jwks");
    run();
  });
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
