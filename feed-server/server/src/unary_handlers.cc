// Unary RPCs: copy the request, hand it to the core, finish the reactor from the core's
// completion (on the writer thread; Finish does not block).
#include <atomic>
#include <memory>

#include "server/grpc_status.h"
#include "server/services.h"
#include "spdlog/spdlog.h"

namespace feed::server {
namespace {

// One unary call: finishes exactly once, logs and records it.
class UnaryCall {
 public:
  UnaryCall(const ServiceContext& sc, grpc::CallbackServerContext* ctx, std::string_view method)
      : reactor_(ctx->DefaultReactor()),
        record_(sc.metrics, sc.config->log_rpcs, method, sc.config->log_rpcs ? ctx->peer() : "") {}

  void Finish(const grpc::Status& status) {
    if (finished_.exchange(true)) return;
    record_.Finish(status);
    reactor_->Finish(status);
  }
  grpc::ServerUnaryReactor* reactor() const { return reactor_; }
  // The call's response message (owned by gRPC), kept here so that a completion needs to
  // capture only the call: a lambda of one shared_ptr fits AnyInvocable's inline storage.
  void set_response(void* response) { response_ = response; }
  template <class Resp>
  Resp* response() const {
    return static_cast<Resp*>(response_);
  }

 private:
  grpc::ServerUnaryReactor* reactor_;
  void* response_ = nullptr;
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

// Runs `body` and turns any exception into INTERNAL for this call only.
template <class Body>
grpc::ServerUnaryReactor* Guarded(const ServiceContext& sc, grpc::CallbackServerContext* ctx,
                                  std::string_view method, Body&& body) {
  auto call = std::make_shared<UnaryCall>(sc, ctx, method);
  try {
    body(call);
  } catch (const std::exception& e) {
    spdlog::error("{}: unexpected exception: {}", method, e.what());
    call->Finish(grpc::Status(grpc::StatusCode::INTERNAL, "internal error"));
  } catch (...) {
    spdlog::error("{}: unexpected non-standard exception", method);
    call->Finish(grpc::Status(grpc::StatusCode::INTERNAL, "internal error"));
  }
  return call->reactor();
}

template <class Resp>
core::Done<Resp> ReplyTo(std::shared_ptr<UnaryCall> call, Resp* out) {
  call->set_response(out);
  return [call = std::move(call)](absl::StatusOr<Resp> result) {
    if (result.ok()) {
      *call->template response<Resp>() = std::move(*result);
      call->Finish(grpc::Status::OK);
    } else {
      call->Finish(ToGrpcStatus(result.status()));
    }
  };
}

// A mutation: header key, cancellation, then the core method.
template <class Req, class Resp>
grpc::ServerUnaryReactor* Mutation(const ServiceContext& sc, grpc::CallbackServerContext* ctx,
                                   std::string_view method, const Req* request, Resp* response,
                                   void (core::InventoryCore::*apply)(Req, core::Done<Resp>,
                                                                      core::CancelFn)) {
  return Guarded(sc, ctx, method, [&](std::shared_ptr<UnaryCall> call) {
    // gRPC allocated the request for this call (a mutable message behind a const pointer)
    // and does not read it after the handler: moving it into the command saves a deep copy.
    Req& owned = const_cast<Req&>(*request);
    TakeIdempotencyHeader(ctx, owned);
    (sc.core->*apply)(std::move(owned), ReplyTo(std::move(call), response), CancelledBy(ctx));
  });
}

template <class Resp>
void FinishRead(UnaryCall& call, absl::StatusOr<Resp> result, Resp* out) {
  if (result.ok()) {
    *out = std::move(*result);
    call.Finish(grpc::Status::OK);
  } else {
    call.Finish(ToGrpcStatus(result.status()));
  }
}

}  // namespace

// --- inventory.v1 ----------------------------------------------------------------------

grpc::ServerUnaryReactor* InventoryServiceImpl::GetStock(
    grpc::CallbackServerContext* ctx, const inventory::v1::GetStockRequest* request,
    inventory::v1::GetStockResponse* response) {
  return Guarded(ctx_, ctx, "inventory.v1.InventoryService/GetStock", [&](auto call) {
    FinishRead(*call, ctx_.core->GetStock(*request), response);
  });
}

grpc::ServerUnaryReactor* InventoryServiceImpl::GetReservation(
    grpc::CallbackServerContext* ctx, const inventory::v1::GetReservationRequest* request,
    inventory::v1::Reservation* response) {
  return Guarded(ctx_, ctx, "inventory.v1.InventoryService/GetReservation", [&](auto call) {
    FinishRead(*call, ctx_.core->GetReservation(request->reservation_id()), response);
  });
}

grpc::ServerUnaryReactor* InventoryServiceImpl::AdjustStock(
    grpc::CallbackServerContext* ctx, const inventory::v1::AdjustStockRequest* request,
    inventory::v1::AdjustStockResponse* response) {
  return Mutation(ctx_, ctx, "inventory.v1.InventoryService/AdjustStock", request, response,
                  &core::InventoryCore::AdjustStock);
}

grpc::ServerUnaryReactor* InventoryServiceImpl::Reserve(
    grpc::CallbackServerContext* ctx, const inventory::v1::ReserveRequest* request,
    inventory::v1::ReserveResponse* response) {
  return Mutation(ctx_, ctx, "inventory.v1.InventoryService/Reserve", request, response,
                  &core::InventoryCore::Reserve);
}

grpc::ServerUnaryReactor* InventoryServiceImpl::Commit(grpc::CallbackServerContext* ctx,
                                                       const inventory::v1::CommitRequest* request,
                                                       inventory::v1::CommitResponse* response) {
  return Mutation(ctx_, ctx, "inventory.v1.InventoryService/Commit", request, response,
                  &core::InventoryCore::Commit);
}

grpc::ServerUnaryReactor* InventoryServiceImpl::Release(
    grpc::CallbackServerContext* ctx, const inventory::v1::ReleaseRequest* request,
    inventory::v1::ReleaseResponse* response) {
  return Mutation(ctx_, ctx, "inventory.v1.InventoryService/Release", request, response,
                  &core::InventoryCore::Release);
}

// --- order.v1 --------------------------------------------------------------------------

grpc::ServerUnaryReactor* OrderServiceImpl::CreateOrder(
    grpc::CallbackServerContext* ctx, const order::v1::CreateOrderRequest* request,
    order::v1::CreateOrderResponse* response) {
  return Mutation(ctx_, ctx, "order.v1.OrderService/CreateOrder", request, response,
                  &core::InventoryCore::CreateOrder);
}

grpc::ServerUnaryReactor* OrderServiceImpl::GetOrder(grpc::CallbackServerContext* ctx,
                                                     const order::v1::GetOrderRequest* request,
                                                     order::v1::Order* response) {
  return Guarded(ctx_, ctx, "order.v1.OrderService/GetOrder", [&](auto call) {
    FinishRead(*call, ctx_.core->GetOrder(request->order_id()), response);
  });
}

grpc::ServerUnaryReactor* OrderServiceImpl::PayOrder(grpc::CallbackServerContext* ctx,
                                                     const order::v1::PayOrderRequest* request,
                                                     order::v1::OrderResponse* response) {
  return Mutation(ctx_, ctx, "order.v1.OrderService/PayOrder", request, response,
                  &core::InventoryCore::PayOrder);
}

grpc::ServerUnaryReactor* OrderServiceImpl::AdvanceOrder(
    grpc::CallbackServerContext* ctx, const order::v1::AdvanceOrderRequest* request,
    order::v1::OrderResponse* response) {
  return Mutation(ctx_, ctx, "order.v1.OrderService/AdvanceOrder", request, response,
                  &core::InventoryCore::AdvanceOrder);
}

grpc::ServerUnaryReactor* OrderServiceImpl::CancelOrder(
    grpc::CallbackServerContext* ctx, const order::v1::CancelOrderRequest* request,
    order::v1::OrderResponse* response) {
  return Mutation(ctx_, ctx, "order.v1.OrderService/CancelOrder", request, response,
                  &core::InventoryCore::CancelOrder);
}

// --- StreamRegistry --------------------------------------------------------------------

bool StreamRegistry::TryAdd(Stream* stream) {
  std::lock_guard lock(mu_);
  if (closed_ || streams_.size() >= limit_) return false;
  streams_.insert(stream);
  return true;
}

void StreamRegistry::Remove(Stream* stream) {
  std::lock_guard lock(mu_);
  streams_.erase(stream);
}

void StreamRegistry::CloseAll(const grpc::Status& status) {
  std::lock_guard lock(mu_);
  closed_ = true;
  for (Stream* s : streams_) s->Close(status);
}

size_t StreamRegistry::size() const {
  std::lock_guard lock(mu_);
  return streams_.size();
}

}  // namespace feed::server
