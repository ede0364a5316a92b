// How feedctl reaches the server: address, TLS (and a client certificate), bearer token,
// deadline. Every option also comes from the environment (FEEDCTL_SERVER, FEEDCTL_TLS_CA,
// FEEDCTL_TLS_CERT, FEEDCTL_TLS_KEY, FEEDCTL_TOKEN).
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

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

class Connection {
 public:
  // Fails (with a message naming the file) when the CA file cannot be read.
  static absl::StatusOr<std::unique_ptr<Connection>> Open(const ConnectionOptions& options);

  // A context carrying the token; with the unary deadline unless `streaming`.
  std::unique_ptr<grpc::ClientContext> NewContext(bool streaming = false) const;
  // A context with this deadline instead (operations that scan the whole store).
  std::unique_ptr<grpc::ClientContext> NewContext(std::chrono::milliseconds deadline) const;

  inventory::v1::InventoryService::Stub& inventory() { return *inventory_; }
  order::v1::OrderService::Stub& orders() { return *orders_; }
  admin::v1::AdminService::Stub& admin() { return *admin_; }
  const ConnectionOptions& options() const { return options_; }

 private:
  Connection(ConnectionOptions options, std::shared_ptr<grpc::Channel> channel);

  ConnectionOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<inventory::v1::InventoryService::Stub> inventory_;
  std::unique_ptr<order::v1::OrderService::Stub> orders_;
  std::unique_ptr<admin::v1::AdminService::Stub> admin_;
};

}  // namespace feedctl
