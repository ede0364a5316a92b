// The scope every RPC requires, read from its (feed.auth.v1.required_scope) option
// (proto/feed/auth/v1/auth.proto): one table for the gRPC handlers, the HTTP gateway and the
// OpenAPI document. A served method without a scope, or with one outside kKnownScopes, is an
// error at start.
#pragma once

#include <array>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/descriptor.h"

namespace feed::security {

inline constexpr std::array<std::string_view, 6> kKnownScopes = {
    "stock:read", "stock:reserve", "stock:adjust", "orders:read", "orders:write", "admin"};

// The method's declared scope; empty when it declares none.
std::string RequiredScope(const google::protobuf::MethodDescriptor& method);

class ScopeTable {
 public:
  // Every method of the named services ("inventory.v1.InventoryService").
  static absl::StatusOr<ScopeTable> FromServices(const std::vector<std::string>& services);

  // The scope of "package.Service/Method"; null for a method not in the table.
  const std::string* Find(std::string_view method) const;
  // method -> scope, every method.
  const std::map<std::string, std::string, std::less<>>& entries() const { return scopes_; }

 private:
  std::map<std::string, std::string, std::less<>> scopes_;
};

}  // namespace feed::security
