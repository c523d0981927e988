#include "server/auth.h"

#include "server/api/routes.h"

#include <openssl/crypto.h>
#include <openssl/decoder.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <nlohmann/json.hpp>

#include "io/real/base64.h"
#include "io/real/log.h"

namespace queen::server {
namespace {

using nlohmann::json;

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

enum class KeyKind { hmac, rsa, eddsa };

struct Algorithm {
  const char* name;
  KeyKind kind;
  const EVP_MD* (*md)();  // null for EdDSA
};

const EVP_MD* no_md() {
  return nullptr;
}

constexpr Algorithm kAlgorithms[] = {
    {"HS256", KeyKind::hmac, EVP_sha256}, {"HS384", KeyKind::hmac, EVP_sha384},
    {"HS512", KeyKind::hmac, EVP_sha512}, {"RS256", KeyKind::rsa, EVP_sha256},
    {"RS384", KeyKind::rsa, EVP_sha384},  {"RS512", KeyKind::rsa, EVP_sha512},
    {"EdDSA", KeyKind::eddsa, no_md},
};

const Algorithm* find_algorithm(std::string_view name) {
  for (const Algorithm& a : kAlgorithms)
    if (name == a.name) return &a;
  return nullptr;
}

bool key_fits(evp_pkey_st* key, KeyKind kind) {
  if (key == nullptr) return false;
  int id = EVP_PKEY_get_base_id(key);
  if (kind == KeyKind::rsa) return id == EVP_PKEY_RSA;
  if (kind == KeyKind::eddsa) return id == EVP_PKEY_ED25519 || id == EVP_PKEY_ED448;
  return false;
}

bool is_rsa(evp_pkey_st* key) {
  return key_fits(key, KeyKind::rsa);
}

bool is_eddsa(evp_pkey_st* key) {
  return key_fits(key, KeyKind::eddsa);
}

auto fits_of(KeyKind kind) -> bool (*)(evp_pkey_st*) {
  return kind == KeyKind::rsa ? is_rsa : is_eddsa;
}

// A PEM public key: SubjectPublicKeyInfo or PKCS#1 (through the decoder), or a certificate.
EVP_PKEY* parse_public_key(const std::string& pem) {
  EVP_PKEY* key = nullptr;
  OSSL_DECODER_CTX* dctx = OSSL_DECODER_CTX_new_for_pkey(&key, "PEM", nullptr, nullptr,
                                                         EVP_PKEY_PUBLIC_KEY, nullptr, nullptr);
  if (dctx != nullptr) {
    const auto* data = reinterpret_cast<const unsigned char*>(pem.data());
    size_t len = pem.size();
    if (OSSL_DECODER_from_data(dctx, &data, &len) != 1) key = nullptr;
    OSSL_DECODER_CTX_free(dctx);
  }
  if (key != nullptr) return key;
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return nullptr;
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (cert == nullptr) return nullptr;
  key = X509_get_pubkey(cert);
  X509_free(cert);
  return key;
}

std::optional<std::string> decode_part(std::string_view part) {
  while (!part.empty() && part.back() == '=') part.remove_suffix(1);  // padding, if sent
  return real::base64_decode(part, real::Base64::url);
}

Error invalid(const std::string& why) {
  return make_error(Errc::bad_request, why);
}

}  // namespace

bool TokenClaims::reaches(Access level) const {
  switch (level) {
    case Access::read_only:
      return admin || read_write || read_only;
    case Access::write_only:
      return admin || read_write || write_only;
    case Access::read_write:
      return admin || read_write;
    case Access::admin:
      return admin;
  }
  return false;
}

Result<std::shared_ptr<const Authenticator>> Authenticator::create(AuthSettings settings) {
  std::string alg = settings.algorithm;
  if (lower(alg) == "auto") alg = "auto";
  if (lower(alg) == "eddsa") alg = "EdDSA";
  if (alg.size() == 5 && alg != "EdDSA")
    for (char& c : alg) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const Algorithm* fixed = find_algorithm(alg);
  if (fixed == nullptr && alg != "auto") {
    return make_error(Errc::bad_request,
                      "JWT_ALGORITHM=" + settings.algorithm +
                          " is not one of HS256, HS384, HS512, RS256, RS384, RS512, EdDSA, auto");
  }
  settings.algorithm = alg;
  std::shared_ptr<Authenticator> auth(new Authenticator(std::move(settings)));
  const AuthSettings& s = auth->settings_;
  if (!s.public_key_pem.empty()) {
    auth->key_ = parse_public_key(s.public_key_pem);
    if (auth->key_ == nullptr) {
      return make_error(Errc::bad_request,
                        "JWT_PUBLIC_KEY is not a PEM public key (or certificate) OpenSSL can read");
    }
  }
  if (!s.jwks.url.empty()) {
    auth->jwks_ = std::make_unique<JwksCache>(s.jwks);
    Status started = auth->jwks_->start();
    if (!started.ok()) {
      return make_error(Errc::bad_request,
                        "JWT_JWKS_URL=" + s.jwks.url + ": " + started.error().message);
    }
  }
  if (fixed != nullptr && fixed->kind == KeyKind::hmac && s.secret.empty())
    return make_error(Errc::bad_request, "JWT_ALGORITHM=" + alg + " needs JWT_SECRET");
  if (fixed != nullptr && fixed->kind != KeyKind::hmac && auth->jwks_) {
    if (!auth->has_key_for(static_cast<int>(fixed->kind))) {
      return make_error(Errc::bad_request,
                        "neither JWT_PUBLIC_KEY nor the JWKS at JWT_JWKS_URL "
                        "has a key for JWT_ALGORITHM=" +
                            alg);
    }
  } else if (fixed != nullptr && fixed->kind != KeyKind::hmac) {
    if (auth->key_ == nullptr) {
      return make_error(Errc::bad_request,
                        "JWT_ALGORITHM=" + alg + " needs JWT_PUBLIC_KEY or JWT_JWKS_URL");
    }
    if (!key_fits(auth->key_, fixed->kind)) {
      return make_error(Errc::bad_request,
                        "JWT_PUBLIC_KEY is not a key for JWT_ALGORITHM=" + alg +
                            (fixed->kind == KeyKind::rsa ? " (an RSA key)" : " (an Ed25519 key)"));
    }
  }
  if (fixed == nullptr && s.secret.empty() && auth->key_ == nullptr && !auth->jwks_) {
    return make_error(Errc::bad_request,
                      "JWT_ALGORITHM=auto needs JWT_SECRET, JWT_PUBLIC_KEY or JWT_JWKS_URL");
  }
  return std::shared_ptr<const Authenticator>(std::move(auth));
}

Authenticator::~Authenticator() {
  if (key_ != nullptr) EVP_PKEY_free(key_);
  OPENSSL_cleanse(settings_.secret.data(), settings_.secret.size());
}

bool Authenticator::skipped(std::string_view path) const {
  for (const std::string& p : settings_.skip_paths) {
    if (path == p) return true;
    if (p.size() > 1 && p.back() == '/' && starts_with(path, p)) return true;
  }
  return false;
}

bool Authenticator::has_key_for(int kind) const {
  auto k = static_cast<KeyKind>(kind);
  return key_fits(key_, k) || (jwks_ && jwks_->has(fits_of(k)));
}

bool Authenticator::signature_ok(const std::string& alg, const std::string& kid,
                                 std::string_view input, std::string_view sig) const {
  const Algorithm* a = find_algorithm(alg);
  if (a == nullptr) return false;
  const auto* data = reinterpret_cast<const unsigned char*>(input.data());
  const auto* sig_bytes = reinterpret_cast<const unsigned char*>(sig.data());
  if (a->kind == KeyKind::hmac) {
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int mac_len = 0;
    if (HMAC(a->md(), settings_.secret.data(), static_cast<int>(settings_.secret.size()), data,
             input.size(), mac, &mac_len) == nullptr) {
      return false;
    }
    return mac_len == sig.size() && CRYPTO_memcmp(mac, sig_bytes, mac_len) == 0;
  }
  PublicKey from_set = jwks_ ? jwks_->find(kid, fits_of(a->kind)) : PublicKey();
  evp_pkey_st* key = from_set ? from_set.get() : key_;
  if (!key_fits(key, a->kind)) return false;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (ctx == nullptr) return false;
  bool ok = EVP_DigestVerifyInit(ctx, nullptr, a->md(), nullptr, key) == 1 &&
            EVP_DigestVerify(ctx, sig_bytes, sig.size(), data, input.size()) == 1;
  EVP_MD_CTX_free(ctx);
  return ok;
}

Result<TokenClaims> Authenticator::verify(std::string_view token, int64_t now_s) const {
  size_t dot1 = token.find('.');
  size_t dot2 = dot1 == std::string_view::npos ? dot1 : token.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos || token.find('.', dot2 + 1) != std::string_view::npos)
    return invalid("malformed token (not three dot-separated parts)");
  auto header_text = decode_part(token.substr(0, dot1));
  auto payload_text = decode_part(token.substr(dot1 + 1, dot2 - dot1 - 1));
  auto sig = decode_part(token.substr(dot2 + 1));
  if (!header_text || !payload_text || !sig) return invalid("malformed token (not base64url)");
  json header = json::parse(*header_text, nullptr, /*allow_exceptions=*/false);
  if (!header.is_object() || !header.contains("alg") || !header["alg"].is_string())
    return invalid("malformed token header");
  if (header.contains("crit")) return invalid("unsupported critical header parameters");
  std::string alg = header["alg"].get<std::string>();
  const Algorithm* a = find_algorithm(alg);
  if (a == nullptr) return invalid("unsupported algorithm " + alg);
  bool accepted = settings_.algorithm == "auto"
                      ? (a->kind == KeyKind::hmac ? !settings_.secret.empty()
                                                  : has_key_for(static_cast<int>(a->kind)))
                      : alg == settings_.algorithm;
  if (!accepted) return invalid("algorithm " + alg + " is not accepted");
  std::string kid = header.contains("kid") && header["kid"].is_string()
                        ? header["kid"].get<std::string>()
                        : std::string();
  if (!signature_ok(alg, kid, token.substr(0, dot2), *sig)) return invalid("invalid signature");

