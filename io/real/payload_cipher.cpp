#include "io/real/payload_cipher.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <climits>
#include <memory>
#include <nlohmann/json.hpp>

#include "io/real/base64.h"

namespace queen::real {
namespace {

struct CtxFree {
  void operator()(EVP_CIPHER_CTX* ctx) const { EVP_CIPHER_CTX_free(ctx); }
};

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

const unsigned char* bytes_of(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

// One AES-256-GCM pass over `in` into `out` (resized to fit). Encrypting fills `tag`;
// decrypting checks it and fails when it does not verify.
bool gcm(bool encrypt, const PayloadKey& key, std::string_view iv, std::string_view in,
         std::string* out, unsigned char* tag) {
  if (in.size() > static_cast<size_t>(INT_MAX)) return false;
  std::unique_ptr<EVP_CIPHER_CTX, CtxFree> ctx(EVP_CIPHER_CTX_new());
  if (!ctx) return false;
  int enc = encrypt ? 1 : 0;
  if (EVP_CipherInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr, enc) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, static_cast<int>(iv.size()),
                          nullptr) != 1 ||
      EVP_CipherInit_ex(ctx.get(), nullptr, nullptr, key.data(), bytes_of(iv), enc) != 1) {
    return false;
  }
  out->assign(in.size(), '\0');
  auto* dst = reinterpret_cast<unsigned char*>(out->data());
  int len = 0;
  if (EVP_CipherUpdate(ctx.get(), dst, &len, bytes_of(in), static_cast<int>(in.size())) != 1)
    return false;
  if (!encrypt &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kPayloadTagBytes, tag) != 1) {
    return false;
  }
  int final_len = 0;
  if (EVP_CipherFinal_ex(ctx.get(), dst + len, &final_len) != 1) {
    OPENSSL_cleanse(out->data(), out->size());  // unauthenticated bytes are never handed out
    out->clear();
    return false;
  }
  out->resize(static_cast<size_t>(len + final_len));
  if (encrypt && EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kPayloadTagBytes, tag) != 1) {
    return false;
  }
  return true;
}

Error not_an_envelope(const std::string& why) {
  return make_error(Errc::corrupt, "not an encrypted payload envelope: " + why);
}

}  // namespace

std::optional<PayloadKey> parse_payload_key(std::string_view hex) {
  if (hex.size() != 2 * kPayloadKeyBytes) return std::nullopt;
  PayloadKey key{};
  for (size_t i = 0; i < kPayloadKeyBytes; ++i) {
    int hi = hex_digit(hex[2 * i]);
    int lo = hex_digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    key[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return key;
}

PayloadCipher::~PayloadCipher() {
  OPENSSL_cleanse(key_.data(), key_.size());
}

Result<std::string> PayloadCipher::seal(std::string_view plain) const {
  std::string iv(kPayloadIvBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(iv.data()), static_cast<int>(iv.size())) != 1)
    return make_error(Errc::unavailable, "the random source failed (RAND_bytes)");
  std::string cipher;
  unsigned char tag[kPayloadTagBytes];
  std::string_view nonce(iv.data(), kPayloadNonceBytes);
  if (!gcm(/*encrypt=*/true, key_, nonce, plain, &cipher, tag))
    return make_error(Errc::unavailable, "AES-256-GCM encryption failed");
  std::string tag_bytes(reinterpret_cast<const char*>(tag), kPayloadTagBytes);
  return "{\"encrypted\":\"" + base64_encode(cipher) + "\",\"iv\":\"" + base64_encode(iv) +
         "\",\"authTag\":\"" + base64_encode(tag_bytes) + "\"}";
}

Result<std::string> PayloadCipher::open(std::string_view envelope) const {
  auto doc = nlohmann::json::parse(envelope, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return not_an_envelope("not a JSON object");
  std::optional<std::string> parts[3];
  const char* names[3] = {"encrypted", "iv", "authTag"};
  for (int i = 0; i < 3; ++i) {
    auto it = doc.find(names[i]);
    if (it == doc.end() || !it->is_string())
      return not_an_envelope(std::string("no string field ") + names[i]);
    parts[i] = base64_decode(it->get_ref<const std::string&>());
    if (!parts[i]) return not_an_envelope(std::string(names[i]) + " is not base64");
  }
  const std::string& cipher = *parts[0];
  const std::string& iv = *parts[1];
  std::string tag = *parts[2];
  if (iv.size() != kPayloadIvBytes && iv.size() != kPayloadNonceBytes)
    return not_an_envelope("an iv of " + std::to_string(iv.size()) + " bytes");
  if (tag.size() != kPayloadTagBytes)
    return not_an_envelope("an authTag of " + std::to_string(tag.size()) + " bytes");
  auto* tag_bytes = reinterpret_cast<unsigned char*>(tag.data());
  std::string plain;
  std::string_view nonce(iv.data(), kPayloadNonceBytes);
  if (gcm(/*encrypt=*/false, key_, nonce, cipher, &plain, tag_bytes)) return plain;
  return make_error(Errc::corrupt,
                    "the encrypted payload does not verify (another key, or changed bytes)");
}

}  // namespace queen::real
