// JSON Web Tokens for the tests of JWT authentication (server/auth.h): signed here with
// OpenSSL, HS* with a secret and RS*/EdDSA with a key generated for the test.
#pragma once

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>

#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "io/real/base64.h"

namespace queen::test {

inline std::string b64url(const std::string& bytes) {
  return real::base64_encode(bytes, real::Base64::url);
}

inline int64_t unix_now_s() {
  return static_cast<int64_t>(std::time(nullptr));
}

// A key pair of the test; `public_pem` is what JWT_PUBLIC_KEY is given.
class TestKey {
 public:
  // "RSA" (2048 bits) or "ED25519".
  explicit TestKey(const char* type) {
    key_ = std::string(type) == "RSA" ? EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", size_t{2048})
                                      : EVP_PKEY_Q_keygen(nullptr, nullptr, type);
    if (key_ == nullptr) throw std::runtime_error("key generation failed");
    BIO* bio = BIO_new(BIO_s_mem());
    PEM_write_bio_PUBKEY(bio, key_);
    char* data = nullptr;
    long len = BIO_get_mem_data(bio, &data);
    public_pem_.assign(data, static_cast<size_t>(len));
    BIO_free(bio);
  }
  ~TestKey() { EVP_PKEY_free(key_); }
  TestKey(const TestKey&) = delete;
  TestKey& operator=(const TestKey&) = delete;

  const std::string& public_pem() const { return public_pem_; }

  // The public key as a JWK (RFC 7517) under `kid`.
  nlohmann::json jwk(const std::string& kid) const {
    if (EVP_PKEY_get_base_id(key_) == EVP_PKEY_RSA) {
      return {{"kty", "RSA"},
              {"kid", kid},
              {"use", "sig"},
              {"alg", "RS256"},
              {"n", b64url(bn_param(OSSL_PKEY_PARAM_RSA_N))},
              {"e", b64url(bn_param(OSSL_PKEY_PARAM_RSA_E))}};
    }
    std::string x(32, '\0');
    size_t len = x.size();
    EVP_PKEY_get_raw_public_key(key_, reinterpret_cast<unsigned char*>(x.data()), &len);
    x.resize(len);
    return {{"kty", "OKP"}, {"crv", "Ed25519"}, {"kid", kid}, {"x", b64url(x)}};
  }

  // The signature of `input` (md null: EdDSA).
  std::string sign(const EVP_MD* md, const std::string& input) const {
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    size_t len = 0;
    std::string sig;
    const auto* data = reinterpret_cast<const unsigned char*>(input.data());
    if (EVP_DigestSignInit(ctx, nullptr, md, nullptr, key_) == 1 &&
        EVP_DigestSign(ctx, nullptr, &len, data, input.size()) == 1) {
      sig.resize(len);
      if (EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len, data,
                         input.size()) != 1) {
        sig.clear();
      }
      sig.resize(len);
    }
    EVP_MD_CTX_free(ctx);
    if (sig.empty()) throw std::runtime_error("signing failed");
    return sig;
  }

 private:
  std::string bn_param(const char* name) const {
    BIGNUM* bn = nullptr;
    EVP_PKEY_get_bn_param(key_, name, &bn);
    std::string out(static_cast<size_t>(BN_num_bytes(bn)), '\0');
    BN_bn2bin(bn, reinterpret_cast<unsigned char*>(out.data()));
    BN_free(bn);
    return out;
  }

  EVP_PKEY* key_ = nullptr;
  std::string public_pem_;
};

inline std::string signing_input(const std::string& alg, const nlohmann::json& claims,
                                 const std::string& kid = "") {
  nlohmann::json header = {{"alg", alg}, {"typ", "JWT"}};
  if (!kid.empty()) header["kid"] = kid;
  return b64url(header.dump()) + "." + b64url(claims.dump());
}

inline std::string hs_token(const nlohmann::json& claims, const std::string& secret,
                            const std::string& alg = "HS256") {
  const EVP_MD* md = alg == "HS512" ? EVP_sha512() : alg == "HS384" ? EVP_sha384() : EVP_sha256();
  std::string input = signing_input(alg, claims);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(md, secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac, &len);
  return input + "." + b64url(std::string(reinterpret_cast<char*>(mac), len));
}

inline std::string key_token(const nlohmann::json& claims, const TestKey& key,
                             const std::string& alg = "RS256", const std::string& kid = "") {
  const EVP_MD* md = alg == "EdDSA"   ? nullptr
                     : alg == "RS512" ? EVP_sha512()
                     : alg == "RS384" ? EVP_sha384()
                                      : EVP_sha256();
  std::string input = signing_input(alg, claims, kid);
  return input + "." + b64url(key.sign(md, input));
}

// Claims for `role` valid for the next hour.
inline nlohmann::json role_claims(const std::string& role) {
  return {{"sub", "tester"}, {"role", role}, {"exp", unix_now_s() + 3600}};
}

}  // namespace queen::test
