// Feed: commands in, results and live updates out, on one stream. The subscription, update
// order and lease rules are core::FeedSession's; this reactor reads and dispatches
// commands, applies backpressure and packs results. In cluster mode a stream serves one
// shard, named by the request metadata `feed-shard`, on that shard's owner; a command or
// subscription of another shard is refused on its own.
#include <chrono>
#include <deque>
#include <optional>

#include "core/feed_session.h"
#include "server/logging.h"
#include "stream_reactor.h"

namespace feed::server {
namespace {

using inventory::v1::FeedRequest;
using inventory::v1::FeedResponse;

class FeedReactor final
    : public StreamReactor<grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>> {
 public:
  FeedReactor(const ServiceContext& sc, grpc::CallbackServerContext* ctx)
      : StreamReactor(sc, ctx, kMethod, "feed") {
    if (!Authorize(ctx)) return;
    if (sc.router != nullptr && !PinToShard()) return;
    if (!Register()) return;
    session_.emplace(core(), StreamQueueLimits(*sc.config));
    session_->set_actor(subject());
    // Every event, so that the session knows how far the feed has got (snapshot cuts).
    auto attach = AttachToFeed(UINT64_MAX);
    std::lock_guard lock(mu_);
    session_->Attached(attach);
    reading_ = true;
    StartRead(&incoming_);
  }

  void OnReadDone(bool ok) override {
    std::unique_lock lock(mu_);
    if (!ok) {
      // The client half-closed (or went away): finish once every result is written.
      reading_ = false;
      half_closed_ = true;
      MaybeFinishLocked();
      return;
    }
    if (finished_) return;
    FeedRequest request;
    absl::Status parsed = ParseRequest(incoming_, &request);
    incoming_.Clear();
    if (!parsed.ok()) {
      reading_ = false;
      FinishLocked(RejectUnparseable(sc_, kMethod, std::move(parsed)));
      return;
    }
    if (request.more_size() > 0) batched_client_ = true;
    // reading_ stays true until every command of this message is dispatched: a result
    // completing meanwhile must not start the next read, or a half-close could finish the
    // stream before the rest of this message has even reached the core.
    lock.unlock();
    try {
      DispatchMessage(std::move(request));
    } catch (const std::exception& e) {
      ServerLog()->error("Feed: unexpected exception: {}", e.what());
      std::lock_guard relock(mu_);
      reading_ = false;
      FinishLocked(absl::InternalError("internal error"));
      return;
    }
    lock.lock();
    reading_ = false;
    ReadMoreLocked();
    MaybeFinishLocked();
  }

  void OnEvents(const std::vector<core::EventPtr>& events) override {
    std::lock_guard lock(mu_);
    if (finished_) return;
    session_->set_reader_behind(ReaderBehindLocked());
    absl::Status queued = session_->Offer(events);
    ReportQueueLocked(session_->queued(), session_->conflated());
    if (!EndIfSlowLocked(queued)) PumpLocked();
  }

  void OnDone() override {
    Unregister();
    bool delete_now;
    {
      std::lock_guard lock(mu_);
      done_ = true;
      delete_now = in_flight_commands_ == 0;
    }
    if (delete_now) delete this;
  }

 private:
  static constexpr const char* kMethod = "inventory.v1.InventoryService/Feed";
  // Results per message for a batching client: bounded so one write stays well under the
  // client's default 4 MB receive limit even with large reservations.
  static constexpr int kMaxResultsPerMessage = 255;

  // Cluster mode: the shard named by the metadata, served here. False when the stream was
  // finished instead (no such metadata or shard; UNAVAILABLE naming the owner elsewhere).
  bool PinToShard() {
    auto named = ShardInMetadata();
    if (!named.ok()) return Refuse(named.status());
    if (!named->has_value()) {
      return Refuse(absl::FailedPreconditionError(fmt::format(
          "{}: in cluster mode a Feed stream serves the commands and subscriptions of one "
          "shard; open one per shard on its owner with the request metadata {}: <0 to {}> "
          "(GetShardMap names the owners)",
          kShardSelectorKey, kShardSelectorKey, sc_.router->shard_count() - 1)));
    }
    if (!RouteToShard(**named)) return false;
    shard_ = **named;
    return true;
  }

  // Cluster mode: OK when `request` (of unary method `method`) is on this stream's shard.
  absl::Status OnThisShard(std::string_view method, const google::protobuf::Message& request) {
    if (!shard_) return absl::OkStatus();
    auto shard = sc_.router->ShardOf(method, request);
    if (!shard.ok()) return shard.status();
    if (*shard == *shard_) return absl::OkStatus();
    return absl::FailedPreconditionError(fmt::format(
        "this command is for shard {} and this stream serves shard {} ({}): send it on a "
        "stream of shard {}, on its owner",
        *shard, *shard_, kShardSelectorKey, *shard));
  }

  absl::Status OnThisShard(const FeedRequest& request) {
    if (!shard_) return absl::OkStatus();
    switch (request.command_case()) {
      case FeedRequest::kReserve:
        return OnThisShard("inventory.v1.InventoryService/Reserve", request.reserve().request());
      case FeedRequest::kCommit:
        return OnThisShard("inventory.v1.InventoryService/Commit", request.commit());
      case FeedRequest::kRelease:
        return OnThisShard("inventory.v1.InventoryService/Release", request.release());
      case FeedRequest::kSubscribe: {
        inventory::v1::WatchStockRequest keys;
        *keys.mutable_keys() = request.subscribe().keys();
        return OnThisShard("inventory.v1.InventoryService/WatchStock", keys);
      }
      default:
        return absl::OkStatus();
    }
  }

  // One message: its own command, then those in `more`, in order.
  void DispatchMessage(FeedRequest request) {
    const size_t commands = 1 + static_cast<size_t>(request.more_size());
    const auto limit = static_cast<size_t>(sc_.config->feed_max_inflight_commands);
    if (commands > limit) {
      // Every command still gets its one result, all the same error.
      const absl::Status too_many = absl::InvalidArgumentError(fmt::format(
          "more: {} commands in one message; at most {} (--feed-max-inflight)", commands, limit));
      std::lock_guard lock(mu_);
      PushResultLocked(request.request_id(), too_many, {});
      for (const auto& m : request.more()) PushResultLocked(m.request_id(), too_many, {});
      return;
    }
    auto more = std::move(*request.mutable_more());
    Dispatch(std::move(request));
    for (auto& m : more) {
      if (m.more_size() > 0) {
        std::lock_guard lock(mu_);
        PushResultLocked(
            m.request_id(),
            absl::InvalidArgumentError("more: a command inside `more` may not carry `more` itself"),
            {});
        continue;
      }
      Dispatch(std::move(m));
    }
  }

  // Commands go to the core; their results come back on the core's completer thread.
  void Dispatch(FeedRequest request) {
    const std::string id = request.request_id();
    if (request.command_case() != FeedRequest::kHeartbeat) {
      // Each command counts against the subject's rate limit, like a unary call.
      if (absl::Status limited = sc_.auth->Charge(subject()); !limited.ok()) {
        std::lock_guard lock(mu_);
        PushResultLocked(id, limited, {});
        return;
      }
    }
    if (absl::Status here = OnThisShard(request); !here.ok()) {
      std::lock_guard lock(mu_);
      PushResultLocked(id, here, {});
      return;
    }
    switch (request.command_case()) {
      case FeedRequest::kReserve: {
        const bool lease = request.reserve().lease_to_stream();
        BeginCommand();
        core().Reserve(
            std::move(*request.mutable_reserve()->mutable_request()),
            [this, id, lease](absl::StatusOr<inventory::v1::ReserveResponse> r) {
              FeedResponse out;
              std::string leased;
              if (r.ok()) {
                if (lease) leased = r->reservation().reservation_id();
                *out.mutable_reserve() = std::move(*r);
              }
              EndCommand(id, r.status(), std::move(out), leased, "");
            },
            core::ActingAs(subject()));
        return;
      }
      case FeedRequest::kCommit:
        Close(id, std::move(*request.mutable_commit()), &core::InventoryCore::Commit,
              [](FeedResponse& out) { return out.mutable_commit(); });
        return;
      case FeedRequest::kRelease:
        Close(id, std::move(*request.mutable_release()), &core::InventoryCore::Release,
              [](FeedResponse& out) { return out.mutable_release(); });
        return;
      case FeedRequest::kSubscribe:
        Subscribe(id, request.subscribe());
        return;
      case FeedRequest::kUnsubscribe: {
        std::lock_guard lock(mu_);
        session_->Unsubscribe(request.unsubscribe());
        PushResultLocked(id, absl::OkStatus(), AckLocked());
        return;
      }
      case FeedRequest::kHeartbeat: {
        std::lock_guard lock(mu_);
        PushResultLocked(id, absl::OkStatus(), AckLocked());
        return;
      }
      default: {
        std::lock_guard lock(mu_);
        PushResultLocked(id,
                         absl::InvalidArgumentError(
                             "command: one of subscribe, unsubscribe, reserve, commit, release "
                             "or heartbeat is required"),
                         {});
        return;
      }
    }
  }

  // Commit or Release: a hold closed through this stream is no longer leased to it.
  template <class Req, class Resp, class Field>
  void Close(const std::string& id, Req request,
             void (core::InventoryCore::*apply)(Req, core::Done<Resp>, core::CallContext),
             Field field) {
    std::string rid = request.reservation_id();
    BeginCommand();
    core::Done<Resp> done = [this, id, rid, field](absl::StatusOr<Resp> r) {
      FeedResponse out;
      if (r.ok()) *field(out) = std::move(*r);
      EndCommand(id, r.status(), std::move(out), "", rid);
    };
    // GCC 12 with -fsanitize=address,undefined sees the by-value CallContext (a std::function
    // and a string) moved through the member-function pointer as maybe uninitialized: a false
    // positive (it is built in the call).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
    (core().*apply)(std::move(request), std::move(done), core::ActingAs(subject()));
#pragma GCC diagnostic pop
  }

  void Subscribe(const std::string& id, const inventory::v1::FeedSubscribe& request) {
    absl::StatusOr<core::FeedSession::Subscription> sub;
    {
      std::lock_guard lock(mu_);
      sub = session_->BeginSubscribe(request);
      if (!sub.ok() || !sub->snapshot) {
        PushResultLocked(id, sub.status(), sub.ok() ? AckLocked() : FeedResponse());
        return;
      }
    }
    auto rows = session_->ReadSnapshot(*sub);  // the store, without the stream's lock
    std::lock_guard lock(mu_);
    absl::Status completed = session_->CompleteSubscribe(*sub, std::move(rows));
    ReportQueueLocked(session_->queued(), session_->conflated());
    if (session_->overflowed()) {
      EndIfSlowLocked(core::SlowReaderError(StreamQueueLimits(*sc_.config)));
      return;
    }
    PushResultLocked(id, completed, completed.ok() ? AckLocked() : FeedResponse());
  }

  FeedResponse AckLocked() {
    FeedResponse out;
    out.mutable_ack()->set_subscriptions(static_cast<int32_t>(session_->subscriptions()));
    out.mutable_ack()->set_server_time_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                                              std::chrono::system_clock::now().time_since_epoch())
                                              .count());
    return out;
  }