  json claims = json::parse(*payload_text, nullptr, /*allow_exceptions=*/false);
  if (!claims.is_object()) return invalid("malformed token claims");
  int64_t skew_s = settings_.clock_skew_s;
  if (claims.contains("exp")) {
    if (!claims["exp"].is_number()) return invalid("exp is not a number");
    if (static_cast<double>(now_s) >= claims["exp"].get<double>() + static_cast<double>(skew_s))
      return invalid("token expired");
  }
  if (claims.contains("nbf")) {
    if (!claims["nbf"].is_number()) return invalid("nbf is not a number");
    if (static_cast<double>(now_s + skew_s) < claims["nbf"].get<double>())
      return invalid("token not yet valid");
  }
  if (!settings_.issuer.empty()) {
    auto it = claims.find("iss");
    if (it == claims.end() || !it->is_string() || *it != settings_.issuer)
      return invalid("unexpected issuer");
  }
  if (!settings_.audience.empty()) {
    auto it = claims.find("aud");
    bool match = false;
    if (it != claims.end() && it->is_string()) match = *it == settings_.audience;
    if (it != claims.end() && it->is_array())
      match = std::any_of(it->begin(), it->end(),
                          [&](const json& v) { return v.is_string() && v == settings_.audience; });
    if (!match) return invalid("unexpected audience");
  }

