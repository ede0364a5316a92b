#include "security/static_tokens.h"

#include <openssl/sha.h>

#include <algorithm>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "fmt/format.h"
#include "security/scope_table.h"

namespace feed::security {

std::string Sha256(std::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof digest);
}

absl::StatusOr<StaticTokens> StaticTokens::Parse(std::string_view text) {
  StaticTokens tokens;
  int line_number = 0;
  for (absl::string_view raw : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    ++line_number;
    absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty() || line.front() == '#') continue;
    std::vector<std::string> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() < 3) {
      return absl::InvalidArgumentError(fmt::format(
          "line {}: expected 'TOKEN SUBJECT SCOPE...' (at least one scope)", line_number));
    }
    Principal p;
    p.subject = std::string(fields[1]);
    for (size_t i = 2; i < fields.size(); ++i) {
      if (std::find(kKnownScopes.begin(), kKnownScopes.end(), fields[i]) == kKnownScopes.end()) {
        return absl::InvalidArgumentError(
            fmt::format("line {}: unknown scope '{}'", line_number, fields[i]));
      }
      p.scopes.emplace_back(fields[i]);
    }
    std::string_view key = fields[0];
    if (key.starts_with("mtls:")) {
      key.remove_prefix(5);
      if (key.empty()) {
        return absl::InvalidArgumentError(
            fmt::format("line {}: empty mtls: identity", line_number));
      }
      p.method = "mtls";
      p.tls_identity = std::string(key);
      if (!tokens.identities_
               .emplace(std::string(key), std::make_shared<const Principal>(std::move(p)))
               .second) {
        return absl::InvalidArgumentError(
            fmt::format("line {}: identity listed twice", line_number));
      }
      continue;
    }
    if (key.size() < 16) {
      return absl::InvalidArgumentError(
          fmt::format("line {}: token shorter than 16 characters", line_number));
    }
    p.method = "token";
    if (!tokens.tokens_.emplace(Sha256(key), std::make_shared<const Principal>(std::move(p)))
             .second) {
      return absl::InvalidArgumentError(fmt::format("line {}: token listed twice", line_number));
    }
  }
  return tokens;
}

std::shared_ptr<const Principal> StaticTokens::FindToken(std::string_view token) const {
  auto it = tokens_.find(Sha256(token));
  return it == tokens_.end() ? nullptr : it->second;
}

std::shared_ptr<const Principal> StaticTokens::FindIdentity(std::string_view identity) const {
  auto it = identities_.find(std::string(identity));
  return it == identities_.end() ? nullptr : it->second;
}

}  // namespace feed::security
