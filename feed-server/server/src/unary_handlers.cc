// Unary RPCs: parse the request bytes, run the method's operation (operations.h, shared
// with the HTTP gateway), serialize the result and finish the reactor from the operation's
// completion (on the core's completer thread; Finish does not block).
#include <atomic>
#include <memory>

#include "call_auth.h"
#include "fmt/format.h"
#include "grpc_status.h"
#include "server/logging.h"
#include "server/operations.h"
#include "server/services.h"
#include "wire.h"

namespace feed::server {
namespace {

// One unary call: finishes exactly once, logs and records it.
class UnaryCall {
 public:
  UnaryCall(const ServiceContext& sc, grpc::CallbackServerContext* ctx, std::string_view method,
            grpc::ByteBuffer* response)
      : ctx_(ctx),
        reactor_(ctx->DefaultReactor()),
        response_(response),
        record_(sc.metrics, sc.access_log, method, sc.access_log ? ctx->peer() : "") {}

  void Finish(const absl::Status& status) {
    if (finished_.exchange(true)) return;
    record_.Finish(status);
    AddShardOwnerMetadata(status, ctx_);
    reactor_->Finish(ToGrpcStatus(status));
  }
  void Reply(const absl::Status& status, const google::protobuf::Message* reply) {
    if (status.ok()) SerializeResponse(*reply, response_);
    Finish(status);
  }
  grpc::ServerUnaryReactor* reactor() const { return reactor_; }
  void set_subject(std::string subject) { record_.set_subject(std::move(subject)); }

