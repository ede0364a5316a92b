// gRPC adapters: translate between the wire and the core, nothing else. Callback API
// (see bench/echo/MEASUREMENT.md for why). Every handler logs one line and records metrics
// through CallRecord; an exception in a handler becomes INTERNAL for that call only.
#pragma once

#include <mutex>
#include <unordered_set>

#include "core/inventory_core.h"
#include "inventory/v1/inventory.grpc.pb.h"
#include "order/v1/order.grpc.pb.h"
#include "server/config.h"
#include "server/observability.h"

namespace feed::server {

// Every open stream, so that a shutdown can end them all with UNAVAILABLE and so the total
// is bounded by config.max_open_streams.
class StreamRegistry {
 public:
  class Stream {
   public:
    virtual ~Stream() = default;
    // Ends the stream with `status`. Called with the registry's lock held.
    virtual void Close(const grpc::Status& status) = 0;
  };
  explicit StreamRegistry(size_t limit) : limit_(limit) {}
  // False when the limit is reached or the registry is closed.
  bool TryAdd(Stream* stream);
  void Remove(Stream* stream);
  // Closes every stream and refuses new ones.
  void CloseAll(const grpc::Status& status);
  size_t size() const;

 private:
  const size_t limit_;
  mutable std::mutex mu_;
  std::unordered_set<Stream*> streams_;
  bool closed_ = false;
};

struct ServiceContext {
  core::InventoryCore* core;
  Metrics* metrics;
  const ServerConfig* config;
  StreamRegistry* streams;
};

class InventoryServiceImpl final : public inventory::v1::InventoryService::CallbackService {
 public:
  explicit InventoryServiceImpl(ServiceContext context) : ctx_(context) {}

  grpc::ServerUnaryReactor* GetStock(grpc::CallbackServerContext* ctx,
                                     const inventory::v1::GetStockRequest* request,
                                     inventory::v1::GetStockResponse* response) override;
  grpc::ServerUnaryReactor* AdjustStock(grpc::CallbackServerContext* ctx,
                                        const inventory::v1::AdjustStockRequest* request,
                                        inventory::v1::AdjustStockResponse* response) override;
  grpc::ServerUnaryReactor* Reserve(grpc::CallbackServerContext* ctx,
                                    const inventory::v1::ReserveRequest* request,
                                    inventory::v1::ReserveResponse* response) override;
  grpc::ServerUnaryReactor* Commit(grpc::CallbackServerContext* ctx,
                                   const inventory::v1::CommitRequest* request,
                                   inventory::v1::CommitResponse* response) override;
  grpc::ServerUnaryReactor* Release(grpc::CallbackServerContext* ctx,
                                    const inventory::v1::ReleaseRequest* request,
                                    inventory::v1::ReleaseResponse* response) override;
  grpc::ServerUnaryReactor* GetReservation(grpc::CallbackServerContext* ctx,
                                           const inventory::v1::GetReservationRequest* request,
                                           inventory::v1::Reservation* response) override;
  grpc::ServerWriteReactor<inventory::v1::StockUpdate>* WatchStock(
      grpc::CallbackServerContext* ctx, const inventory::v1::WatchStockRequest* request) override;
  grpc::ServerBidiReactor<inventory::v1::FeedRequest, inventory::v1::FeedResponse>* Feed(
      grpc::CallbackServerContext* ctx) override;

 private:
  ServiceContext ctx_;
};

class OrderServiceImpl final : public order::v1::OrderService::CallbackService {
 public:
  explicit OrderServiceImpl(ServiceContext context) : ctx_(context) {}

  grpc::ServerUnaryReactor* CreateOrder(grpc::CallbackServerContext* ctx,
                                        const order::v1::CreateOrderRequest* request,
                                        order::v1::CreateOrderResponse* response) override;
  grpc::ServerUnaryReactor* GetOrder(grpc::CallbackServerContext* ctx,
                                     const order::v1::GetOrderRequest* request,
                                     order::v1::Order* response) override;
  grpc::ServerUnaryReactor* PayOrder(grpc::CallbackServerContext* ctx,
                                     const order::v1::PayOrderRequest* request,
                                     order::v1::OrderResponse* response) override;
  grpc::ServerUnaryReactor* AdvanceOrder(grpc::CallbackServerContext* ctx,
                                         const order::v1::AdvanceOrderRequest* request,
                                         order::v1::OrderResponse* response) override;
  grpc::ServerUnaryReactor* CancelOrder(grpc::CallbackServerContext* ctx,
                                        const order::v1::CancelOrderRequest* request,
                                        order::v1::OrderResponse* response) override;
  grpc::ServerWriteReactor<order::v1::OrderStatusUpdate>* StreamOrderUpdates(
      grpc::CallbackServerContext* ctx, const order::v1::OrderSubscriptionRequest* request) override;

 private:
  ServiceContext ctx_;
};

}  // namespace feed::server
