// The gRPC side of security::Authorizer: a call's `authorization` metadata and its verified
// client certificate (mTLS), checked against the method's scope before anything else runs.
#pragma once

#include <string>
#include <string_view>

#include "grpcpp/grpcpp.h"
#include "security/authorizer.h"
#include "server/services.h"

namespace feed::server {

// The identity of the call's verified client certificate (security::PeerIdentity); empty
// without mTLS.
std::string TlsIdentityOf(const grpc::ServerContextBase& ctx);

// Authorizes the call. When denied, the `www-authenticate` challenge (and `retry-after`) are
// added to the call's trailing metadata and the decision's status is the one to finish with.
security::Decision AuthorizeCall(const ServiceContext& sc, grpc::CallbackServerContext* ctx,
                                 std::string_view method);

}  // namespace feed::server
