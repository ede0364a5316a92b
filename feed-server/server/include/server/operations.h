// The API's unary operations, free of transport types: the gRPC handlers and the HTTP
// gateway both run them, so each operation has one path to the core for validation,
// idempotency and errors. Keyed by the gRPC method name
// ("inventory.v1.InventoryService/Reserve"), which both front doors log and measure by.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "core/inventory_core.h"
#include "google/protobuf/message.h"

namespace feed::server {

// The services served (their methods are the scope table's; the HTTP gateway serves those
// with an HTTP rule, which AdminService's have not).
inline const std::vector<std::string> kServedServices = {
    "inventory.v1.InventoryService", "order.v1.OrderService", "admin.v1.AdminService"};

// What a transport adds to a request.
struct CallOptions {
  // The `idempotency-key` header (gRPC metadata, HTTP `Idempotency-Key`): used when the
  // request's own field is empty (the seed's CreateOrder contract has no such field).
  std::string idempotency_key;
  // Empty: never cancelled.
  core::CancelFn cancelled;
  // The authenticated subject (empty when authentication is off): the events' actor.
  std::string actor;
};

// Called once, with the response when the status is OK (null otherwise). Runs on the
// core's completer thread for mutations, on the caller's thread for reads; must not block.
using OperationDone = absl::AnyInvocable<void(const absl::Status& status,
                                              const google::protobuf::Message* response) &&>;

class Operation {
 public:
  using RunFn = void (*)(core::InventoryCore& core, google::protobuf::Message& request,
                         CallOptions options, OperationDone done);

  constexpr Operation(std::string_view method, bool mutation, RunFn run)
      : method_(method), mutation_(mutation), run_(run) {}

  std::string_view method() const { return method_; }
  // Mutations take an idempotency key and go through the core's writer.
  bool mutation() const { return mutation_; }
  // `request` must be of the method's request type; it is consumed.
  void Run(core::InventoryCore& core, google::protobuf::Message& request, CallOptions options,
           OperationDone done) const {
    run_(core, request, std::move(options), std::move(done));
  }

 private:
  std::string_view method_;
  bool mutation_;
  RunFn run_;
};

// The operation of a unary method; null for streams and unknown names.
const Operation* FindOperation(std::string_view method);

}  // namespace feed::server
