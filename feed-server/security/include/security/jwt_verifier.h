// Signed JWTs (RFC 7519) through libjwt: the key is chosen by the token's algorithm family
// before verifying, so a token can only be checked with a key of its own kind (an HS256
// token is never checked against the RSA public key: the algorithm-confusion attack), and
// `none` is refused. Claims: `exp` required, `nbf` when present (both with the leeway),
// `iss` and `aud` when configured, `sub` required; scopes from `scope` (space-separated)
// and/or `scp` (an array of strings).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "security/options.h"
#include "security/principal.h"

namespace feed::security {

// The verification keys, loaded from the files of JwtOptions. Immutable once loaded.
class JwtKeys {
 public:
  // INVALID_ARGUMENT naming the file and the problem (never its contents).
  static absl::StatusOr<std::shared_ptr<const JwtKeys>> Load(const JwtOptions& options);
  static std::shared_ptr<const JwtKeys> FromMaterial(std::string hs_secret, std::string public_pem,
                                                     bool public_is_rsa);

  const std::string& hs_secret() const { return hs_secret_; }
  const std::string& public_pem() const { return public_pem_; }
  bool public_is_rsa() const { return public_is_rsa_; }

 private:
  std::string hs_secret_;
  std::string public_pem_;
  bool public_is_rsa_ = false;
};

// UNAUTHENTICATED with the reason (expired, wrong issuer, bad signature...), never the
// token. `now_s`: seconds since the epoch.
absl::StatusOr<Principal> VerifyJwt(const JwtKeys& keys, const JwtOptions& options,
                                    std::string_view token, int64_t now_s);

}  // namespace feed::security
