#include "connection.h"

#include <fstream>
#include <sstream>

#include "fmt/format.h"

namespace feedctl {

absl::StatusOr<std::unique_ptr<Connection>> Connection::Open(const ConnectionOptions& options) {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  auto read = [](const std::string& path, const char* flag) -> absl::StatusOr<std::string> {
    std::ifstream in(path);
    std::stringstream pem;
    pem << in.rdbuf();
    if (!in || pem.str().empty()) {
      return absl::InvalidArgumentError(
          fmt::format("{}: cannot read a PEM file at '{}'", flag, path));
    }
    return pem.str();
  };
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (!options.tls_cert.empty() && options.tls_ca.empty()) {
    return absl::InvalidArgumentError("--tls-cert needs --tls-ca (TLS)");
  }
  if (options.tls_ca.empty()) {
    credentials = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    auto ca = read(options.tls_ca, "--tls-ca");
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *ca;
    if (!options.tls_cert.empty()) {
      auto cert = read(options.tls_cert, "--tls-cert");
      if (!cert.ok()) return cert.status();
      auto key = read(options.tls_key, "--tls-key");
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *cert;
      ssl.pem_private_key = *key;
    }
    credentials = grpc::SslCredentials(ssl);
  }
  return std::unique_ptr<Connection>(new Connection(options, std::move(credentials)));
}

Connection::Connection(ConnectionOptions options,
                       std::shared_ptr<grpc::ChannelCredentials> credentials)
    : options_(std::move(options)), credentials_(std::move(credentials)) {
  primary_ = &At(options_.server);
}

Endpoint& Connection::At(const std::string& address) {
  std::lock_guard lock(endpoints_mu_);
  auto [it, inserted] = endpoints_.try_emplace(address);
  Endpoint& endpoint = it->second;
  if (inserted) {
    endpoint.address = address;
    endpoint.channel = grpc::CreateChannel(address, credentials_);
    endpoint.inventory = inventory::v1::InventoryService::NewStub(endpoint.channel);
    endpoint.orders = order::v1::OrderService::NewStub(endpoint.channel);
    endpoint.admin = admin::v1::AdminService::NewStub(endpoint.channel);
  }
  return endpoint;
}

inventory::v1::GetShardMapResponse Connection::ShardMap() {
  inventory::v1::GetShardMapResponse map;
  if (!Unary(&inventory::v1::InventoryService::Stub::GetShardMap,
             inventory::v1::GetShardMapRequest(), &map)
           .ok()) {
    map.Clear();
  }
  return map;
}

Endpoint& Connection::OwnerOf(const inventory::v1::GetShardMapResponse& map, uint32_t shard) {
  if (shard < static_cast<uint32_t>(map.shards_size())) {
    const std::string& address = map.shards(static_cast<int>(shard)).address();
    if (!address.empty()) return At(address);
  }
  return *primary_;
}

std::string ShardOwnerNamedBy(const grpc::Status& status, const grpc::ClientContext& context) {
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return "";
  const auto& trailers = context.GetServerTrailingMetadata();
  auto it = trailers.find("feed-shard-owner");
  return it == trailers.end() ? "" : std::string(it->second.data(), it->second.size());
}

std::unique_ptr<grpc::ClientContext> Connection::NewContext(bool streaming) const {
  auto context = std::make_unique<grpc::ClientContext>();
  if (!options_.token.empty()) context->AddMetadata("authorization", "Bearer " + options_.token);
  if (!streaming) {
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::milliseconds(options_.timeout_ms));
  }
  return context;
}

std::unique_ptr<grpc::ClientContext> Connection::NewContext(
    std::chrono::milliseconds deadline) const {
  auto context = NewContext(true);
  context->set_deadline(std::chrono::system_clock::now() + deadline);
  return context;
}

}  // namespace feedctl
