// How feedctl reaches the server: address, TLS (and a client certificate), bearer token,
// deadline. Every option also comes from the environment (FEEDCTL_SERVER, FEEDCTL_TLS_CA,
// FEEDCTL_TLS_CERT, FEEDCTL_TLS_KEY, FEEDCTL_TOKEN). In cluster mode a node answers a call
// for a shard it does not own UNAVAILABLE with the owner's address in `feed-shard-owner`;
// Unary() and the streams follow it, over a channel per node opened with the same options.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>

#include "absl/status/statusor.h"
#include "admin/v1/admin.grpc.pb.h"
#include "inventory/v1/inventory.grpc.pb.h"
#include "order/v1/order.grpc.pb.h"

namespace feedctl {

struct ConnectionOptions {
  std::string server = "127.0.0.1:50051";
  // PEM file of the CA that signed the server's certificate: TLS. Empty: plaintext.
  std::string tls_ca;
  // A client certificate and its key (PEM), for a server that asks for one (mutual TLS).
  std::string tls_cert, tls_key;
  // Sent as "authorization: Bearer <token>" on every call.
  std::string token;
  // Deadline of each unary call.
  int64_t timeout_ms = 10'000;
};

// One server: its channel and the three services' stubs.
struct Endpoint {
  std::string address;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<inventory::v1::InventoryService::Stub> inventory;
  std::unique_ptr<order::v1::OrderService::Stub> orders;
  std::unique_ptr<admin::v1::AdminService::Stub> admin;
};

// How many times one call follows `feed-shard-owner` (a shard moving again meanwhile).
inline constexpr int kMaxOwnerHops = 3;

// The owner a wrong-node answer names (UNAVAILABLE, trailing `feed-shard-owner`), or "".
std::string ShardOwnerNamedBy(const grpc::Status& status, const grpc::ClientContext& context);

class Connection {
 public:
  // Fails (with a message naming the file) when the CA file cannot be read.
  static absl::StatusOr<std::unique_ptr<Connection>> Open(const ConnectionOptions& options);

  // A context carrying the token; with the unary deadline unless `streaming`.
  std::unique_ptr<grpc::ClientContext> NewContext(bool streaming = false) const;
  // A context with this deadline instead (operations that scan the whole store).
  std::unique_ptr<grpc::ClientContext> NewContext(std::chrono::milliseconds deadline) const;

  // The server named by --server, and any other node (opened on first use; any thread).
  Endpoint& primary() { return *primary_; }
  Endpoint& At(const std::string& address);

  // The stubs of the server named by --server (streams and batches that route themselves).
  inventory::v1::InventoryService::Stub& inventory() { return *primary_->inventory; }
  order::v1::OrderService::Stub& orders() { return *primary_->orders; }
  admin::v1::AdminService::Stub& admin() { return *primary_->admin; }
  const ConnectionOptions& options() const { return options_; }

  // The shard map as the node named by --server reads it: shard_count 0 for a single node,
  // and for a server that cannot tell (an older one, a token without stock:read).
  inventory::v1::GetShardMapResponse ShardMap();
  // The node `map` names as `shard`'s owner; the --server node when none is known.
  Endpoint& OwnerOf(const inventory::v1::GetShardMapResponse& map, uint32_t shard);

  // A unary call (`method` of one of the three stubs) on the server named by --server, made
  // again on the owner while the answer names another node. A wrong-node answer means the
  // call did nothing, so sending it again is safe.
  template <class Stub, class Request, class Response>
  grpc::Status Unary(grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
                     const Request& request, Response* response,
                     std::optional<std::chrono::milliseconds> deadline = std::nullopt) {
    Endpoint* to = primary_;
    for (int hop = 0;; ++hop) {
      auto context = deadline ? NewContext(*deadline) : NewContext();
      grpc::Status status = (StubOf<Stub>(*to).*method)(context.get(), request, response);
      const std::string owner = ShardOwnerNamedBy(status, *context);
      if (owner.empty() || owner == to->address || hop == kMaxOwnerHops) return status;
      to = &At(owner);
    }
  }

 private:
  Connection(ConnectionOptions options, std::shared_ptr<grpc::ChannelCredentials> credentials);

  template <class Stub>
  static Stub& StubOf(Endpoint& endpoint) {
    if constexpr (std::is_same_v<Stub, inventory::v1::InventoryService::Stub>) {
      return *endpoint.inventory;
    } else if constexpr (std::is_same_v<Stub, order::v1::OrderService::Stub>) {
      return *endpoint.orders;
    } else {
      static_assert(std::is_same_v<Stub, admin::v1::AdminService::Stub>);
      return *endpoint.admin;
    }
  }

  ConnectionOptions options_;
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  // By address. At() may run on several threads at once (stock watch follows a stream per
  // shard); a map's elements stay where they are, so the references it returns stay valid.
  std::mutex endpoints_mu_;
  std::map<std::string, Endpoint> endpoints_;
  Endpoint* primary_;
};

}  // namespace feedctl