 private:
  grpc::CallbackServerContext* ctx_;
  grpc::ServerUnaryReactor* reactor_;
  grpc::ByteBuffer* response_;  // owned by gRPC until Finish
  CallRecord record_;
  std::atomic<bool> finished_{false};
};

// What the gRPC call adds to the request: the `idempotency-key` header, cancellation and
// the acting subject.
CallOptions OptionsOf(grpc::CallbackServerContext* ctx, std::string actor) {
  CallOptions options;
  options.actor = std::move(actor);
  const auto& md = ctx->client_metadata();
  if (auto it = md.find("idempotency-key"); it != md.end()) {
    options.idempotency_key.assign(it->second.data(), it->second.size());
  }
  options.cancelled = [ctx] { return ctx->IsCancelled(); };
  return options;
}

// Parses the request bytes and hands them to `run(request, options, done)`; turns any
// exception into INTERNAL for this call only.
template <class Req, class Run>
grpc::ServerUnaryReactor* ServeWith(const ServiceContext& sc, grpc::CallbackServerContext* ctx,
                                    std::string_view method, const grpc::ByteBuffer* bytes,
                                    grpc::ByteBuffer* response, Run run) {
  auto call = std::make_shared<UnaryCall>(sc, ctx, method, response);
  grpc::ServerUnaryReactor* reactor = call->reactor();
  try {
    security::Decision decision = AuthorizeCall(sc, ctx, method);
    if (!decision.status.ok()) {
      call->Finish(decision.status);
      return reactor;
    }
    call->set_subject(decision.principal->subject);
    Req request;
    if (absl::Status parsed = ParseRequest(*bytes, &request); !parsed.ok()) {
      call->Finish(RejectUnparseable(sc, method, std::move(parsed)));
    } else {
      run(request, OptionsOf(ctx, decision.principal->subject),
          [call](const absl::Status& status, const google::protobuf::Message* reply) {
            call->Reply(status, reply);
          });
    }
  } catch (const std::exception& e) {
    ServerLog()->error("{}: unexpected exception: {}", method, e.what());
    call->Finish(absl::InternalError("internal error"));
  } catch (...) {
    ServerLog()->error("{}: unexpected non-standard exception", method);
    call->Finish(absl::InternalError("internal error"));
  }
  return reactor;
}

// A method of the operation table (operations.h, shared with the HTTP gateway).
template <class Req>
grpc::ServerUnaryReactor* Serve(const ServiceContext& sc, grpc::CallbackServerContext* ctx,
                                std::string_view method, const grpc::ByteBuffer* bytes,
                                grpc::ByteBuffer* response) {
  static const Operation* const operation = FindOperation(method);
  return ServeWith<Req>(sc, ctx, method, bytes, response,
                        [&sc, method](Req& request, CallOptions options, OperationDone done) {
                          if (sc.router == nullptr) {
                            operation->Run(*sc.core, request, std::move(options), std::move(done));
                            return;
                          }
                          auto routed = sc.router->Route(method, request);
                          if (!routed.ok()) {
                            std::move(done)(routed.status(), nullptr);
                            return;
                          }
                          // Held until the core has the call (it answers every call it took before
                          // it stops).
                          operation->Run(**routed, request, std::move(options), std::move(done));
                        });
}

// The single node's store operations, for the AdminService methods not served in cluster
// mode yet.
absl::StatusOr<admin::StoreOperations*> SingleNodeOperations(const ServiceContext& sc,
                                                             std::string_view what) {
  if (sc.router != nullptr) {
    return absl::FailedPreconditionError(
        fmt::format("{} is not served in cluster mode yet (docs/CLUSTER.md); CheckStore and "
                    "Backup are, per shard",
                    what));
  }
  if (sc.store_operations == nullptr) return absl::UnimplementedError("admin operations are off");
  return sc.store_operations;
}

// An AdminService method: `start(sc, request, done)` picks the store operations that serve
// it and runs it on their thread.
template <class Req, class Resp, class Start>
grpc::ServerUnaryReactor* ServeAdmin(const ServiceContext& sc, grpc::CallbackServerContext* ctx,
                                     std::string_view method, const grpc::ByteBuffer* bytes,
                                     grpc::ByteBuffer* response, Start start) {
  return ServeWith<Req>(
      sc, ctx, method, bytes, response,
      [&sc, start](Req& request, CallOptions, OperationDone done) {
        start(sc, request, [done = std::move(done)](absl::StatusOr<Resp> result) mutable {
          std::move(done)(result.status(), result.ok() ? &*result : nullptr);
        });
      });
}

}  // namespace

absl::Status RejectUnparseable(const ServiceContext& sc, std::string_view method,
                               absl::Status parse_error) {
  sc.metrics->UnparseableRequest(method);
  uint64_t suppressed = 0;
  if (sc.bad_request_log->Allow(&suppressed)) {
    ServerLog()->warn("{}: {} ({} more such requests since the last line)", method,
                      std::string(parse_error.message()), suppressed);
  }
  return parse_error;
}

// --- inventory.v1 ----------------------------------------------------------------------

grpc::ServerUnaryReactor* InventoryServiceImpl::GetShardMap(grpc::CallbackServerContext* ctx,
                                                            const grpc::ByteBuffer* request,
                                                            grpc::ByteBuffer* response) {
  return ServeWith<inventory::v1::GetShardMapRequest>(
      ctx_, ctx, "inventory.v1.InventoryService/GetShardMap", request, response,
      [sc = &ctx_](inventory::v1::GetShardMapRequest&, CallOptions, OperationDone done) {
        inventory::v1::GetShardMapResponse map;  // a single node: no shards
        if (sc->router != nullptr) map = sc->router->ShardMap();
        std::move(done)(absl::OkStatus(), &map);
      });
}

grpc::ServerUnaryReactor* InventoryServiceImpl::GetStock(grpc::CallbackServerContext* ctx,
                                                         const grpc::ByteBuffer* request,
                                                         grpc::ByteBuffer* response) {
  return Serve<inventory::v1::GetStockRequest>(ctx_, ctx, "inventory.v1.InventoryService/GetStock",
                                               request, response);
}

grpc::ServerUnaryReactor* InventoryServiceImpl::GetReservation(grpc::CallbackServerContext* ctx,
                                                               const grpc::ByteBuffer* request,
                                                               grpc::ByteBuffer* response) {
  return Serve<inventory::v1::GetReservationRequest>(
      ctx_, ctx, "inventory.v1.InventoryService/GetReservation", request, response);
}

grpc::ServerUnaryReactor* InventoryServiceImpl::AdjustStock(grpc::CallbackServerContext* ctx,
                                                            const grpc::ByteBuffer* request,
                                                            grpc::ByteBuffer* response) {
  return Serve<inventory::v1::AdjustStockRequest>(
      ctx_, ctx, "inventory.v1.InventoryService/AdjustStock", request, response);
}

grpc::ServerUnaryReactor* InventoryServiceImpl::BatchAdjustStock(grpc::CallbackServerContext* ctx,
                                                                 const grpc::ByteBuffer* request,
                                                                 grpc::ByteBuffer* response) {
  return Serve<inventory::v1::BatchAdjustStockRequest>(
      ctx_, ctx, "inventory.v1.InventoryService/BatchAdjustStock", request, response);
}

grpc::ServerUnaryReactor* InventoryServiceImpl::Reserve(grpc::CallbackServerContext* ctx,
                                                        const grpc::ByteBuffer* request,
                                                        grpc::ByteBuffer* response) {
  return Serve<inventory::v1::ReserveRequest>(ctx_, ctx, "inventory.v1.InventoryService/Reserve",
                                              request, response);
}

grpc::ServerUnaryReactor* InventoryServiceImpl::Commit(grpc::CallbackServerContext* ctx,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return Serve<inventory::v1::CommitRequest>(ctx_, ctx, "inventory.v1.InventoryService/Commit",
                                             request, response);
}

grpc::ServerUnaryReactor* InventoryServiceImpl::Release(grpc::CallbackServerContext* ctx,
                                                        const grpc::ByteBuffer* request,
                                                        grpc::ByteBuffer* response) {
  return Serve<inventory::v1::ReleaseRequest>(ctx_, ctx, "inventory.v1.InventoryService/Release",
                                              request, response);
}

// --- order.v1 --------------------------------------------------------------------------

grpc::ServerUnaryReactor* OrderServiceImpl::CreateOrder(grpc::CallbackServerContext* ctx,
                                                        const grpc::ByteBuffer* request,
                                                        grpc::ByteBuffer* response) {
  return Serve<order::v1::CreateOrderRequest>(ctx_, ctx, "order.v1.OrderService/CreateOrder",
                                              request, response);
}

grpc::ServerUnaryReactor* OrderServiceImpl::GetOrder(grpc::CallbackServerContext* ctx,
                                                     const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) {
  return Serve<order::v1::GetOrderRequest>(ctx_, ctx, "order.v1.OrderService/GetOrder", request,
                                           response);
}

grpc::ServerUnaryReactor* OrderServiceImpl::PayOrder(grpc::CallbackServerContext* ctx,
                                                     const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) {
  return Serve<order::v1::PayOrderRequest>(ctx_, ctx, "order.v1.OrderService/PayOrder", request,
                                           response);
}

grpc::ServerUnaryReactor* OrderServiceImpl::AdvanceOrder(grpc::CallbackServerContext* ctx,
                                                         const grpc::ByteBuffer* request,
                                                         grpc::ByteBuffer* response) {
  return Serve<order::v1::AdvanceOrderRequest>(ctx_, ctx, "order.v1.OrderService/AdvanceOrder",
                                               request, response);
}

grpc::ServerUnaryReactor* OrderServiceImpl::CancelOrder(grpc::CallbackServerContext* ctx,
                                                        const grpc::ByteBuffer* request,
                                                        grpc::ByteBuffer* response) {
  return Serve<order::v1::CancelOrderRequest>(ctx_, ctx, "order.v1.OrderService/CancelOrder",
                                              request, response);
}

// --- admin.v1 --------------------------------------------------------------------------

namespace {

// What a per-shard AdminService request (`shard` in it) runs on: the single node's store
// operations (no shard may be named), or in cluster mode this node's copy of the shard the
// request names (required; `per_shard` tells the caller how the method works per shard).
struct ShardOperations {
  admin::StoreOperations* operations;
  bool standby;  // a standby's copy: this node does not serve the shard
};
template <class Req>
absl::StatusOr<ShardOperations> OperationsOfShard(const ServiceContext& sc, const Req& r,
                                                  std::string_view method,
                                                  std::string_view per_shard) {
  if (sc.router == nullptr) {
    if (r.has_shard()) {
      return absl::InvalidArgumentError(
          "shard: this server is a single node (no shards); leave it unset");
    }
    auto ops = SingleNodeOperations(sc, method);
    if (!ops.ok()) return ops.status();
    return ShardOperations{*ops, false};
  }
  if (!r.has_shard()) {
    return absl::InvalidArgumentError(fmt::format("shard: required in cluster mode (0 to {}): {}",
                                                  sc.router->shard_count() - 1, per_shard));
  }
  auto store = sc.router->StoreOfShard(r.shard());
  if (!store.ok()) return store.status();
  return ShardOperations{store->operations, store->standby};
}

}  // namespace

grpc::ServerUnaryReactor* AdminServiceImpl::CheckStore(grpc::CallbackServerContext* ctx,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  using ::admin::v1::CheckStoreResponse;
  return ServeAdmin<::admin::v1::CheckStoreRequest, CheckStoreResponse>(
      ctx_, ctx, "admin.v1.AdminService/CheckStore", request, response,
      [](const ServiceContext& sc, const ::admin::v1::CheckStoreRequest& r,
         admin::Done<CheckStoreResponse> done) {
        auto target = OperationsOfShard(sc, r, "CheckStore",
                                        "each shard's store is audited on its own (feedctl check "
                                        "audits every shard on its owner)");
        if (!target.ok()) return std::move(done)(target.status());
        if (sc.router == nullptr) return target->operations->CheckStore(r, std::move(done));
        target->operations->CheckStore(
            r, [done = std::move(done), shard = r.shard(),
                standby = target->standby](absl::StatusOr<CheckStoreResponse> result) mutable {
              if (result.ok()) {
                result->set_shard(shard);
                result->set_standby(standby);
              }
              std::move(done)(std::move(result));
            });
      });
}

grpc::ServerUnaryReactor* AdminServiceImpl::Backup(grpc::CallbackServerContext* ctx,
                                                   const grpc::ByteBuffer* request,
                                                   grpc::ByteBuffer* response) {
  using ::admin::v1::BackupResponse;
  return ServeAdmin<::admin::v1::BackupRequest, BackupResponse>(
      ctx_, ctx, "admin.v1.AdminService/Backup", request, response,
      [](const ServiceContext& sc, const ::admin::v1::BackupRequest& r,
         admin::Done<BackupResponse> done) {
        auto target = OperationsOfShard(sc, r, "Backup",
                                        "each shard's store is backed up on its own, into "
                                        "<name>/shard-<n> (feedctl backup backs up every shard)");
        if (!target.ok()) return std::move(done)(target.status());
        target->operations->Backup(r, [done = std::move(done), standby = target->standby](
                                          absl::StatusOr<BackupResponse> result) mutable {
          if (result.ok()) result->set_standby(standby);
          std::move(done)(std::move(result));
        });
      });
}

grpc::ServerUnaryReactor* AdminServiceImpl::Replay(grpc::CallbackServerContext* ctx,
                                                   const grpc::ByteBuffer* request,
                                                   grpc::ByteBuffer* response) {
  using ::admin::v1::ReplayResponse;
  return ServeAdmin<::admin::v1::ReplayRequest, ReplayResponse>(
      ctx_, ctx, "admin.v1.AdminService/Replay", request, response,
      [](const ServiceContext& sc, const ::admin::v1::ReplayRequest& r,
         admin::Done<ReplayResponse> done) {
        auto ops = SingleNodeOperations(sc, "Replay");
        if (!ops.ok()) return std::move(done)(ops.status());
        (*ops)->Replay(r, std::move(done));
      });
}

}  // namespace feed::server
