// StreamOrderUpdates: the rules are core::OrderSubscription's; this only translates.
#include <optional>

#include "core/order_subscription.h"
#include "stream_reactor.h"

namespace feed::server {
namespace {

class OrderUpdatesReactor final : public StreamReactor<grpc::ServerWriteReactor<grpc::ByteBuffer>> {
 public:
  OrderUpdatesReactor(const ServiceContext& sc, grpc::CallbackServerContext* ctx,
                      const grpc::ByteBuffer& bytes)
      : StreamReactor(sc, ctx, "order.v1.OrderService/StreamOrderUpdates", "order_updates") {
    order::v1::OrderSubscriptionRequest request;
    if (!Authorize(ctx) || !Parse(bytes, &request)) return;
    sub_.emplace(request.order_id());
    if (absl::Status valid = sub_->Validate(sc.config->core.limits); !valid.ok()) {
      std::lock_guard lock(mu_);
      FinishLocked(valid);
      return;
    }
    if (!Route(request) || !Register()) return;
    AttachToFeed(UINT64_MAX, {sub_->order_id()});
    // Read after attaching: a change that races with the read is either in it or arrives.
    auto order = core().GetOrder(sub_->order_id());
    std::lock_guard lock(mu_);
    if (finished_) return;
    if (!order.ok()) {
      FinishLocked(order.status());
      return;
    }
    sub_->Start(*order);
    PumpLocked();
  }

  void OnEvents(const std::vector<core::EventPtr>& events) override {
    std::lock_guard lock(mu_);
    if (finished_) return;
    sub_->Offer(events);
    PumpLocked();
  }

  void OnDone() override {
    Unregister();
    delete this;
  }

 private:
  void AfterWriteLocked() override {
    if (last_sent_ && core::OrderSubscription::Ends(*last_sent_)) {
      FinishLocked(absl::OkStatus());
      return;
    }
    PumpLocked();
  }

  void PumpLocked() {
    if (finished_ || writing()) return;
    last_sent_ = sub_->Next();
    if (last_sent_) WriteLocked(*last_sent_);
  }

  void OnFinishedLocked() override {
    if (sub_) sub_->Clear();
  }

  std::optional<core::OrderSubscription> sub_;
  std::optional<order::v1::OrderStatusUpdate> last_sent_;
};

}  // namespace

grpc::ServerWriteReactor<grpc::ByteBuffer>* OrderServiceImpl::StreamOrderUpdates(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request) {
  return new OrderUpdatesReactor(ctx_, ctx, *request);
}

}  // namespace feed::server