  TokenClaims out;
  if (auto it = claims.find("sub"); it != claims.end() && it->is_string()) out.subject = *it;
  auto grant = [&](const json& v) {
    if (!v.is_string()) return;
    const std::string& role = v.get_ref<const std::string&>();
    out.admin |= role == settings_.role_admin;
    out.read_write |= role == settings_.role_read_write;
    out.read_only |= role == settings_.role_read_only;
    out.write_only |= role == settings_.role_write_only;
  };
  for (const std::string* name : {&settings_.roles_claim, &settings_.roles_array_claim}) {
    auto it = claims.find(*name);
    if (it == claims.end()) continue;
    if (it->is_array()) {
      for (const json& v : *it) grant(v);
    } else {
      grant(*it);
    }
  }
  return out;
}

std::optional<HttpAnswer> Authenticator::check(std::string_view method, std::string_view target,
                                               std::string_view authorization, int64_t now_s,
                                               std::string* subject) const {
  if (method == "OPTIONS") return std::nullopt;
  std::string_view path = target.substr(0, target.find('?'));
  if (skipped(path)) return std::nullopt;
  std::string_view token = trim(authorization);
  if (token.size() >= 7 && lower(token.substr(0, 7)) == "bearer ") token = trim(token.substr(7));
  if (token.empty()) return error_answer(401, "unauthorized", "Authentication required");
  auto claims = verify(token, now_s);
  if (!claims.ok())
    return error_answer(401, "unauthorized", "Invalid token: " + claims.error().message);
  if (!claims.value().reaches(access_for(method, path)))
    return error_answer(403, "forbidden", "Insufficient permissions");
  if (subject) *subject = claims.value().subject;
  return std::nullopt;
}

