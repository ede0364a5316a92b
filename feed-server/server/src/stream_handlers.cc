// Streaming RPCs: WatchStock (server stream), Feed (bidirectional), StreamOrderUpdates.
//
// Each stream keeps one write in flight and a bounded outbound queue (update_queue.h).
// Change-feed callbacks arrive on the writer thread with the feed's lock held, so they only
// queue and, when idle, start the next write. Lock order: registry -> stream; feed -> stream.
// A stream never calls the feed (Subscribe/Unsubscribe) while holding its own lock.
#include <atomic>
#include <chrono>
#include <deque>
#include <memory>

#include "absl/container/flat_hash_set.h"
#include "core/level_key.h"
#include "core/strings.h"
#include "core/validation.h"
#include "server/grpc_status.h"
#include "server/services.h"
#include "server/update_queue.h"
#include "spdlog/spdlog.h"

namespace feed::server {
namespace {

using inventory::v1::StockKey;
using inventory::v1::StockLevel;
using core::LevelKey;
using inventory::v1::StockUpdate;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Which levels a stream wants: exact (sku, location) pairs and whole SKUs.
class StockFilter {
 public:
  void Add(const StockKey& key) {
    if (key.location().empty()) {
      skus_.insert(key.sku());
    } else {
      exact_.insert(LevelKey(key.sku(), key.location()));
    }
  }
  void Remove(const StockKey& key) {
    if (key.location().empty()) {
      skus_.erase(key.sku());
    } else {
      exact_.erase(LevelKey(key.sku(), key.location()));
    }
  }
  void Clear() {
    skus_.clear();
    exact_.clear();
  }
  bool Matches(const StockLevel& level, bool empty_matches_all) const {
    if (skus_.empty() && exact_.empty()) return empty_matches_all;
    return skus_.contains(level.sku()) || exact_.contains(LevelKey(level.sku(), level.location()));
  }
  size_t size() const { return skus_.size() + exact_.size(); }

 private:
  absl::flat_hash_set<std::string> skus_;
  absl::flat_hash_set<std::string> exact_;
};

constexpr size_t kSnapshotChunk = 256;

// ---------------------------------------------------------------------------------------
// What the three stream reactors share: a slot under --max-open-streams, the change-feed
// subscription, the call record, cancellation, and one way to finish.

template <class GrpcReactor>
class StreamReactor : public GrpcReactor,
                      public core::ChangeListener,
                      public StreamRegistry::Stream {
 public:
  // From the registry (shutdown): end the stream with `status`.
  void Close(const grpc::Status& status) override {
    std::lock_guard lock(mu_);
    FinishLocked(status);
  }

  void OnCancel() override {
    std::lock_guard lock(mu_);
    FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client"));
  }

 protected:
  StreamReactor(const ServiceContext& sc, grpc::CallbackServerContext* ctx, const char* method,
                const char* kind)
      : sc_(sc),
        record_(sc.metrics, sc.config->log_rpcs, method, sc.config->log_rpcs ? ctx->peer() : ""),
        kind_(kind) {}

  // Takes a slot under --max-open-streams; when none is left, finishes the stream with
  // RESOURCE_EXHAUSTED and returns false. Call from the derived constructor.
  bool Register() {
    if (!sc_.streams->TryAdd(this)) {
      std::lock_guard lock(mu_);
      FinishLocked(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                StrCat("too many open streams (limit ", sc_.config->max_open_streams,
                                       ")")));
      return false;
    }
    registered_ = true;
    sc_.metrics->StreamOpened(kind_);
    return true;
  }

  // Attaches to the change feed (see ChangeFeed::Subscribe). Not with mu_ held.
  core::ChangeFeed::Attach AttachToFeed(uint64_t after_sequence,
                                        std::vector<std::string> keys = {}) {
    auto attach = sc_.core->change_feed().Subscribe(this, after_sequence, std::move(keys));
    subscribed_ = true;
    return attach;
  }

