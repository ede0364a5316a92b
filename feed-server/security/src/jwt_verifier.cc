#include "security/jwt_verifier.h"

#include <jwt.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_split.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "security/flag_file.h"

namespace feed::security {
namespace {

// Longer tokens are refused before any parsing.
constexpr size_t kMaxTokenBytes = 8192;
constexpr size_t kMinSecretBytes = 32;

struct JwtFree {
  void operator()(jwt_t* j) const { jwt_free(j); }
};
using JwtPtr = std::unique_ptr<jwt_t, JwtFree>;

absl::Status Invalid(std::string_view why) {
  return absl::UnauthenticatedError(fmt::format("invalid token: {}", why));
}

enum class Family { kNone, kHmac, kRsa, kEc, kOther };

Family FamilyOf(jwt_alg_t alg) {
  switch (alg) {
    case JWT_ALG_NONE:
      return Family::kNone;
    case JWT_ALG_HS256:
    case JWT_ALG_HS384:
    case JWT_ALG_HS512:
      return Family::kHmac;
    case JWT_ALG_RS256:
    case JWT_ALG_RS384:
    case JWT_ALG_RS512:
      return Family::kRsa;
    case JWT_ALG_ES256:
    case JWT_ALG_ES384:
    case JWT_ALG_ES512:
      return Family::kEc;
    default:
      return Family::kOther;
  }
}

// The `alg` of the token's header (its first part), or JWT_ALG_INVAL. libjwt parses a
// token without a key as `none`, so the header is read here to choose the key.
jwt_alg_t HeaderAlgorithm(std::string_view token) {
  std::string b64(token.substr(0, token.find('.')));
  if (b64.empty() || b64.size() > 2048) return JWT_ALG_INVAL;
  for (char& c : b64) {
    if (c == '-') c = '+';
    if (c == '_') c = '/';
  }
  const size_t pad = (4 - b64.size() % 4) % 4;
  if (pad == 3) return JWT_ALG_INVAL;
  b64.append(pad, '=');
  std::string raw(b64.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(raw.data()),
                                reinterpret_cast<const unsigned char*>(b64.data()),
                                static_cast<int>(b64.size()));
  if (n < 0) return JWT_ALG_INVAL;
  raw.resize(static_cast<size_t>(n) - pad);
  nlohmann::json header = nlohmann::json::parse(raw, nullptr, /*allow_exceptions=*/false);
  if (!header.is_object()) return JWT_ALG_INVAL;
  auto alg = header.find("alg");
  if (alg == header.end() || !alg->is_string()) return JWT_ALG_INVAL;
  return jwt_str_alg(alg->get_ref<const std::string&>().c_str());
}

bool AudienceMatches(const nlohmann::json& aud, const std::string& want) {
  if (aud.is_string()) return aud.get<std::string>() == want;
  if (!aud.is_array()) return false;
  return std::any_of(aud.begin(), aud.end(),
                     [&](const nlohmann::json& a) { return a.is_string() && a == want; });
}

absl::Status AddScopes(const nlohmann::json& claims, std::vector<std::string>* scopes) {
  if (auto it = claims.find("scope"); it != claims.end()) {
    if (!it->is_string()) return Invalid("scope claim is not a string");
    for (absl::string_view s :
         absl::StrSplit(it->get_ref<const std::string&>(), ' ', absl::SkipEmpty())) {
      scopes->emplace_back(std::string(s));
    }
  }
  if (auto it = claims.find("scp"); it != claims.end()) {
    if (it->is_string()) {
      for (absl::string_view s :
           absl::StrSplit(it->get_ref<const std::string&>(), ' ', absl::SkipEmpty())) {
        scopes->emplace_back(std::string(s));
      }
    } else if (it->is_array()) {
      for (const auto& s : *it) {
        if (!s.is_string()) return Invalid("scp claim holds a non-string");
        scopes->push_back(s.get<std::string>());
      }
    } else {
      return Invalid("scp claim is neither an array nor a string");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<const JwtKeys>> JwtKeys::Load(const JwtOptions& options) {
  std::string secret;
  std::string pem;
  bool rsa = false;
  if (!options.hs_secret_file.empty()) {
    auto text = ReadFlagFile(options.hs_secret_file, "--auth-jwt-hs-secret-file");
    if (!text.ok()) return text.status();
    secret = std::move(*text);
    while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
    if (secret.size() < kMinSecretBytes) {
      return absl::InvalidArgumentError(
          fmt::format("--auth-jwt-hs-secret-file: the secret is {} bytes; at least {} are needed",
                      secret.size(), kMinSecretBytes));
    }
  }
  if (!options.public_key_file.empty()) {
    auto text = ReadFlagFile(options.public_key_file, "--auth-jwt-public-key-file");
    if (!text.ok()) return text.status();
    pem = std::move(*text);
    BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    EVP_PKEY* key = PEM_read_bio_PUBKEY(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    if (key == nullptr) {
      return absl::InvalidArgumentError(fmt::format(
          "--auth-jwt-public-key-file: '{}' holds no PEM public key", options.public_key_file));
    }
    const int type = EVP_PKEY_get_base_id(key);
    EVP_PKEY_free(key);
    if (type != EVP_PKEY_RSA && type != EVP_PKEY_EC) {
      return absl::InvalidArgumentError(
          fmt::format("--auth-jwt-public-key-file: '{}' is neither an RSA nor an EC key",
                      options.public_key_file));
    }
    rsa = type == EVP_PKEY_RSA;
  }
  return FromMaterial(std::move(secret), std::move(pem), rsa);
}

std::shared_ptr<const JwtKeys> JwtKeys::FromMaterial(std::string hs_secret, std::string public_pem,
                                                     bool public_is_rsa) {
  auto keys = std::make_shared<JwtKeys>();
  keys->hs_secret_ = std::move(hs_secret);
  keys->public_pem_ = std::move(public_pem);
  keys->public_is_rsa_ = public_is_rsa;
  return keys;
}

absl::StatusOr<Principal> VerifyJwt(const JwtKeys& keys, const JwtOptions& options,
                                    std::string_view token, int64_t now_s) {
  if (token.size() > kMaxTokenBytes) {
    return Invalid(fmt::format("longer than {} bytes", kMaxTokenBytes));
  }
  if (std::count(token.begin(), token.end(), '.') != 2 ||
      token.find('\0') != std::string_view::npos) {
    return Invalid("not a JWT (three dot-separated parts)");
  }
  const std::string text(token);
  const jwt_alg_t alg = HeaderAlgorithm(token);
  if (alg == JWT_ALG_INVAL) return Invalid("malformed header (no known alg)");
  jwt_t* raw = nullptr;
  const std::string* key = nullptr;
  switch (FamilyOf(alg)) {
    case Family::kHmac:
      if (!keys.hs_secret().empty()) key = &keys.hs_secret();
      break;
    case Family::kRsa:
      if (!keys.public_pem().empty() && keys.public_is_rsa()) key = &keys.public_pem();
      break;
    case Family::kEc:
      if (!keys.public_pem().empty() && !keys.public_is_rsa()) key = &keys.public_pem();
      break;
    case Family::kNone:
      return Invalid("algorithm 'none' is never accepted");
    case Family::kOther:
      break;
  }
  if (key == nullptr) {
    return Invalid(fmt::format("algorithm {} is not accepted (no key of its kind is configured)",
                               jwt_alg_str(alg)));
  }
  if (jwt_decode(&raw, text.c_str(), reinterpret_cast<const unsigned char*>(key->data()),
                 static_cast<int>(key->size())) != 0 ||
      raw == nullptr) {
    return Invalid("signature does not verify");
  }
  JwtPtr jwt(raw);
  if (jwt_get_alg(jwt.get()) != alg) return Invalid("algorithm mismatch");

  char* json = jwt_get_grants_json(jwt.get(), nullptr);
  if (json == nullptr) return Invalid("no claims");
  nlohmann::json claims = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  free(json);  // NOLINT: allocated by libjwt with malloc
  if (!claims.is_object()) return Invalid("claims are not a JSON object");

  auto exp = claims.find("exp");
  if (exp == claims.end() || !exp->is_number()) return Invalid("no exp claim");
  if (exp->get<double>() + static_cast<double>(options.leeway_s) <= static_cast<double>(now_s)) {
    return Invalid("expired");
  }
  if (auto nbf = claims.find("nbf"); nbf != claims.end()) {
    if (!nbf->is_number()) return Invalid("nbf claim is not a number");
    if (nbf->get<double>() > static_cast<double>(now_s + options.leeway_s)) {
      return Invalid("not valid yet (nbf)");
    }
  }
  if (!options.issuer.empty()) {
    auto iss = claims.find("iss");
    if (iss == claims.end() || !iss->is_string() || *iss != options.issuer) {
      return Invalid("issuer is not the expected one (--auth-jwt-issuer)");
    }
  }
  if (!options.audience.empty()) {
    auto aud = claims.find("aud");
    if (aud == claims.end() || !AudienceMatches(*aud, options.audience)) {
      return Invalid("audience does not include the expected one (--auth-jwt-audience)");
    }
  }
  auto sub = claims.find("sub");
  if (sub == claims.end() || !sub->is_string() || sub->get_ref<const std::string&>().empty()) {
    return Invalid("no sub claim");
  }
  Principal principal;
  principal.subject = sub->get<std::string>();
  principal.method = "jwt";
  principal.expires_at_s = static_cast<int64_t>(exp->get<double>()) + options.leeway_s;
  if (absl::Status s = AddScopes(claims, &principal.scopes); !s.ok()) return s;
  return principal;
}

}  // namespace feed::security
