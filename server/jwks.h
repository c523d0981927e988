// JSON Web Key Sets for JWT authentication (JWT_JWKS_URL): fetching the set over HTTP or
// HTTPS, reading its RSA and Ed25519 signing keys, and keeping them fresh.
//
// Contract:
// - parse_jwks() keeps the keys it can verify with: kty RSA (n, e) and kty OKP with crv
//   Ed25519 (x), whose `use` is absent or "sig". Others are skipped; a set with none, or text
//   that is not a JWKS, is an error.
// - The set is fetched with fetch_url() (server/http_fetch.h).
// - JwksCache::start() fetches once (an error when that fails, so a node never runs without
//   keys it was told to use) and then refreshes every refresh_s on its own thread; a failed
//   refresh keeps the keys it had. find() is safe from any thread at any time.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/common/result.h"
#include "server/http_fetch.h"

struct evp_pkey_st;  // OpenSSL's EVP_PKEY

namespace queen::server {

using PublicKey = std::shared_ptr<evp_pkey_st>;

struct Jwk {
  std::string kid;  // may be empty
  PublicKey key;
};

Result<std::vector<Jwk>> parse_jwks(std::string_view text);

struct JwksOptions {
  std::string url;            // JWT_JWKS_URL
  int64_t refresh_s = 3600;   // JWT_JWKS_REFRESH_INTERVAL
  int64_t timeout_ms = 5000;  // JWT_JWKS_TIMEOUT_MS
};

class JwksCache {
 public:
  explicit JwksCache(JwksOptions options) : options_(std::move(options)) {}
  ~JwksCache();
  JwksCache(const JwksCache&) = delete;
  JwksCache& operator=(const JwksCache&) = delete;

  Status start();
  // The key with this kid; with an empty kid, the only key of the set (if it has one).
  // `fits` filters by key type (RSA or Ed25519) so a token cannot pick a key of another kind.
  PublicKey find(const std::string& kid, bool (*fits)(evp_pkey_st*)) const;
  // Whether the set holds any key that fits.
  bool has(bool (*fits)(evp_pkey_st*)) const;
  // Fetches now; the keys are replaced only when the fetch and the parse succeed.
  Status refresh();

 private:
  void run();

  const JwksOptions options_;
  mutable std::mutex mutex_;
  std::vector<Jwk> keys_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread refresher_;
};

}  // namespace queen::server
