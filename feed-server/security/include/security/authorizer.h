// Authentication and authorization of one call, whatever its transport: the bearer token
// (a JWT or a static token) or the client certificate identifies the subject; the method's
// scope (ScopeTable) must be among its scopes; the subject's rate limit must allow it. Key
// and token files are reloaded when they change; a broken file keeps the previous keys and
// logs why.
//
// Thread-safe: Authorize and Charge from any thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "security/options.h"
#include "security/principal.h"
#include "security/scope_table.h"

namespace feed::security {

struct Decision {
  // OK, UNAUTHENTICATED (no or bad credentials), PERMISSION_DENIED (a scope is missing) or
  // RESOURCE_EXHAUSTED (over the subject's rate limit). The message never holds a secret.
  absl::Status status;
  // Who calls, when OK (never null then); shared with the token table or the verified-token
  // cache, so that a call copies no scope list.
  std::shared_ptr<const Principal> principal;
  // The WWW-Authenticate challenge (RFC 6750) for UNAUTHENTICATED and PERMISSION_DENIED.
  std::string challenge;
  // For RESOURCE_EXHAUSTED: seconds until a retry can succeed (at least 1).
  int64_t retry_after_s = 0;
};

class Authorizer {
 public:
  // Loads the keys and the token file (INVALID_ARGUMENT naming the flag when one is
  // unreadable or invalid) and starts watching them.
  static absl::StatusOr<std::unique_ptr<Authorizer>> Create(const AuthOptions& options,
                                                            ScopeTable scopes);
  virtual ~Authorizer() = default;

  // `authorization`: the header's value ("Bearer ..."), empty when absent; `tls_identity`:
  // the verified client certificate's identity, empty without one. With authentication off,
  // every call is allowed as the certificate's identity (or anonymously).
  virtual Decision Authorize(std::string_view method, std::string_view authorization,
                             std::string_view tls_identity) const = 0;
  // One more request by a subject already authorized (each command of a Feed stream):
  // RESOURCE_EXHAUSTED over its rate limit.
  virtual absl::Status Charge(std::string_view subject) const = 0;
  virtual bool enabled() const = 0;
  virtual const ScopeTable& scopes() const = 0;
};

}  // namespace feed::security