  // From OnDone: afterwards no event arrives and the slot is free.
  void Unregister() {
    if (subscribed_) sc_.core->change_feed().Unsubscribe(this);
    if (registered_) {
      sc_.streams->Remove(this);
      sc_.metrics->StreamClosed(kind_);
    }
  }

  // A write that failed means the client is gone.
  void WriteFailedLocked() {
    FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
  }

  void FinishLocked(const grpc::Status& status) {
    if (finished_) return;
    finished_ = true;
    record_.Finish(status);
    this->Finish(status);
    OnFinishedLocked();
  }
  // After Finish: free what a client that keeps the call open will never get.
  virtual void OnFinishedLocked() {}

  const ServiceContext sc_;
  CallRecord record_;
  std::mutex mu_;
  bool finished_ = false;

 private:
  const char* const kind_;  // the metrics label
  bool subscribed_ = false;
  bool registered_ = false;
};

// ---------------------------------------------------------------------------------------
// WatchStock

class WatchStockReactor final : public StreamReactor<grpc::ServerWriteReactor<StockUpdate>> {
 public:
  WatchStockReactor(const ServiceContext& sc, grpc::CallbackServerContext* ctx,
                    const inventory::v1::WatchStockRequest& request)
      : StreamReactor(sc, ctx, "inventory.v1.InventoryService/WatchStock", "watch_stock"),
        queue_(static_cast<size_t>(sc.config->stream_max_queued_levels)) {
    Begin(request);
  }

  void OnEvents(const std::vector<core::EventPtr>& events) override {
    std::lock_guard lock(mu_);
    if (finished_) return;
    size_t before = queue_.size();
    uint64_t conflated_before = queue_.conflated();
    bool overflow = false;
    for (const auto& e : events) {
      if (!e->has_stock_changed() || e->sequence() <= min_sequence_) continue;
      const StockLevel& level = e->stock_changed().level();
      if (!filter_.Matches(level, true)) continue;
      overflow |= !queue_.PushLevel(level, e->sequence());
    }
    sc_.metrics->QueuedUpdates(static_cast<int64_t>(queue_.size()) - static_cast<int64_t>(before));
    sc_.metrics->Conflated(queue_.conflated() - conflated_before);
    if (overflow) {
      EndSlowReaderLocked(StrCat("reader too slow: more than ", sc_.config->stream_max_queued_levels,
                                 " levels waiting; resume with resume_after_sequence"));
      return;
    }
    if (writing_ && NowMs() - write_started_ms_ > sc_.config->stream_stall_timeout_ms) {
      EndSlowReaderLocked(StrCat("reader stalled: no write completed for ",
                                 sc_.config->stream_stall_timeout_ms, " ms"));
      return;
    }
    PumpLocked();
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mu_);
    writing_ = false;
    if (!ok) {
      WriteFailedLocked();
      return;
    }
    PumpLocked();
  }

  void OnDone() override {
    Unregister();
    sc_.metrics->QueuedUpdates(-static_cast<int64_t>(queue_.size()));
    delete this;
  }

 private:
  // The SKUs the change feed should deliver to this stream: those of its keys, or none
  // (= every event) when it watches everything.
  static std::vector<std::string> WatchedSkus(const inventory::v1::WatchStockRequest& request) {
    std::vector<std::string> skus;
    for (const auto& k : request.keys()) skus.push_back(k.sku());
    return skus;
  }

