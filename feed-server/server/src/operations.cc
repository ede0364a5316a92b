#include "server/operations.h"

#include <array>

#include "inventory/v1/inventory.pb.h"
#include "order/v1/order.pb.h"

namespace feed::server {
namespace {

namespace inv = inventory::v1;
namespace ord = order::v1;
using core::InventoryCore;
using google::protobuf::Message;

template <class Resp>
void Answer(const absl::StatusOr<Resp>& result, OperationDone done) {
  std::move(done)(result.status(), result.ok() ? &*result : nullptr);
}

template <class Req, class Resp,
          void (InventoryCore::*Apply)(Req, core::Done<Resp>, core::CallContext)>
void RunMutation(InventoryCore& core, Message& message, CallOptions options, OperationDone done) {
  auto& request = static_cast<Req&>(message);
  if (request.idempotency_key().empty() && !options.idempotency_key.empty()) {
    request.set_idempotency_key(std::move(options.idempotency_key));
  }
  (core.*Apply)(
      std::move(request),
      [done = std::move(done)](absl::StatusOr<Resp> result) mutable {
        Answer(result, std::move(done));
      },
      core::CallContext{std::move(options.cancelled), std::move(options.actor)});
}

// Each adjustment carries its own key: the call's idempotency-key header does not apply.
void RunBatchAdjust(InventoryCore& core, Message& message, CallOptions options,
                    OperationDone done) {
  core.BatchAdjustStock(
      std::move(static_cast<inv::BatchAdjustStockRequest&>(message)),
      [done = std::move(done)](absl::StatusOr<inv::BatchAdjustStockResponse> result) mutable {
        Answer(result, std::move(done));
      },
      core::CallContext{std::move(options.cancelled), std::move(options.actor)});
}

void RunGetStock(InventoryCore& core, Message& message, CallOptions, OperationDone done) {
  Answer(core.GetStock(static_cast<inv::GetStockRequest&>(message)), std::move(done));
}

void RunGetReservation(InventoryCore& core, Message& message, CallOptions, OperationDone done) {
  Answer(core.GetReservation(static_cast<inv::GetReservationRequest&>(message).reservation_id()),
         std::move(done));
}

void RunGetOrder(InventoryCore& core, Message& message, CallOptions, OperationDone done) {
  Answer(core.GetOrder(static_cast<ord::GetOrderRequest&>(message).order_id()), std::move(done));
}

constexpr std::array kOperations = {
    Operation("inventory.v1.InventoryService/GetStock", false, &RunGetStock),
    Operation("inventory.v1.InventoryService/GetReservation", false, &RunGetReservation),
    Operation("inventory.v1.InventoryService/AdjustStock", true,
              &RunMutation<inv::AdjustStockRequest, inv::AdjustStockResponse,
                           &InventoryCore::AdjustStock>),
    Operation("inventory.v1.InventoryService/BatchAdjustStock", true, &RunBatchAdjust),
    Operation("inventory.v1.InventoryService/Reserve", true,
              &RunMutation<inv::ReserveRequest, inv::ReserveResponse, &InventoryCore::Reserve>),
    Operation("inventory.v1.InventoryService/Commit", true,
              &RunMutation<inv::CommitRequest, inv::CommitResponse, &InventoryCore::Commit>),
    Operation("inventory.v1.InventoryService/Release", true,
              &RunMutation<inv::ReleaseRequest, inv::ReleaseResponse, &InventoryCore::Release>),
    Operation("order.v1.OrderService/CreateOrder", true,
              &RunMutation<ord::CreateOrderRequest, ord::CreateOrderResponse,
                           &InventoryCore::CreateOrder>),
    Operation("order.v1.OrderService/GetOrder", false, &RunGetOrder),
    Operation("order.v1.OrderService/PayOrder", true,
              &RunMutation<ord::PayOrderRequest, ord::OrderResponse, &InventoryCore::PayOrder>),
    Operation(
        "order.v1.OrderService/AdvanceOrder", true,
        &RunMutation<ord::AdvanceOrderRequest, ord::OrderResponse, &InventoryCore::AdvanceOrder>),
    Operation(
        "order.v1.OrderService/CancelOrder", true,
        &RunMutation<ord::CancelOrderRequest, ord::OrderResponse, &InventoryCore::CancelOrder>),
};

}  // namespace

const Operation* FindOperation(std::string_view method) {
  for (const Operation& op : kOperations) {
    if (op.method() == method) return &op;
  }
  return nullptr;
}

}  // namespace feed::server
