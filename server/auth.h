// JWT authentication of the HTTP edge (optional: JWT_ENABLED, off by default). Owns the
// JWT_* settings, the verification of bearer tokens with OpenSSL (HS256/HS384/HS512 under
// JWT_SECRET; RS256/RS384/RS512 and EdDSA under the PEM public key in JWT_PUBLIC_KEY or the
// keys of the JWKS at JWT_JWKS_URL) and the access level each route needs (access_for).
//
// Contract:
// - check() runs before a request is parsed or reaches the node. nullopt lets it through;
//   otherwise it is the answer: 401 {"error","code":"unauthorized"} for a missing token
//   ("Authentication required") or an invalid one ("Invalid token: <why>"), 403
//   {"error":"Insufficient permissions","code":"forbidden"} for a valid token whose roles do
//   not reach the route's level.
// - OPTIONS (CORS preflight) and the skip paths pass without a token. JWT_SKIP_PATHS
//   (default /health,/metrics/prometheus,/metrics,/) matches a path exactly, or as a prefix
//   for an entry that ends in '/' other than "/" itself.
// - A token is valid when its header's alg is the configured one (with JWT_ALGORITHM=auto,
//   any supported one whose key is configured; "none" never), its signature verifies, exp
//   and nbf hold with JWT_CLOCK_SKEW seconds of slack, and iss and aud match JWT_ISSUER and
//   JWT_AUDIENCE when those are set.
// - Roles come from the claims JWT_ROLES_CLAIM (a string) and JWT_ROLES_ARRAY_CLAIM (an
//   array), under the names JWT_ROLE_*. admin reaches every level, read-write every level
//   but admin, read-only only read_only; write-only is apart from that ladder and reaches
//   only write_only routes (push and timer schedules), which read-write and admin reach too.
// - Immutable once built (the JWKS keys are refreshed inside server/jwks.h's cache): every
//   edge thread calls check() at once. Secrets never appear in an answer or a log line.
// - With JWT_JWKS_URL, an RS*/EdDSA token is verified with the JWKS key its header's kid
//   names (with no kid, the set's only key of that type), else with JWT_PUBLIC_KEY. The set
//   is fetched at start (a node whose fetch fails refuses to start) and every
//   JWT_JWKS_REFRESH_INTERVAL seconds.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.h"
#include "server/api/api.h"
#include "server/config.h"
#include "server/jwks.h"

struct evp_pkey_st;  // OpenSSL's EVP_PKEY

namespace queen::server {

enum class Access : uint8_t { read_only, write_only, read_write, admin };

// The level each route needs: its row in the route table (server/api/routes.h).

struct AuthSettings {
  std::string algorithm = "HS256";  // HS256/384/512, RS256/384/512, EdDSA or auto
  std::string secret;               // JWT_SECRET
  std::string public_key_pem;       // JWT_PUBLIC_KEY (SubjectPublicKeyInfo, PKCS#1 or a cert)
  JwksOptions jwks;                 // JWT_JWKS_URL (empty: none), its refresh and timeout
  std::string issuer;               // JWT_ISSUER (empty: not checked)
  std::string audience;             // JWT_AUDIENCE (empty: not checked)
  int64_t clock_skew_s = 30;        // JWT_CLOCK_SKEW
  std::vector<std::string> skip_paths = {"/health", "/metrics/prometheus", "/metrics", "/"};
  std::string roles_claim = "role";         // JWT_ROLES_CLAIM
  std::string roles_array_claim = "roles";  // JWT_ROLES_ARRAY_CLAIM
  std::string role_admin = "admin";         // JWT_ROLE_ADMIN
  std::string role_read_write = "read-write";
  std::string role_read_only = "read-only";
  std::string role_write_only = "write-only";
};

// What a valid token says about its bearer.
struct TokenClaims {
  std::string subject;  // sub, when a string
  bool admin = false, read_write = false, read_only = false, write_only = false;
  bool reaches(Access level) const;
};

class Authenticator {
 public:
  // Checks the settings (algorithm, the key it needs) and parses the public key.
  static Result<std::shared_ptr<const Authenticator>> create(AuthSettings settings);
  ~Authenticator();
  Authenticator(const Authenticator&) = delete;
  Authenticator& operator=(const Authenticator&) = delete;

  // The refusal for a request, or nullopt to let it through. `authorization` is the
  // Authorization header ("Bearer <jwt>", any case; a value without the prefix is the
  // token itself); `now_s` the wall clock in seconds.
  // A let-through token's `sub` goes to `subject` (when not null).
  std::optional<HttpAnswer> check(std::string_view method, std::string_view target,
                                  std::string_view authorization, int64_t now_s,
                                  std::string* subject = nullptr) const;
  // The claims of a valid token, or why it is not one.
  Result<TokenClaims> verify(std::string_view token, int64_t now_s) const;
  bool skipped(std::string_view path) const;

 private:
  explicit Authenticator(AuthSettings settings) : settings_(std::move(settings)) {}
  bool signature_ok(const std::string& alg, const std::string& kid, std::string_view input,
                    std::string_view sig) const;
  // Whether a key for tokens of this kind (RSA or Ed25519) is configured.
  bool has_key_for(int kind) const;

  AuthSettings settings_;
  evp_pkey_st* key_ = nullptr;       // owned; null without JWT_PUBLIC_KEY
  std::unique_ptr<JwksCache> jwks_;  // null without JWT_JWKS_URL
};

// JWT_* from the environment: null when JWT_ENABLED is off (or unset); an error naming the
// variable when a value is malformed or the algorithm lacks its key.
Result<std::shared_ptr<const Authenticator>> load_authenticator(const EnvLookup& lookup);

}  // namespace queen::server