Result<std::shared_ptr<const Authenticator>> load_authenticator(const EnvLookup& lookup) {
  auto get = [&](const char* name) -> std::optional<std::string> {
    auto v = lookup(name);
    if (!v || v->empty()) return std::nullopt;
    return v;
  };
  auto enabled_text = get("JWT_ENABLED");
  if (!enabled_text) return std::shared_ptr<const Authenticator>();
  auto enabled = parse_bool(*enabled_text);
  if (!enabled) {
    return make_error(Errc::bad_request, "JWT_ENABLED=" + *enabled_text +
                                             " is not a boolean (true/false, 1/0, yes/no, on/off)");
  }
  if (!*enabled) return std::shared_ptr<const Authenticator>();

  AuthSettings s;
  if (auto v = get("JWT_ALGORITHM")) s.algorithm = *v;
  if (auto v = get("JWT_SECRET")) s.secret = *v;
  if (auto v = get("JWT_PUBLIC_KEY")) {
    // A PEM key in one line of an environment file has its line breaks written as \n.
    std::string pem;
    for (size_t i = 0; i < v->size(); ++i) {
      if ((*v)[i] == '\\' && i + 1 < v->size() && (*v)[i + 1] == 'n') {
        pem.push_back('\n');
        ++i;
      } else {
        pem.push_back((*v)[i]);
      }
    }
    s.public_key_pem = std::move(pem);
  }
  if (auto v = get("JWT_JWKS_URL")) s.jwks.url = *v;
  for (auto [name, slot] : {std::pair{"JWT_JWKS_REFRESH_INTERVAL", &s.jwks.refresh_s},
                            std::pair{"JWT_JWKS_TIMEOUT_MS", &s.jwks.timeout_ms}}) {
    auto v = get(name);
    if (!v) continue;
    int64_t n = 0;
    auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
    if (ec != std::errc() || end != v->data() + v->size() || n <= 0)
      return make_error(Errc::bad_request,
                        std::string(name) + "=" + *v + " is not a positive integer");
    *slot = n;
  }
  if (auto v = get("JWT_ISSUER")) s.issuer = *v;
  if (auto v = get("JWT_AUDIENCE")) s.audience = *v;
  if (auto v = get("JWT_CLOCK_SKEW")) {
    int64_t skew = 0;
    auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), skew);
    if (ec == std::errc() && end == v->data() + v->size() && skew >= 0) {
      s.clock_skew_s = skew;
    } else {
      real::log_line(LogLevel::warn, "config",
                     "JWT_CLOCK_SKEW=" + *v + " ignored: not a non-negative number of seconds");
    }
  }
  if (auto v = get("JWT_SKIP_PATHS")) {
    s.skip_paths.clear();
    std::string_view rest = *v;
    while (!rest.empty()) {
      size_t comma = rest.find(',');
      std::string_view item = trim(rest.substr(0, comma));
      if (!item.empty()) s.skip_paths.emplace_back(item);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
  }
  if (auto v = get("JWT_ROLES_CLAIM")) s.roles_claim = *v;
  if (auto v = get("JWT_ROLES_ARRAY_CLAIM")) s.roles_array_claim = *v;
  if (auto v = get("JWT_ROLE_ADMIN")) s.role_admin = *v;
  if (auto v = get("JWT_ROLE_READ_WRITE")) s.role_read_write = *v;
  if (auto v = get("JWT_ROLE_READ_ONLY")) s.role_read_only = *v;
  if (auto v = get("JWT_ROLE_WRITE_ONLY")) s.role_write_only = *v;
  std::string algorithm = s.algorithm;
  auto auth = Authenticator::create(std::move(s));
  if (auth.ok())
    real::log_line(LogLevel::info, "config", "JWT authentication on (" + algorithm + ")");
  return auth;
}

}  // namespace queen::server
