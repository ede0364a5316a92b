#include "http_streams.h"

#include <mutex>
#include <optional>
#include <string_view>

#include "core/order_subscription.h"
#include "core/stock_subscription.h"
#include "server/stream_support.h"
#include "transcoding.h"

namespace feed::http {

namespace {

std::string Frame(Framing framing, const google::protobuf::Message& message,
                  std::optional<uint64_t> id) {
  if (framing == Framing::kNdjson) return "{\"result\":" + ToJson(message) + "}\n";
  std::string out;
  if (id) out += "id: " + std::to_string(*id) + "\n";
  out += "data: " + ToJson(message) + "\n\n";
  return out;
}

std::string ErrorFrame(Framing framing, const absl::Status& status) {
  if (framing == Framing::kNdjson) return "{\"error\":" + StatusJson(status) + "}\n";
  return "event: error\ndata: " + StatusJson(status) + "\n\n";
}

// One HTTP stream: the transport half of a gRPC stream reactor. Lifetime: owned by itself
// (self_) from Start until the end of its response has been written and it has left the
// change feed and the registry.
//
// Threads: OnEvents on the core's publisher thread with the feed's lock held; write
// completions on the HTTP threads; Close from the registry (shutdown). Lock order as for the
// gRPC streams: registry -> stream, feed -> stream; never the feed with mu_ held.
class HttpStream : public core::ChangeListener,
                   public server::StreamRegistry::Stream,
                   public std::enable_shared_from_this<HttpStream> {
 public:
  HttpStream(const server::ServiceContext& sc, std::shared_ptr<Exchange> exchange,
             StreamSettings settings, const char* kind, StreamDone done)
      : support_(sc, kind),
        exchange_(std::move(exchange)),
        framing_(settings.framing),
        heartbeat_(settings.heartbeat),
        done_(std::move(done)) {}

  void Close(const absl::Status& status) override {
    std::lock_guard lock(mu_);
    FinishLocked(status, false);
  }

 protected:
  // Answers `status` as a plain HTTP error (nothing sent yet) and releases the stream.
  void Refuse(const absl::Status& status) {
    int http_status = status.code() == absl::StatusCode::kResourceExhausted && !registered_
                          ? 503  // the open-stream limit: the server is full, not the client
                          : HttpStatusOf(status.code());
    Response response = ErrorResponse(status, http_status);
    size_t bytes = response.body().size();
    exchange_->Respond(std::move(response));
    if (done_) done_({http_status, bytes});
    support_.Unregister();
  }

  // Cluster mode: the stream runs on the core of its shard here; when another node serves the
  // shard it is refused (503, the owner in Feed-Shard-Owner). True when the stream may go on.
  bool RouteTo(std::string_view method, const google::protobuf::Message& request) {
    const auto& sc = support_.context();
    if (sc.router == nullptr) return true;
    return UseRouted(sc.router->Route(method, request));
  }
  // The end of every routing: the routed core, or the stream refused with the error.
  bool UseRouted(absl::StatusOr<std::shared_ptr<core::InventoryCore>> routed) {
    if (!routed.ok()) {
      Refuse(routed.status());
      return false;
    }
    routed_core_ = *std::move(routed);
    support_.set_core(routed_core_.get());
    return true;
  }
  // Cluster mode: the value of the header that names a stream's shard, if the request has it.
  std::optional<std::string_view> ShardSelectorHeader() const {
    const Request& request = exchange_->request();
    auto it = request.find(boost::beast::string_view(server::kShardSelectorKey.data(),
                                                     server::kShardSelectorKey.size()));
    if (it == request.end()) return std::nullopt;
    return std::string_view(it->value().data(), it->value().size());
  }

  absl::Status Register() {
    absl::Status s = support_.Register(this);
    registered_ = s.ok();
    return s;
  }

  // Sends the head; from now on the stream writes its updates.
  void BeginLocked() {
    Response head(boost::beast::http::status::ok, 11);
    if (framing_ == Framing::kServerSentEvents) {
      head.set(boost::beast::http::field::content_type, "text/event-stream");
      head.set(boost::beast::http::field::cache_control, "no-cache");
    } else {
      head.set(boost::beast::http::field::content_type, "application/x-ndjson");
    }
    self_ = shared_from_this();
    StreamOptions options;
    if (framing_ == Framing::kServerSentEvents && heartbeat_.count() > 0) {
      options.heartbeat_chunk = ": keep-alive\n\n";
      options.heartbeat_period = heartbeat_;
      options.on_broken = [weak = weak_from_this()] {
        if (auto self = weak.lock()) self->OnBroken();
      };
    }
    writer_ = exchange_->StartStream(std::move(head), std::move(options));
  }

  void WriteLocked(const google::protobuf::Message& message, std::optional<uint64_t> id) {
    std::string chunk = Frame(framing_, message, id);
    bytes_ += chunk.size();
    support_.WriteStarted();
    writer_->Write(std::move(chunk), [self = shared_from_this()](bool ok) { self->OnWritten(ok); });
  }

  // Ends the stream: the error frame (none for a client that left), then the end of the
  // response. A write in flight is waited for, or cut off when `abort` (a stalled reader).
  void FinishLocked(const absl::Status& status, bool abort) {
    if (finished_) return;
    finished_ = true;
    ClearLocked();
    support_.ReportFinished();
    if (!writer_) return;  // not begun: the starting thread answers
    if (!status.ok() && status.code() != absl::StatusCode::kCancelled) {
      final_chunk_ = ErrorFrame(framing_, status);
    }
    if (support_.writing()) {
      if (abort) writer_->Abort();
      return;  // OnWritten ends it
    }
    EndLocked();
  }

  bool finished() const { return finished_; }
  bool writing() const { return support_.writing(); }
  bool begun() const { return writer_ != nullptr; }

  server::StreamSupport support_;
  std::mutex mu_;

 private:
  virtual void ClearLocked() = 0;
  // A write completed: send the next update.
  virtual void PumpLocked() = 0;

  // A heartbeat found the client gone.
  void OnBroken() {
    std::lock_guard lock(mu_);
    FinishLocked(absl::CancelledError("client went away"), false);
  }

  void OnWritten(bool ok) {
    std::lock_guard lock(mu_);
    support_.WriteDone();
    if (!ok) final_chunk_.clear();
    if (finished_) return EndLocked();
    if (!ok) return FinishLocked(absl::CancelledError("client went away"), false);
    PumpLocked();
  }

  void EndLocked() {
    bytes_ += final_chunk_.size();
    writer_->End(std::move(final_chunk_), [self = shared_from_this()] { self->Release(); });
  }

  // On an HTTP thread, no lock held.
  void Release() {
    support_.Unregister();
    if (done_) done_({200, bytes_});
    std::shared_ptr<HttpStream> last;
    {
      std::lock_guard lock(mu_);
      last = std::move(self_);
    }
  }

  std::shared_ptr<Exchange> exchange_;
  const Framing framing_;
  const std::chrono::milliseconds heartbeat_;
  StreamDone done_;
  std::shared_ptr<StreamWriter> writer_;
  std::shared_ptr<HttpStream> self_;
  bool registered_ = false;
  bool finished_ = false;
  // Cluster mode: keeps the routed core alive while the stream is attached to its feed.
  std::shared_ptr<core::InventoryCore> routed_core_;
  std::string final_chunk_;
  size_t bytes_ = 0;
};

class StockStream final : public HttpStream {
 public:
  StockStream(const server::ServiceContext& sc, std::shared_ptr<Exchange> exchange,
              StreamSettings settings, StreamDone done)
      : HttpStream(sc, std::move(exchange), settings, "http_watch_stock", std::move(done)) {}