  void Begin(const inventory::v1::WatchStockRequest& request) {
    if (auto s = core::ValidateStockKeys("keys", request.keys(), sc_.core->options()); !s.ok()) {
      std::lock_guard lock(mu_);
      FinishLocked(ToGrpcStatus(s));
      return;
    }
    if (!Register()) return;
    for (const auto& k : request.keys()) filter_.Add(k);
    filter_keys_.assign(request.keys().begin(), request.keys().end());

    bool want_snapshot = request.resume_after_sequence() == 0;
    if (!want_snapshot) {
      // Attach with replay: retained events after the client's sequence, then live ones.
      auto attach = AttachToFeed(request.resume_after_sequence(), WatchedSkus(request));
      std::lock_guard lock(mu_);
      if (attach.gap && !request.snapshot_on_gap()) {
        FinishLocked(grpc::Status(
            grpc::StatusCode::OUT_OF_RANGE,
            StrCat("resume_after_sequence ", request.resume_after_sequence(),
                   " is no longer retained (oldest retained: ", attach.oldest_retained,
                   "); resubscribe with resume_after_sequence=0 or snapshot_on_gap=true")));
        return;
      }
      if (!attach.gap) {
        for (const auto& e : attach.replay) {
          if (e->has_stock_changed() && filter_.Matches(e->stock_changed().level(), true)) {
            queue_.PushLevel(e->stock_changed().level(), e->sequence());
          }
        }
        sc_.metrics->QueuedUpdates(static_cast<int64_t>(queue_.size()));
        PumpLocked();
        return;
      }
      // Gap with snapshot_on_gap: fall through to a fresh snapshot; the live events already
      // queued are filtered by min_sequence_ below.
      want_snapshot = true;
    } else {
      AttachToFeed(UINT64_MAX, WatchedSkus(request));
    }
    // Subscribed first, snapshot second: every change after the snapshot's sequence arrives
    // live; older ones are in the snapshot and skipped by min_sequence_.
    auto snapshot = sc_.core->OpenStockSnapshot(filter_keys_);
    std::lock_guard lock(mu_);
    if (!snapshot.ok()) {
      FinishLocked(ToGrpcStatus(snapshot.status()));
      return;
    }
    snapshot_ = std::move(*snapshot);
    min_sequence_ = snapshot_->as_of_sequence();
    // Drop anything queued before the snapshot was taken that the snapshot already covers.
    ConflatingQueue fresh(static_cast<size_t>(sc_.config->stream_max_queued_levels));
    while (auto u = queue_.Pop()) {
      if (u->sequence() > min_sequence_) fresh.PushLevel(u->level(), u->sequence());
    }
    queue_ = std::move(fresh);
    PumpLocked();
  }

  // Starts the next write if none is in flight: snapshot rows, the snapshot end marker,
  // then queued changes.
  void PumpLocked() {
    if (finished_ || writing_) return;
    if (snapshot_ && snapshot_rows_.empty()) {
      std::vector<StockLevel> rows;
      auto more = snapshot_->Next(kSnapshotChunk, &rows);
      if (!more.ok()) {
        FinishLocked(ToGrpcStatus(more.status()));
        return;
      }
      for (auto& level : rows) {
        StockUpdate u;
        u.set_kind(StockUpdate::KIND_SNAPSHOT);
        u.set_sequence(snapshot_->as_of_sequence());
        *u.mutable_level() = std::move(level);
        snapshot_rows_.push_back(std::move(u));
      }
      if (!*more) {
        StockUpdate end;
        end.set_kind(StockUpdate::KIND_SNAPSHOT_END);
        end.set_sequence(snapshot_->as_of_sequence());
        snapshot_rows_.push_back(std::move(end));
        snapshot_.reset();
      }
    }
    if (!snapshot_rows_.empty()) {
      in_flight_ = std::move(snapshot_rows_.front());
      snapshot_rows_.pop_front();
    } else if (auto next = queue_.Pop()) {
      in_flight_ = std::move(*next);
      sc_.metrics->QueuedUpdates(-1);
    } else {
      return;
    }
    writing_ = true;
    write_started_ms_ = NowMs();
    StartWrite(&in_flight_);
  }

  void EndSlowReaderLocked(const std::string& why) {
    sc_.metrics->SlowReaderEnded();
    FinishLocked(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, why));
  }

  void OnFinishedLocked() override {
    // A stalled client may keep the call open long after this: free what it will never get.
    sc_.metrics->QueuedUpdates(-static_cast<int64_t>(queue_.size()));
    queue_ = ConflatingQueue(static_cast<size_t>(sc_.config->stream_max_queued_levels));
    snapshot_.reset();
    snapshot_rows_.clear();
  }

  StockFilter filter_;
  std::vector<StockKey> filter_keys_;
  ConflatingQueue queue_;
  std::unique_ptr<core::InventoryCore::StockSnapshot> snapshot_;
  std::deque<StockUpdate> snapshot_rows_;
  uint64_t min_sequence_ = 0;
  StockUpdate in_flight_;
  bool writing_ = false;
  int64_t write_started_ms_ = 0;
};

