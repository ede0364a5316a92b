#include "call_auth.h"

#include "security/peer_identity.h"

namespace feed::server {

std::string TlsIdentityOf(const grpc::ServerContextBase& ctx) {
  auto auth = ctx.auth_context();
  if (!auth || !auth->IsPeerAuthenticated()) return "";
  security::CertificateNames names;
  for (const auto& v : auth->FindPropertyValues(GRPC_PEER_URI_PROPERTY_NAME)) {
    names.uri_sans.emplace_back(v.data(), v.size());
  }
  for (const auto& v : auth->FindPropertyValues(GRPC_PEER_DNS_PROPERTY_NAME)) {
    names.dns_sans.emplace_back(v.data(), v.size());
  }
  for (const auto& v : auth->FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME)) {
    names.common_name.assign(v.data(), v.size());
    break;
  }
  return security::PeerIdentity(names);
}

security::Decision AuthorizeCall(const ServiceContext& sc, grpc::CallbackServerContext* ctx,
                                 std::string_view method) {
  std::string_view authorization;
  const auto& md = ctx->client_metadata();
  if (auto it = md.find("authorization"); it != md.end()) {
    authorization = std::string_view(it->second.data(), it->second.size());
  }
  // Only mTLS has a verified client certificate: skip the auth context otherwise.
  security::Decision d = sc.auth->Authorize(
      method, authorization, sc.config->tls.mutual() ? TlsIdentityOf(*ctx) : std::string());
  if (!d.status.ok()) {
    if (!d.challenge.empty()) ctx->AddTrailingMetadata("www-authenticate", d.challenge);
    if (d.retry_after_s > 0) {
      ctx->AddTrailingMetadata("retry-after", std::to_string(d.retry_after_s));
    }
  }
  return d;
}

}  // namespace feed::server