  void Start(const inventory::v1::WatchStockRequest& request) {
    const auto& sc = support_.context();
    // A watch of every SKU of the shard the feed-shard header names runs on its core.
    if (sc.router != nullptr &&
        !UseRouted(server::RouteWatchStock(*sc.router, request, ShardSelectorHeader()))) {
      return;
    }
    sub_.emplace(*support_.core(), request, server::StreamQueueLimits(*sc.config));
    if (absl::Status valid = sub_->Validate(); !valid.ok()) return Refuse(valid);
    if (absl::Status registered = Register(); !registered.ok()) return Refuse(registered);
    auto attach = support_.Attach(this, sub_->attach_after(), sub_->delivery_keys());
    std::unique_lock lock(mu_);
    if (finished()) {
      lock.unlock();
      return Refuse(absl::UnavailableError("the server is shutting down"));
    }
    if (absl::Status started = sub_->Start(attach); !started.ok()) {
      FinishLocked(started, false);
      lock.unlock();
      return Refuse(started);
    }
    BeginLocked();
    PumpLocked();
  }

  void OnEvents(const std::vector<core::EventPtr>& events) override {
    std::lock_guard lock(mu_);
    if (finished()) return;
    sub_->set_reader_behind(support_.ReaderBehind());
    absl::Status queued = sub_->Offer(events);
    support_.ReportQueue(sub_->queued(), sub_->conflated());
    if (absl::Status slow = support_.CheckSlowReader(queued); !slow.ok()) {
      FinishLocked(slow, true);
      return;
    }
    PumpLocked();
  }

