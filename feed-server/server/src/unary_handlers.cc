// Unary RPCs: parse the request bytes, hand the request to the core, serialize the result
// and finish the reactor from the core's completion (on the completer thread; Finish does
// not block).
#include <atomic>
#include <memory>

#include "grpc_status.h"
#include "server/services.h"
#include "wire.h"
#include "logging.h"

namespace feed::server {
namespace {

// One unary call: finishes exactly once, logs and records it.
class UnaryCall {
 public:
  UnaryCall(const ServiceContext& sc, grpc::CallbackServerContext* ctx, std::string_view method,
            grpc::ByteBuffer* response)
      : reactor_(ctx->DefaultReactor()),
        response_(response),
        record_(sc.metrics, sc.access_log, method, sc.access_log ? ctx->peer() : "") {}

  void Finish(const absl::Status& status) {
    if (finished_.exchange(true)) return;
    record_.Finish(status);
    reactor_->Finish(ToGrpcStatus(status));
  }
  template <class Resp>
  void Reply(const absl::StatusOr<Resp>& result) {
    if (result.ok()) SerializeResponse(*result, response_);
    Finish(result.status());
  }
  grpc::ServerUnaryReactor* reactor() const { return reactor_; }

 private:
  grpc::ServerUnaryReactor* reactor_;
  grpc::ByteBuffer* response_;  // owned by gRPC until Finish
  CallRecord record_;
  std::atomic<bool> finished_{false};
};

// The `idempotency-key` header stands in for the request field when the field is empty
// (the seed's CreateOrder contract has no such field).
template <class Req>
void TakeIdempotencyHeader(grpc::CallbackServerContext* ctx, Req& request) {
  if (!request.idempotency_key().empty()) return;
  const auto& md = ctx->client_metadata();
  auto it = md.find("idempotency-key");
  if (it != md.end()) request.set_idempotency_key(std::string(it->second.data(), it->second.size()));
}

core::CancelFn CancelledBy(grpc::CallbackServerContext* ctx) {
  return [ctx] { return ctx->IsCancelled(); };
}

// Parses the request, then runs `body(call, request)`; turns any exception into INTERNAL
// for this call only.
template <class Req, class Body>
grpc::ServerUnaryReactor* Handle(const ServiceContext& sc, grpc::CallbackServerContext* ctx,
                                 std::string_view method, const grpc::ByteBuffer* bytes,
                                 grpc::ByteBuffer* response, Body&& body) {
  auto call = std::make_shared<UnaryCall>(sc, ctx, method, response);
  grpc::ServerUnaryReactor* reactor = call->reactor();
  try {
    Req request;
    if (absl::Status parsed = ParseRequest(*bytes, &request); !parsed.ok()) {
      call->Finish(RejectUnparseable(sc, method, std::move(parsed)));
    } else {
      body(call, std::move(request));
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

// A mutation: header key, cancellation, then the core method.
template <class Req, class Resp>
grpc::ServerUnaryReactor* Mutation(const ServiceContext& sc, grpc::CallbackServerContext* ctx,
                                   std::string_view method, const grpc::ByteBuffer* bytes,
                                   grpc::ByteBuffer* response,
                                   void (core::InventoryCore::*apply)(Req, core::Done<Resp>,
                                                                      core::CancelFn)) {
  return Handle<Req>(sc, ctx, method, bytes, response,
                     [&](std::shared_ptr<UnaryCall> call, Req request) {
                       TakeIdempotencyHeader(ctx, request);
                       (sc.core->*apply)(
                           std::move(request),
                           [call = std::move(call)](absl::StatusOr<Resp> r) { call->Reply(r); },
                           CancelledBy(ctx));
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

grpc::ServerUnaryReactor* InventoryServiceImpl::GetStock(grpc::CallbackServerContext* ctx,
                                                         const grpc::ByteBuffer* request,
                                                         grpc::ByteBuffer* response) {
  return Handle<inventory::v1::GetStockRequest>(
      ctx_, ctx, "inventory.v1.InventoryService/GetStock", request, response,
      [&](auto call, auto req) { call->Reply(ctx_.core->GetStock(req)); });
}

grpc::ServerUnaryReactor* InventoryServiceImpl::GetReservation(grpc::CallbackServerContext* ctx,
                                                               const grpc::ByteBuffer* request,
                                                               grpc::ByteBuffer* response) {
  return Handle<inventory::v1::GetReservationRequest>(
      ctx_, ctx, "inventory.v1.InventoryService/GetReservation", request, response,
      [&](auto call, auto req) { call->Reply(ctx_.core->GetReservation(req.reservation_id())); });
}

grpc::ServerUnaryReactor* InventoryServiceImpl::AdjustStock(grpc::CallbackServerContext* ctx,
                                                            const grpc::ByteBuffer* request,
                                                            grpc::ByteBuffer* response) {
  return Mutation(ctx_, ctx, "inventory.v1.InventoryService/AdjustStock", request, response,
                  &core::InventoryCore::AdjustStock);
}

grpc::ServerUnaryReactor* InventoryServiceImpl::Reserve(grpc::CallbackServerContext* ctx,
                                                        const grpc::ByteBuffer* request,
                                                        grpc::ByteBuffer* response) {
  return Mutation(ctx_, ctx, "inventory.v1.InventoryService/Reserve", request, response,
                  &core::InventoryCore::Reserve);
}

grpc::ServerUnaryReactor* InventoryServiceImpl::Commit(grpc::CallbackServerContext* ctx,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return Mutation(ctx_, ctx, "inventory.v1.InventoryService/Commit", request, response,
                  &core::InventoryCore::Commit);
}

grpc::ServerUnaryReactor* InventoryServiceImpl::Release(grpc::CallbackServerContext* ctx,
                                                        const grpc::ByteBuffer* request,
                                                        grpc::ByteBuffer* response) {
  return Mutation(ctx_, ctx, "inventory.v1.InventoryService/Release", request, response,
                  &core::InventoryCore::Release);
}

// --- order.v1 --------------------------------------------------------------------------

grpc::ServerUnaryReactor* OrderServiceImpl::CreateOrder(grpc::CallbackServerContext* ctx,
                                                        const grpc::ByteBuffer* request,
                                                        grpc::ByteBuffer* response) {
  return Mutation(ctx_, ctx, "order.v1.OrderService/CreateOrder", request, response,
                  &core::InventoryCore::CreateOrder);
}

grpc::ServerUnaryReactor* OrderServiceImpl::GetOrder(grpc::CallbackServerContext* ctx,
                                                     const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) {
  return Handle<order::v1::GetOrderRequest>(
      ctx_, ctx, "order.v1.OrderService/GetOrder", request, response,
      [&](auto call, auto req) { call->Reply(ctx_.core->GetOrder(req.order_id())); });
}

grpc::ServerUnaryReactor* OrderServiceImpl::PayOrder(grpc::CallbackServerContext* ctx,
                                                     const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) {
  return Mutation(ctx_, ctx, "order.v1.OrderService/PayOrder", request, response,
                  &core::InventoryCore::PayOrder);
}

grpc::ServerUnaryReactor* OrderServiceImpl::AdvanceOrder(grpc::CallbackServerContext* ctx,
                                                         const grpc::ByteBuffer* request,
                                                         grpc::ByteBuffer* response) {
  return Mutation(ctx_, ctx, "order.v1.OrderService/AdvanceOrder", request, response,
                  &core::InventoryCore::AdvanceOrder);
}

grpc::ServerUnaryReactor* OrderServiceImpl::CancelOrder(grpc::CallbackServerContext* ctx,
                                                        const grpc::ByteBuffer* request,
                                                        grpc::ByteBuffer* response) {
  return Mutation(ctx_, ctx, "order.v1.OrderService/CancelOrder", request, response,
                  &core::InventoryCore::CancelOrder);
}

}  // namespace feed::server
