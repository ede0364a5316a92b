// Who is calling, once authenticated: the subject the access log and the events record
// (as `actor`) and the scopes the authorization checks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace feed::security {

struct Principal {
  std::string subject;
  std::vector<std::string> scopes;
  // "jwt", "token" (static token file), "mtls" (client certificate), or "none"
  // (authentication off).
  std::string_view method = "none";
  // The verified client certificate's identity (peer_identity.h), empty without mTLS.
  std::string tls_identity;
  // A JWT's `exp` (seconds since the epoch); 0 for credentials that do not expire.
  int64_t expires_at_s = 0;

  bool HasScope(std::string_view scope) const {
    return std::find(scopes.begin(), scopes.end(), scope) != scopes.end();
  }
};

}  // namespace feed::security