 private:
  void PumpLocked() override {
    if (finished() || writing() || !begun()) return;
    auto next = sub_->Next();
    if (!next.ok()) return FinishLocked(next.status(), false);
    support_.ReportQueue(sub_->queued(), sub_->conflated());
    if (!*next) return;
    const auto& update = **next;
    // Snapshot rows carry no event id: a reconnect in the middle of a snapshot starts anew.
    std::optional<uint64_t> id;
    if (update.kind() != inventory::v1::StockUpdate::KIND_SNAPSHOT) id = update.sequence();
    WriteLocked(update, id);
  }

  void ClearLocked() override {
    if (sub_) sub_->Clear();
  }

  std::optional<core::StockSubscription> sub_;
};

class OrderStream final : public HttpStream {
 public:
  OrderStream(const server::ServiceContext& sc, std::shared_ptr<Exchange> exchange,
              StreamSettings settings, StreamDone done)
      : HttpStream(sc, std::move(exchange), settings, "http_order_updates", std::move(done)) {}

  void Start(const order::v1::OrderSubscriptionRequest& request) {
    if (!RouteTo("order.v1.OrderService/StreamOrderUpdates", request)) return;
    core::InventoryCore& core = *support_.core();
    sub_.emplace(request.order_id());
    if (absl::Status valid = sub_->Validate(core.options().limits); !valid.ok()) {
      return Refuse(valid);
    }
    if (absl::Status registered = Register(); !registered.ok()) return Refuse(registered);
    support_.Attach(this, UINT64_MAX, {sub_->order_id()});
    // Read after attaching: a change that races with the read is either in it or arrives.
    auto order = core.GetOrder(sub_->order_id());
    std::unique_lock lock(mu_);
    if (!order.ok() || finished()) {
      absl::Status why =
          order.ok() ? absl::UnavailableError("the server is shutting down") : order.status();
      FinishLocked(why, false);
      lock.unlock();
      return Refuse(why);
    }
    sub_->Start(*order);
    BeginLocked();
    PumpLocked();
  }

  void OnEvents(const std::vector<core::EventPtr>& events) override {
    std::lock_guard lock(mu_);
    if (finished()) return;
    sub_->Offer(events);
    PumpLocked();
  }

 private:
  void PumpLocked() override {
    if (finished() || writing() || !begun()) return;
    if (last_sent_ && core::OrderSubscription::Ends(*last_sent_)) {
      return FinishLocked(absl::OkStatus(), false);
    }
    last_sent_ = sub_->Next();
    if (last_sent_) WriteLocked(*last_sent_, last_sent_->sequence());
  }

  void ClearLocked() override {
    if (sub_) sub_->Clear();
  }

  std::optional<core::OrderSubscription> sub_;
  std::optional<order::v1::OrderStatusUpdate> last_sent_;
};

}  // namespace

void ServeStockStream(const server::ServiceContext& context, std::shared_ptr<Exchange> exchange,
                      inventory::v1::WatchStockRequest request, StreamSettings settings,
                      StreamDone done) {
  std::make_shared<StockStream>(context, std::move(exchange), settings, std::move(done))
      ->Start(request);
}

void ServeOrderStream(const server::ServiceContext& context, std::shared_ptr<Exchange> exchange,
                      order::v1::OrderSubscriptionRequest request, StreamSettings settings,
                      StreamDone done) {
  std::make_shared<OrderStream>(context, std::move(exchange), settings, std::move(done))
      ->Start(request);
}

}  // namespace feed::http
