// gRPC adapters: translate between the wire and the core, nothing else. Callback API
// (see bench/echo/MEASUREMENT.md for why), with raw-bytes methods so that a request that
// does not parse gets INVALID_ARGUMENT from us (wire.h). Every handler logs one line and
// records metrics through CallRecord; an exception in a handler becomes INTERNAL for that
// call only.
#pragma once

#include <mutex>
#include <unordered_set>

#include "absl/status/status.h"
#include "admin/store_operations.h"
#include "admin/v1/admin.grpc.pb.h"
#include "common/log_rate_limit.h"
#include "core/inventory_core.h"
#include "inventory/v1/inventory.grpc.pb.h"
#include "order/v1/order.grpc.pb.h"
#include "security/authorizer.h"
#include "server/config.h"
#include "server/core_router.h"
#include "server/observability.h"
#include "server/shard_forwarder.h"
#include "server/status.h"

namespace feed::server {

// Every open stream, so that a shutdown can end them all with UNAVAILABLE and so the total
// is bounded by config.max_open_streams.
class StreamRegistry {
 public:
  class Stream {
   public:
    virtual ~Stream() = default;
    // Ends the stream with `status`. Called with the registry's lock held.
    virtual void Close(const absl::Status& status) = 0;
  };
  explicit StreamRegistry(size_t limit) : limit_(limit) {}
  // False when the limit is reached or the registry is closed.
  bool TryAdd(Stream* stream);
  void Remove(Stream* stream);
  // Closes every stream and refuses new ones.
  void CloseAll(const absl::Status& status);
  size_t size() const;

 private:
  const size_t limit_;
  mutable std::mutex mu_;
  std::unordered_set<Stream*> streams_;
  bool closed_ = false;
};

struct ServiceContext {
  // The single node's core; null in cluster mode, where `router` picks one per call and per
  // stream (a Feed stream: the shard its metadata names) and the shard store an audit reads.
  core::InventoryCore* core;
  Metrics* metrics;
  const ServerConfig* config;
  StreamRegistry* streams;
  // Null when --log-rpcs is off.
  const AccessLog* access_log;
  // Lines about requests that could not be parsed.
  LogRateLimit* bad_request_log;
  // Who may call what (with authentication off it still names mTLS clients and applies
  // the per-subject rate limit).
  const security::Authorizer* auth;
  // The process's state for the dashboard (empty: not available).
  StatusFn status;
  // The single node's AdminService operations (audit, backups, replay); null in cluster mode.
  admin::StoreOperations* store_operations = nullptr;
  // Cluster mode only.
  const CoreRouter* router = nullptr;
  // Cluster mode: runs a call on its shard's owner (the HTTP gateway's calls).
  const ShardForwarder* forwarder = nullptr;
};

// Answers a request that could not be parsed: counted, logged (rate-limited), and returned
// as the status to finish the call with.
absl::Status RejectUnparseable(const ServiceContext& sc, std::string_view method,
                               absl::Status parse_error);

namespace inv_grpc = inventory::v1;
using RawInventoryService = inv_grpc::InventoryService::WithRawCallbackMethod_GetShardMap<
    inv_grpc::InventoryService::WithRawCallbackMethod_BatchAdjustStock<
        inv_grpc::InventoryService::WithRawCallbackMethod_GetStock<
            inv_grpc::InventoryService::WithRawCallbackMethod_AdjustStock<
                inv_grpc::InventoryService::WithRawCallbackMethod_Reserve<
                    inv_grpc::InventoryService::WithRawCallbackMethod_Commit<
                        inv_grpc::InventoryService::WithRawCallbackMethod_Release<
                            inv_grpc::InventoryService::WithRawCallbackMethod_GetReservation<
                                inv_grpc::InventoryService::WithRawCallbackMethod_WatchStock<
                                    inv_grpc::InventoryService::WithRawCallbackMethod_Feed<
                                        inv_grpc::InventoryService::Service>>>>>>>>>>;
using RawOrderService = order::v1::OrderService::WithRawCallbackMethod_CreateOrder<
    order::v1::OrderService::WithRawCallbackMethod_GetOrder<
        order::v1::OrderService::WithRawCallbackMethod_PayOrder<
            order::v1::OrderService::WithRawCallbackMethod_AdvanceOrder<
                order::v1::OrderService::WithRawCallbackMethod_CancelOrder<
                    order::v1::OrderService::WithRawCallbackMethod_StreamOrderUpdates<
                        order::v1::OrderService::Service>>>>>>;

class InventoryServiceImpl final : public RawInventoryService {
 public:
  explicit InventoryServiceImpl(ServiceContext context) : ctx_(context) {}

  grpc::ServerUnaryReactor* GetStock(grpc::CallbackServerContext* ctx,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* AdjustStock(grpc::CallbackServerContext* ctx,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* BatchAdjustStock(grpc::CallbackServerContext* ctx,
                                             const grpc::ByteBuffer* request,
                                             grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Reserve(grpc::CallbackServerContext* ctx,
                                    const grpc::ByteBuffer* request,
                                    grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Commit(grpc::CallbackServerContext* ctx,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Release(grpc::CallbackServerContext* ctx,
                                    const grpc::ByteBuffer* request,
                                    grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetReservation(grpc::CallbackServerContext* ctx,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetShardMap(grpc::CallbackServerContext* ctx,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* WatchStock(grpc::CallbackServerContext* ctx,
                                                         const grpc::ByteBuffer* request) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Feed(
      grpc::CallbackServerContext* ctx) override;

 private:
  ServiceContext ctx_;
};

using RawAdminService = ::admin::v1::AdminService::WithRawCallbackMethod_CheckStore<
    ::admin::v1::AdminService::WithRawCallbackMethod_Backup<
        ::admin::v1::AdminService::WithRawCallbackMethod_Replay<
            ::admin::v1::AdminService::Service>>>;

class AdminServiceImpl final : public RawAdminService {
 public:
  explicit AdminServiceImpl(ServiceContext context) : ctx_(context) {}

  grpc::ServerUnaryReactor* CheckStore(grpc::CallbackServerContext* ctx,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Backup(grpc::CallbackServerContext* ctx,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Replay(grpc::CallbackServerContext* ctx,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;

 private:
  ServiceContext ctx_;
};

class OrderServiceImpl final : public RawOrderService {
 public:
  explicit OrderServiceImpl(ServiceContext context) : ctx_(context) {}

  grpc::ServerUnaryReactor* CreateOrder(grpc::CallbackServerContext* ctx,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetOrder(grpc::CallbackServerContext* ctx,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* PayOrder(grpc::CallbackServerContext* ctx,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* AdvanceOrder(grpc::CallbackServerContext* ctx,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* CancelOrder(grpc::CallbackServerContext* ctx,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* StreamOrderUpdates(
      grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request) override;

 private:
  ServiceContext ctx_;
};

}  // namespace feed::server
