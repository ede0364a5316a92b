// The security options (flags --tls-*, --auth-*, README "Security"): transport encryption
// for the gRPC and HTTP ports, and who may call what.
#pragma once

#include <cstdint>
#include <string>

namespace feed::security {

// TLS for both front doors, from PEM files that are reloaded when they change.
struct TlsOptions {
  std::string cert_file;  // the server's certificate chain; empty: plaintext
  std::string key_file;
  // Set: mutual TLS; clients must present a certificate that this CA bundle verifies.
  std::string client_ca_file;
  int64_t reload_interval_ms = 5000;
  bool enabled() const { return !cert_file.empty(); }
  bool mutual() const { return !client_ca_file.empty(); }
};

struct JwtOptions {
  // HS256/HS384/HS512: the shared secret (the whole file, a trailing newline dropped;
  // at least 32 bytes).
  std::string hs_secret_file;
  // RS256/384/512 (an RSA key) or ES256/384/512 (an EC key): a PEM public key.
  std::string public_key_file;
  // When set, `iss` must equal it and `aud` (a string or an array) must contain it.
  std::string issuer;
  std::string audience;
  // Allowed clock difference for `exp` and `nbf`.
  int64_t leeway_s = 30;
  bool enabled() const { return !hs_secret_file.empty() || !public_key_file.empty(); }
};

struct AuthOptions {
  JwtOptions jwt;
  // Static tokens: `TOKEN SUBJECT SCOPE...` per line, and `mtls:IDENTITY SUBJECT SCOPE...`
  // for clients known by their certificate (static_tokens.h).
  std::string token_file;
  // Requests per second per subject (token bucket; 0: no limit) and the bucket's size.
  double rate_limit = 0;
  double rate_burst = 0;  // 0: max(rate_limit, 1)
  // How often the key and token files are checked for changes.
  int64_t reload_interval_ms = 1000;
  bool enabled() const { return jwt.enabled() || !token_file.empty(); }
};

}  // namespace feed::security
