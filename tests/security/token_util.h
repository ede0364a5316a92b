// Test keys and tokens: RSA and EC key pairs made with OpenSSL, JWTs signed with libjwt, and
// the hand-made ones no honest library signs (alg none, algorithm confusion).
#pragma once

#include <jwt.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <chrono>
#include <cstdlib>
#include <string>

namespace feed::test {

struct KeyPair {
  std::string private_pem;
  std::string public_pem;
};

inline std::string BioText(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  std::string text(data, static_cast<size_t>(n));
  BIO_free(bio);
  return text;
}

// rsa: RSA 2048, else EC P-256.
inline KeyPair MakeKeyPair(bool rsa) {
  EVP_PKEY* key = rsa ? EVP_RSA_gen(2048) : EVP_EC_gen("P-256");
  BIO* priv = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(priv, key, nullptr, nullptr, 0, nullptr, nullptr);
  BIO* pub = BIO_new(BIO_s_mem());
  PEM_write_bio_PUBKEY(pub, key);
  EVP_PKEY_free(key);
  return {BioText(priv), BioText(pub)};
}

inline int64_t Now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A token signed with `alg` and `key`, with the claims given as a JSON object.
inline std::string SignJwt(jwt_alg_t alg, const std::string& key, const std::string& claims_json) {
  jwt_t* jwt = nullptr;
  jwt_new(&jwt);
  jwt_set_alg(jwt, alg, reinterpret_cast<const unsigned char*>(key.data()),
              static_cast<int>(key.size()));
  jwt_add_grants_json(jwt, claims_json.c_str());
  char* text = jwt_encode_str(jwt);
  std::string token = text != nullptr ? text : "";
  free(text);  // NOLINT: libjwt allocates with malloc
  jwt_free(jwt);
  return token;
}

inline std::string Base64Url(const std::string& data) {
  static const char* kChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  size_t i = 0;
  for (; i + 2 < data.size(); i += 3) {
    uint32_t n = (uint8_t(data[i]) << 16) | (uint8_t(data[i + 1]) << 8) | uint8_t(data[i + 2]);
    out += kChars[(n >> 18) & 63];
    out += kChars[(n >> 12) & 63];
    out += kChars[(n >> 6) & 63];
    out += kChars[n & 63];
  }
  if (i + 1 == data.size()) {
    uint32_t n = uint8_t(data[i]) << 16;
    out += kChars[(n >> 18) & 63];
    out += kChars[(n >> 12) & 63];
  } else if (i + 2 == data.size()) {
    uint32_t n = (uint8_t(data[i]) << 16) | (uint8_t(data[i + 1]) << 8);
    out += kChars[(n >> 18) & 63];
    out += kChars[(n >> 12) & 63];
    out += kChars[(n >> 6) & 63];
  }
  return out;
}

// An unsigned token (`alg: none`), as an attacker would write it.
inline std::string UnsignedJwt(const std::string& claims_json) {
  return Base64Url(R"({"alg":"none","typ":"JWT"})") + "." + Base64Url(claims_json) + ".";
}

// Claims valid now: sub, exp in an hour, the given scopes and extra fields.
inline std::string Claims(const std::string& sub, const std::string& scope,
                          const std::string& extra = "", int64_t exp_offset_s = 3600) {
  std::string json = "{\"sub\":\"" + sub + "\",\"exp\":" + std::to_string(Now() + exp_offset_s);
  if (!scope.empty()) json += ",\"scope\":\"" + scope + "\"";
  if (!extra.empty()) json += "," + extra;
  return json + "}";
}

}  // namespace feed::test
