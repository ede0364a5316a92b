// What both process shapes (FeedServer, a single node; ClusterServer, a cluster node) set up
// the same way: gRPC credentials, the gRPC server's transport limits, the warnings about
// what a start exposes, and the Prometheus endpoint.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "metrics_auth.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"
#include "security/authorizer.h"
#include "security/tls_files.h"
#include "server/config.h"

namespace feed::server {

bool IsLoopback(const std::string& address);

// Who may call what (the scope table of the served services) and, with TLS on, the validated
// copies of the certificate files that gRPC's file watcher serves.
struct GrpcSecurity {
  std::unique_ptr<security::Authorizer> auth;
  std::unique_ptr<security::StagedTlsFiles> tls_files;  // null: plaintext
};
absl::StatusOr<GrpcSecurity> SetUpSecurity(const ServerConfig& config);

// gRPC's own TLS with a file watcher on the staged files; plaintext without them.
std::shared_ptr<grpc::ServerCredentials> GrpcCredentials(const GrpcSecurity& security);

// What a start without TLS or authentication exposes, said once, loudly.
void WarnAboutExposure(const ServerConfig& config);

// The gRPC server on config.listen with `services`, the health service (SERVING for the
// process and the inventory and order services), reflection when configured, the transport
// limits; `address` is the "host:port" actually bound. UNAVAILABLE when it cannot listen.
struct GrpcListener {
  std::unique_ptr<grpc::Server> server;
  std::string address;
};
absl::StatusOr<GrpcListener> StartGrpcServer(const ServerConfig& config,
                                             const GrpcSecurity& security,
                                             const std::vector<grpc::Service*>& services);

// The metrics endpoint on config.metrics_listen (basic authentication with
// --metrics-basic-auth-file); UNAVAILABLE naming the address when it cannot listen.
struct MetricsEndpoint {
  std::unique_ptr<MetricsAuth> auth;
  std::unique_ptr<prometheus::Exposer> exposer;
};
absl::StatusOr<MetricsEndpoint> StartMetricsEndpoint(
    const ServerConfig& config, const std::shared_ptr<prometheus::Registry>& registry);

}  // namespace feed::server