// ---------------------------------------------------------------------------------------
// Feed: commands in, results and live updates out, on one stream.

class FeedReactor final
    : public StreamReactor<
          grpc::ServerBidiReactor<inventory::v1::FeedRequest, inventory::v1::FeedResponse>> {
 public:
  FeedReactor(const ServiceContext& sc, grpc::CallbackServerContext* ctx)
      : StreamReactor(sc, ctx, "inventory.v1.InventoryService/Feed", "feed"),
        updates_(static_cast<size_t>(sc.config->stream_max_queued_levels)) {
    if (!Register()) return;
    AttachToFeed(UINT64_MAX);
    reading_ = true;
    StartRead(&request_);
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
    inventory::v1::FeedRequest request = std::move(request_);
    request_.Clear();
    if (request.more_size() > 0) batched_client_ = true;
    // reading_ stays true until every command of this message is dispatched: a result
    // completing meanwhile must not start the next read, or a half-close could finish the
    // stream before the rest of this message has even reached the core.
    lock.unlock();
    try {
      DispatchMessage(std::move(request));
    } catch (const std::exception& e) {
      spdlog::error("Feed: unexpected exception: {}", e.what());
      std::lock_guard relock(mu_);
      reading_ = false;
      FinishLocked(grpc::Status(grpc::StatusCode::INTERNAL, "internal error"));
      return;
    }
    lock.lock();
    reading_ = false;
    ReadMoreLocked();
    MaybeFinishLocked();
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mu_);
    writing_ = false;
    if (!ok) {
      WriteFailedLocked();
      return;
    }
    PumpLocked();
    ReadMoreLocked();
    MaybeFinishLocked();
  }

  void OnEvents(const std::vector<core::EventPtr>& events) override {
    std::lock_guard lock(mu_);
    if (finished_ || filter_.size() == 0) return;
    size_t before = updates_.size();
    uint64_t conflated_before = updates_.conflated();
    bool overflow = false;
    for (const auto& e : events) {
      if (!e->has_stock_changed()) continue;
      const StockLevel& level = e->stock_changed().level();
      if (!filter_.Matches(level, false)) continue;
      overflow |= !updates_.PushLevel(level, e->sequence());
    }
    sc_.metrics->QueuedUpdates(static_cast<int64_t>(updates_.size()) -
                               static_cast<int64_t>(before));
    sc_.metrics->Conflated(updates_.conflated() - conflated_before);
    if (overflow || (writing_ && NowMs() - write_started_ms_ > sc_.config->stream_stall_timeout_ms)) {
      sc_.metrics->SlowReaderEnded();
      FinishLocked(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                overflow ? "reader too slow: too many levels waiting"
                                         : "reader stalled"));
      return;
    }
    PumpLocked();
  }

  void OnDone() override {
    Unregister();
    std::vector<std::string> leased;
    bool delete_now;
    {
      std::lock_guard lock(mu_);
      done_ = true;
      delete_now = in_flight_commands_ == 0;
      leased.assign(leases_.begin(), leases_.end());
      sc_.metrics->QueuedUpdates(-static_cast<int64_t>(updates_.size()));
    }
    // Holds leased to this stream and neither committed nor released die with it.
    for (const auto& id : leased) {
      inventory::v1::ReleaseRequest release;
      release.set_reservation_id(id);
      release.set_reason("lease ended: the Feed stream closed");
      sc_.core->Release(std::move(release), [id](absl::StatusOr<inventory::v1::ReleaseResponse> r) {
        if (!r.ok() && r.status().code() != absl::StatusCode::kFailedPrecondition) {
          spdlog::warn("Feed: releasing leased hold '{}' failed: {}", id, r.status().ToString());
        }
      });
    }
    if (delete_now) delete this;
  }

 private:
  // One message: its own command, then those in `more`, in order.
  void DispatchMessage(inventory::v1::FeedRequest request) {
    const size_t commands = 1 + static_cast<size_t>(request.more_size());
    const auto limit = static_cast<size_t>(sc_.config->feed_max_inflight_commands);
    if (commands > limit) {
      // Every command still gets its one result, all the same error.
      const absl::Status too_many = absl::InvalidArgumentError(
          StrCat("more: ", commands, " commands in one message; at most ", limit,
                 " (--feed-max-inflight)"));
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
        PushResultLocked(m.request_id(),
                         absl::InvalidArgumentError("more: a command inside `more` may not "
                                                    "carry `more` itself"),
                         {});
        continue;
      }
      Dispatch(std::move(m));
    }
  }

  // Commands go to the core; their results come back on the writer thread.
  void Dispatch(inventory::v1::FeedRequest request) {
    const std::string id = request.request_id();
    switch (request.command_case()) {
      case inventory::v1::FeedRequest::kReserve: {
        bool lease = request.reserve().lease_to_stream();
        BeginCommand();
        sc_.core->Reserve(std::move(*request.mutable_reserve()->mutable_request()),
                          [this, id, lease](absl::StatusOr<inventory::v1::ReserveResponse> r) {
                            inventory::v1::FeedResponse out;
                            if (r.ok()) {
                              if (lease) {
                                std::lock_guard lock(mu_);
                                leases_.insert(r->reservation().reservation_id());
                              }
                              *out.mutable_reserve() = std::move(*r);
                            }
                            EndCommand(id, r.status(), std::move(out));
                          });
        return;
      }
      case inventory::v1::FeedRequest::kCommit: {
        std::string rid = request.commit().reservation_id();
        BeginCommand();
        sc_.core->Commit(std::move(*request.mutable_commit()),
                         [this, id, rid](absl::StatusOr<inventory::v1::CommitResponse> r) {
                           inventory::v1::FeedResponse out;
                           if (r.ok()) *out.mutable_commit() = std::move(*r);
                           EndCommand(id, r.status(), std::move(out), rid);
                         });
        return;
      }
      case inventory::v1::FeedRequest::kRelease: {
        std::string rid = request.release().reservation_id();
        BeginCommand();
        sc_.core->Release(std::move(*request.mutable_release()),
                          [this, id, rid](absl::StatusOr<inventory::v1::ReleaseResponse> r) {
                            inventory::v1::FeedResponse out;
                            if (r.ok()) *out.mutable_release() = std::move(*r);
                            EndCommand(id, r.status(), std::move(out), rid);
                          });
        return;
      }
      case inventory::v1::FeedRequest::kSubscribe:
        Subscribe(id, request.subscribe());
        return;
      case inventory::v1::FeedRequest::kUnsubscribe: {
        std::lock_guard lock(mu_);
        if (request.unsubscribe().keys().empty()) {
          filter_.Clear();
        } else {
          for (const auto& k : request.unsubscribe().keys()) filter_.Remove(k);
        }
        PushResultLocked(id, absl::OkStatus(), AckLocked());
        return;
      }
      case inventory::v1::FeedRequest::kHeartbeat: {
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

  void Subscribe(const std::string& id, const inventory::v1::FeedSubscribe& sub) {
    if (sub.keys().empty()) {
      std::lock_guard lock(mu_);
      PushResultLocked(id, absl::InvalidArgumentError("subscribe.keys: at least one key is required"),
                       {});
      return;
    }
    inventory::v1::GetStockRequest read;
    *read.mutable_keys() = sub.keys();
    absl::StatusOr<inventory::v1::GetStockResponse> current;
    if (sub.snapshot()) {
      current = sc_.core->GetStock(read);  // also validates the keys
    } else {
      current = core::ValidateGetStock(read, sc_.core->options());
      if (current.ok()) current = inventory::v1::GetStockResponse();
    }
    std::lock_guard lock(mu_);
    if (!current.ok()) {
      PushResultLocked(id, current.status(), {});
      return;
    }
    if (filter_.size() + sub.keys().size() > sc_.core->options().limits.max_keys_per_read) {
      PushResultLocked(id, absl::InvalidArgumentError(StrCat(
                               "subscribe.keys: a stream may subscribe to at most ",
                               sc_.core->options().limits.max_keys_per_read, " keys")),
                       {});
      return;
    }
    for (const auto& k : sub.keys()) filter_.Add(k);
    for (const auto& level : current->levels()) {
      updates_.PushLevel(level, level.sequence(), StockUpdate::KIND_SNAPSHOT);
    }
    PushResultLocked(id, absl::OkStatus(), AckLocked());
  }

  inventory::v1::FeedResponse AckLocked() {
    inventory::v1::FeedResponse out;
    out.mutable_ack()->set_subscriptions(static_cast<int32_t>(filter_.size()));
    out.mutable_ack()->set_server_time_ms(
        std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::system_clock::now().time_since_epoch())
            .count());
    return out;
  }

  void BeginCommand() {
    std::lock_guard lock(mu_);
    ++in_flight_commands_;
  }

  // Runs on the writer thread. The last completion after OnDone deletes the reactor.
  void EndCommand(const std::string& id, const absl::Status& status,
                  inventory::v1::FeedResponse out, const std::string& closed_reservation = "") {
    bool delete_now = false;
    {
      std::lock_guard lock(mu_);
      --in_flight_commands_;
      if (status.ok() && !closed_reservation.empty()) leases_.erase(closed_reservation);
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

  void PushResultLocked(const std::string& id, const absl::Status& status,
                        inventory::v1::FeedResponse out) {
    if (finished_) return;
    out.set_request_id(id);
    out.set_code(static_cast<int32_t>(status.code()));
    if (!status.ok()) out.set_message(std::string(status.message()));
    results_.push_back(std::move(out));
    PumpLocked();
  }

  // Results first (in order; packed into one message for a batching client), then
  // conflated stock updates.
  void PumpLocked() {
    if (finished_ || writing_) return;
    if (!results_.empty()) {
      out_ = std::move(results_.front());
      results_.pop_front();
      while (batched_client_ && !results_.empty() && out_.more_size() < kMaxResultsPerMessage) {
        *out_.add_more() = std::move(results_.front());
        results_.pop_front();
      }
    } else if (auto u = updates_.Pop()) {
      out_.Clear();
      *out_.mutable_stock_update() = std::move(*u);
      sc_.metrics->QueuedUpdates(-1);
    } else {
      return;
    }
    writing_ = true;
    write_started_ms_ = NowMs();
    StartWrite(&out_);
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
    StartRead(&request_);
  }

  void MaybeFinishLocked() {
    if (half_closed_ && in_flight_commands_ == 0 && results_.empty() && !writing_) {
      FinishLocked(grpc::Status::OK);
    }
  }

  void OnFinishedLocked() override {
    sc_.metrics->QueuedUpdates(-static_cast<int64_t>(updates_.size()));
    updates_ = ConflatingQueue(static_cast<size_t>(sc_.config->stream_max_queued_levels));
    results_.clear();
  }

  inventory::v1::FeedRequest request_;
  inventory::v1::FeedResponse out_;
  std::deque<inventory::v1::FeedResponse> results_;
  ConflatingQueue updates_;
  StockFilter filter_;
  absl::flat_hash_set<std::string> leases_;
  // Results per message for a batching client: bounded so one write stays well under the
  // client's default 4 MB receive limit even with large reservations.
  static constexpr int kMaxResultsPerMessage = 255;
  int in_flight_commands_ = 0;
  bool batched_client_ = false;  // it has sent FeedRequest.more: pack its results too
  bool reading_ = false;  // a read is outstanding, or the message it read is being dispatched
  bool writing_ = false;
  bool half_closed_ = false;
  bool done_ = false;
  int64_t write_started_ms_ = 0;
};

// ---------------------------------------------------------------------------------------
// StreamOrderUpdates: the current status, then every change, until a terminal status.

class OrderUpdatesReactor final
    : public StreamReactor<grpc::ServerWriteReactor<order::v1::OrderStatusUpdate>> {
 public:
  OrderUpdatesReactor(const ServiceContext& sc, grpc::CallbackServerContext* ctx,
                      const order::v1::OrderSubscriptionRequest& request)
      : StreamReactor(sc, ctx, "order.v1.OrderService/StreamOrderUpdates", "order_updates"),
        order_id_(request.order_id()) {
    if (auto s = core::ValidateId("order_id", order_id_, sc_.core->options().limits); !s.ok()) {
      std::lock_guard lock(mu_);
      FinishLocked(ToGrpcStatus(s));
      return;
    }
    if (!Register()) return;
    AttachToFeed(UINT64_MAX, {order_id_});
    auto order = sc_.core->GetOrder(order_id_);
    std::lock_guard lock(mu_);
    if (!order.ok()) {
      FinishLocked(ToGrpcStatus(order.status()));
      return;
    }
    min_sequence_ = order->sequence();
    // Changes that raced with the read above and are already included in it.
    std::deque<order::v1::OrderStatusUpdate> later;
    for (auto& u : pending_) {
      if (u.sequence() > min_sequence_) later.push_back(std::move(u));
    }
    order::v1::OrderStatusUpdate current;
    current.set_order_id(order->order_id());
    current.set_status(std::string(core::OrderStatusName(order->status())));
    current.set_status_code(order->status());
    current.set_details(order->details());
    current.set_sequence(order->sequence());
    current.set_timestamp_ms(order->updated_at_ms());
    later.push_front(std::move(current));
    pending_ = std::move(later);
    started_ = true;
    PumpLocked();
  }

  void OnEvents(const std::vector<core::EventPtr>& events) override {
    std::lock_guard lock(mu_);
    if (finished_) return;
    for (const auto& e : events) {
      if (!e->has_order_status_changed() || e->key() != order_id_) continue;
      if (started_ && e->sequence() <= min_sequence_) continue;
      const auto& change = e->order_status_changed();
      order::v1::OrderStatusUpdate u;
      u.set_order_id(change.order_id());
      u.set_status(change.status_name());
      u.set_status_code(change.status());
      u.set_details(change.details());
      u.set_sequence(e->sequence());
      u.set_timestamp_ms(e->occurred_at().seconds() * 1000 + e->occurred_at().nanos() / 1000000);
      pending_.push_back(std::move(u));
    }
    PumpLocked();
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mu_);
    writing_ = false;
    if (!ok) {
      WriteFailedLocked();
      return;
    }
    if (core::IsTerminal(in_flight_.status_code())) {
      FinishLocked(grpc::Status::OK);
      return;
    }
    PumpLocked();
  }

  void OnDone() override {
    Unregister();
    delete this;
  }

 private:
  void PumpLocked() {
    if (finished_ || writing_ || !started_ || pending_.empty()) return;
    in_flight_ = std::move(pending_.front());
    pending_.pop_front();
    writing_ = true;
    StartWrite(&in_flight_);
  }

  const std::string order_id_;
  std::deque<order::v1::OrderStatusUpdate> pending_;
  order::v1::OrderStatusUpdate in_flight_;
  uint64_t min_sequence_ = 0;
  bool started_ = false;
  bool writing_ = false;
};

}  // namespace

grpc::ServerWriteReactor<inventory::v1::StockUpdate>* InventoryServiceImpl::WatchStock(
    grpc::CallbackServerContext* ctx, const inventory::v1::WatchStockRequest* request) {
  return new WatchStockReactor(ctx_, ctx, *request);
}

grpc::ServerBidiReactor<inventory::v1::FeedRequest, inventory::v1::FeedResponse>*
InventoryServiceImpl::Feed(grpc::CallbackServerContext* ctx) {
  return new FeedReactor(ctx_, ctx);
}

grpc::ServerWriteReactor<order::v1::OrderStatusUpdate>* OrderServiceImpl::StreamOrderUpdates(
    grpc::CallbackServerContext* ctx, const order::v1::OrderSubscriptionRequest* request) {
  return new OrderUpdatesReactor(ctx_, ctx, *request);
}

}  // namespace feed::server
