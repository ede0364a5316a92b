#include "server_setup.h"

#include "fmt/format.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "server/logging.h"
#include "server/operations.h"

namespace feed::server {

bool IsLoopback(const std::string& address) {
  return address.starts_with("127.") || address.starts_with("localhost:") ||
         address.starts_with("[::1]:");
}

// gRPC's own TLS with a file watcher, on the validated copies of the files
// (security::StagedTlsFiles): a renewed certificate (or CA) is served without a restart,
// files that do not load keep the previous ones.
absl::StatusOr<GrpcSecurity> SetUpSecurity(const ServerConfig& config) {
  GrpcSecurity security;
  auto scopes = security::ScopeTable::FromServices(kServedServices);
  if (!scopes.ok()) return scopes.status();
  auto auth = security::Authorizer::Create(config.auth, std::move(*scopes));
  if (!auth.ok()) return auth.status();
  security.auth = std::move(*auth);
  if (config.tls.enabled()) {
    auto files = security::StagedTlsFiles::Create(config.tls);
    if (!files.ok()) return files.status();
    security.tls_files = std::move(*files);
  }
  return security;
}

std::shared_ptr<grpc::ServerCredentials> GrpcCredentials(const GrpcSecurity& security) {
  if (security.tls_files == nullptr) return grpc::InsecureServerCredentials();
  const security::TlsOptions& tls = security.tls_files->staged();
  const auto refresh_s = static_cast<unsigned>(std::max<int64_t>(1, tls.reload_interval_ms / 1000));
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      tls.key_file, tls.cert_file, tls.client_ca_file, refresh_s);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (tls.mutual()) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

// What a start without TLS or authentication exposes, said once, loudly.
void WarnAboutExposure(const ServerConfig& c) {
  if (!c.auth.enabled()) {
    ServerLog()->warn(
        "authentication is off: anyone who reaches {}{} can read and change every SKU's stock "
        "(set --auth-token-file or --auth-jwt-*; --require-secure refuses to start like this)",
        c.listen, c.http.listen.empty() ? "" : " or " + c.http.listen);
  }
  if (!c.tls.enabled()) {
    ServerLog()->warn(
        "TLS is off: calls, tokens and stock travel in plaintext (set --tls-cert-file and "
        "--tls-key-file)");
    for (const std::string* address : {&c.listen, &c.http.listen}) {
      if (!address->empty() && !IsLoopback(*address)) {
        ServerLog()->warn("{} is not a loopback address and is served without TLS", *address);
      }
    }
  }
  const bool kafka_plaintext = c.kafka.security.protocol == "plaintext" &&
                               !c.kafka.kafka_properties.count("security.protocol");
  if (!c.kafka.brokers.empty() && kafka_plaintext && !IsLoopback(c.kafka.brokers)) {
    ServerLog()->warn(
        "events go to Kafka at {} in plaintext (set --kafka-security-protocol sasl_ssl)",
        c.kafka.brokers);
  }
  if (c.cluster.shards > 0 && kafka_plaintext && !IsLoopback(c.cluster.brokers)) {
    ServerLog()->warn(
        "the shard log at {} carries every change in plaintext (set --kafka-security-protocol "
        "sasl_ssl)",
        c.cluster.brokers);
  }
  if (!c.metrics_listen.empty() && c.metrics_basic_auth_file.empty() &&
      !IsLoopback(c.metrics_listen)) {
    ServerLog()->warn("metrics on {} are served to anyone (set --metrics-basic-auth-file)",
                      c.metrics_listen);
  }
}

namespace {

// Message size, keepalive, idle and handshake limits of the config.
void ApplyTransportLimits(const ServerConfig& config, grpc::ServerBuilder& builder) {
  builder.SetMaxReceiveMessageSize(config.max_receive_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             config.max_concurrent_streams_per_connection);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                             static_cast<int>(config.keepalive_time_ms));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                             static_cast<int>(config.keepalive_timeout_ms));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             static_cast<int>(config.keepalive_min_client_ping_interval_ms));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 2);
  if (config.max_connection_idle_ms > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                               static_cast<int>(config.max_connection_idle_ms));
  }
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                             static_cast<int>(config.handshake_timeout_ms));
}

}  // namespace

absl::StatusOr<GrpcListener> StartGrpcServer(const ServerConfig& config,
                                             const GrpcSecurity& security,
                                             const std::vector<grpc::Service*>& services) {
  grpc::EnableDefaultHealthCheckService(true);
  if (config.reflection) grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(config.listen, GrpcCredentials(security), &port);
  for (grpc::Service* service : services) builder.RegisterService(service);
  ApplyTransportLimits(config, builder);
  GrpcListener listener;
  listener.server = builder.BuildAndStart();
  if (!listener.server || port == 0) {
    return absl::UnavailableError(
        fmt::format("cannot listen on {} (address in use or invalid)", config.listen));
  }
  listener.address = fmt::format("{}:{}", config.listen.substr(0, config.listen.rfind(':')), port);
  auto* health = listener.server->GetHealthCheckService();
  health->SetServingStatus(true);
  health->SetServingStatus("inventory.v1.InventoryService", true);
  health->SetServingStatus("order.v1.OrderService", true);
  return listener;
}

absl::StatusOr<MetricsEndpoint> StartMetricsEndpoint(
    const ServerConfig& config, const std::shared_ptr<prometheus::Registry>& registry) {
  MetricsEndpoint endpoint;
  try {
    endpoint.exposer = std::make_unique<prometheus::Exposer>(config.metrics_listen);
    if (!config.metrics_basic_auth_file.empty()) {
      auto auth =
          MetricsAuth::Create(config.metrics_basic_auth_file, config.auth.reload_interval_ms);
      if (!auth.ok()) return auth.status();
      endpoint.auth = std::move(*auth);
      endpoint.exposer->RegisterAuth(
          [a = endpoint.auth.get()](const std::string& user, const std::string& password) {
            return a->Check(user, password);
          },
          "feed-server metrics");
    }
    endpoint.exposer->RegisterCollectable(registry);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        fmt::format("cannot serve metrics on {}: {}", config.metrics_listen, e.what()));
  }
  return endpoint;
}

}  // namespace feed::server
