#include "security/scope_table.h"

#include <algorithm>

#include "feed/auth/v1/auth.pb.h"
#include "fmt/format.h"

namespace feed::security {

std::string RequiredScope(const google::protobuf::MethodDescriptor& method) {
  return method.options().GetExtension(feed::auth::v1::required_scope);
}

absl::StatusOr<ScopeTable> ScopeTable::FromServices(const std::vector<std::string>& services) {
  ScopeTable table;
  const auto* pool = google::protobuf::DescriptorPool::generated_pool();
  for (const std::string& name : services) {
    const auto* service = pool->FindServiceByName(name);
    if (service == nullptr) {
      return absl::InvalidArgumentError(fmt::format("service {} is not linked in", name));
    }
    for (int i = 0; i < service->method_count(); ++i) {
      const auto* method = service->method(i);
      std::string full = fmt::format("{}/{}", service->full_name(), method->name());
      std::string scope = RequiredScope(*method);
      if (scope.empty()) {
        return absl::InvalidArgumentError(fmt::format(
            "{} declares no (feed.auth.v1.required_scope): every served method needs one", full));
      }
      if (std::find(kKnownScopes.begin(), kKnownScopes.end(), scope) == kKnownScopes.end()) {
        return absl::InvalidArgumentError(
            fmt::format("{} requires the unknown scope '{}'", full, scope));
      }
      table.scopes_.emplace(std::move(full), std::move(scope));
    }
  }
  return table;
}

const std::string* ScopeTable::Find(std::string_view method) const {
  auto it = scopes_.find(method);
  return it == scopes_.end() ? nullptr : &it->second;
}

}  // namespace feed::security