  void BeginCommand() {
    std::lock_guard lock(mu_);
    ++in_flight_commands_;
  }

  // Runs on the core's completer thread. The last completion after OnDone deletes the
  // reactor. A hold leased after the stream ended is released by the session at once.
  void EndCommand(const std::string& id, const absl::Status& status, FeedResponse out,
                  const std::string& leased, const std::string& closed) {
    bool delete_now = false;
    {
      std::lock_guard lock(mu_);
      --in_flight_commands_;
      if (!leased.empty()) session_->Leased(leased);
      if (status.ok() && !closed.empty()) session_->Closed(closed);
      if (done_) {
        delete_now = in_flight_commands_ == 0;
      } else {
        PushResultLocked(id, status, std::move(out));
        ReadMoreLocked();
        MaybeFinishLocked();
      }
    }
    if (delete_now) delete this;
  }

  void PushResultLocked(const std::string& id, const absl::Status& status, FeedResponse out) {
    if (finished_) return;
    out.set_request_id(id);
    SetFeedResult(status, &out);
    results_.push_back(std::move(out));
    PumpLocked();
  }

  void AfterWriteLocked() override {
    PumpLocked();
    ReadMoreLocked();
    MaybeFinishLocked();
  }

  // Results first (in order; packed into one message for a batching client), then stock
  // updates.
  void PumpLocked() {
    if (finished_ || writing()) return;
    if (!results_.empty()) {
      FeedResponse out = std::move(results_.front());
      results_.pop_front();
      while (batched_client_ && !results_.empty() && out.more_size() < kMaxResultsPerMessage) {
        *out.add_more() = std::move(results_.front());
        results_.pop_front();
      }
      WriteLocked(out);
    } else if (auto u = session_->NextUpdate()) {
      ReportQueueLocked(session_->queued(), session_->conflated());
      FeedResponse out;
      *out.mutable_stock_update() = std::move(*u);
      WriteLocked(out);
    }
  }

