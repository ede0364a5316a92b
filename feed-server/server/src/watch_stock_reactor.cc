// WatchStock: the rules are core::StockSubscription's; this only translates.
#include <optional>

#include "core/stock_subscription.h"
#include "stream_reactor.h"

namespace feed::server {
namespace {

class WatchStockReactor final : public StreamReactor<grpc::ServerWriteReactor<grpc::ByteBuffer>> {
 public:
  WatchStockReactor(const ServiceContext& sc, grpc::CallbackServerContext* ctx,
                    const grpc::ByteBuffer& bytes)
      : StreamReactor(sc, ctx, "inventory.v1.InventoryService/WatchStock", "watch_stock") {
    inventory::v1::WatchStockRequest request;
    if (!Authorize(ctx) || !Parse(bytes, &request) || !RouteWatch(request)) return;
    sub_.emplace(core(), request, StreamQueueLimits(*sc.config));
    if (absl::Status valid = sub_->Validate(); !valid.ok()) {
      std::lock_guard lock(mu_);
      FinishLocked(valid);
      return;
    }
    if (!Register()) return;
    auto attach = AttachToFeed(sub_->attach_after(), sub_->delivery_keys());
    std::lock_guard lock(mu_);
    if (finished_) return;
    if (absl::Status started = sub_->Start(attach); !started.ok()) {
      FinishLocked(started);
      return;
    }
    PumpLocked();
  }

  void OnEvents(const std::vector<core::EventPtr>& events) override {
    std::lock_guard lock(mu_);
    if (finished_) return;
    sub_->set_reader_behind(ReaderBehindLocked());
    absl::Status queued = sub_->Offer(events);
    ReportQueueLocked(sub_->queued(), sub_->conflated());
    if (!EndIfSlowLocked(queued)) PumpLocked();
  }

  void OnDone() override {
    Unregister();
    delete this;
  }

 private:
  // Cluster mode: a watch of every SKU of the shard the metadata names runs on that shard's
  // core; any other watch is routed by its keys (server/core_router.h).
  bool RouteWatch(const inventory::v1::WatchStockRequest& request) {
    if (sc_.router == nullptr) return true;
    return UseRouted(RouteWatchStock(*sc_.router, request, ShardSelectorInMetadata()));
  }

  void AfterWriteLocked() override { PumpLocked(); }

  void PumpLocked() {
    if (finished_ || writing()) return;
    auto next = sub_->Next();
    if (!next.ok()) {
      FinishLocked(next.status());
      return;
    }
    ReportQueueLocked(sub_->queued(), sub_->conflated());
    if (*next) WriteLocked(**next);
  }

  void OnFinishedLocked() override {
    if (sub_) sub_->Clear();
  }

  std::optional<core::StockSubscription> sub_;
};

}  // namespace

grpc::ServerWriteReactor<grpc::ByteBuffer>* InventoryServiceImpl::WatchStock(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request) {
  return new WatchStockReactor(ctx_, ctx, *request);
}

}  // namespace feed::server
