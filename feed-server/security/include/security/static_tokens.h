// The static token file, for setups without a token issuer. One entry per line:
//
//   # comment
//   TOKEN               SUBJECT        SCOPE [SCOPE...]
//   mtls:IDENTITY       SUBJECT        SCOPE [SCOPE...]
//
// A `mtls:` line gives scopes to a client known by its verified certificate (identity as in
// peer_identity.h) when it sends no token. Tokens are kept as SHA-256 digests and looked up
// by digest, so neither a comparison's timing nor a memory dump shows them.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "security/principal.h"

namespace feed::security {

class StaticTokens {
 public:
  // INVALID_ARGUMENT naming the line and the problem (never the token).
  static absl::StatusOr<StaticTokens> Parse(std::string_view text);

  // Null when unknown.
  std::shared_ptr<const Principal> FindToken(std::string_view token) const;
  std::shared_ptr<const Principal> FindIdentity(std::string_view identity) const;
  size_t size() const { return tokens_.size() + identities_.size(); }

 private:
  // Shared with the calls that use them, so a call copies no scope list.
  std::unordered_map<std::string, std::shared_ptr<const Principal>> tokens_;  // key: SHA-256
  std::unordered_map<std::string, std::shared_ptr<const Principal>> identities_;
};

std::string Sha256(std::string_view data);

}  // namespace feed::security