  // Backpressure: read the next command only while fewer than the limit are in flight or
  // waiting to be written.
  void ReadMoreLocked() {
    if (finished_ || reading_ || half_closed_) return;
    if (in_flight_commands_ + static_cast<int>(results_.size()) >=
        sc_.config->feed_max_inflight_commands) {
      return;
    }
    reading_ = true;
    StartRead(&incoming_);
  }

  void MaybeFinishLocked() {
    if (half_closed_ && in_flight_commands_ == 0 && results_.empty() && !writing()) {
      FinishLocked(absl::OkStatus());
    }
  }

  // Every way a stream ends passes here: its leased holds are released now.
  void OnFinishedLocked() override {
    if (session_) session_->End();
    results_.clear();
  }

  grpc::ByteBuffer incoming_;
  std::deque<FeedResponse> results_;
  // Set once the stream is authorized, routed and registered.
  std::optional<core::FeedSession> session_;
  std::optional<uint32_t> shard_;  // cluster mode: the one shard this stream serves
  int in_flight_commands_ = 0;
  bool batched_client_ = false;  // it has sent FeedRequest.more: pack its results too
  bool reading_ = false;  // a read is outstanding, or the message it read is being dispatched
  bool half_closed_ = false;
  bool done_ = false;
};

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* InventoryServiceImpl::Feed(
    grpc::CallbackServerContext* ctx) {
  return new FeedReactor(ctx_, ctx);
}

}  // namespace feed::server
