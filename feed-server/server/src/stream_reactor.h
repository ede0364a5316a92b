// What the three gRPC stream reactors share: the call record, cancellation, one way to
// finish (an absl::Status, converted once) and one write in flight; the slot, the feed
// attachment and the slow-reader rules are StreamSupport's (shared with the HTTP streams).
//
// Threads: change-feed callbacks (OnEvents) arrive on the core's publisher thread with the
// feed's lock held, so they only queue and, when no write is in flight, start the next one.
// gRPC reactions (OnReadDone, OnWriteDone, OnCancel, OnDone) run on gRPC's threads; Close
// on the shutting-down thread with the registry's lock held. Lock order: registry -> stream,
// feed -> stream; a stream never calls the feed while holding its own lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "call_auth.h"
#include "core/change_feed.h"
#include "core/stock_update_queue.h"
#include "fmt/format.h"
#include "grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "server/services.h"
#include "server/stream_support.h"
#include "wire.h"

namespace feed::server {

template <class GrpcReactor>
class StreamReactor : public GrpcReactor,
                      public core::ChangeListener,
                      public StreamRegistry::Stream {
 public:
  // From the registry (shutdown): end the stream with `status`.
  void Close(const absl::Status& status) override {
    std::lock_guard lock(mu_);
    FinishLocked(status);
  }

  // The core's feed ended (cluster mode: the shard moved away from this node).
  void OnClosed(const absl::Status& why) override {
    std::lock_guard lock(mu_);
    FinishLocked(why);
  }

  void OnCancel() override {
    std::lock_guard lock(mu_);
    FinishLocked(absl::CancelledError("cancelled by the client"));
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mu_);
    support_.WriteDone();
    if (!ok) {
      FinishLocked(absl::CancelledError("client went away"));
      return;
    }
    AfterWriteLocked();
  }

 protected:
  StreamReactor(const ServiceContext& sc, grpc::CallbackServerContext* ctx, const char* method,
                const char* kind)
      : sc_(sc),
        ctx_(ctx),
        support_(sc, kind),
        record_(sc.metrics, sc.access_log, method, sc.access_log ? ctx->peer() : ""),
        method_(method) {}

  // Checks the caller's credentials and the method's scope, once, when the stream opens;
  // when denied, finishes the stream and returns false.
  bool Authorize(grpc::CallbackServerContext* ctx) {
    security::Decision decision = AuthorizeCall(sc_, ctx, method_);
    if (decision.status.ok()) {
      subject_ = decision.principal->subject;
      record_.set_subject(subject_);
      return true;
    }
    std::lock_guard lock(mu_);
    FinishLocked(decision.status);
    return false;
  }
  // The authenticated subject (empty when authentication is off).
  const std::string& subject() const { return subject_; }

  // Parses the request bytes; on failure finishes the stream with INVALID_ARGUMENT.
  bool Parse(const grpc::ByteBuffer& bytes, google::protobuf::Message* request) {
    absl::Status parsed = ParseRequest(bytes, request);
    if (parsed.ok()) return true;
    std::lock_guard lock(mu_);
    FinishLocked(RejectUnparseable(sc_, method_, std::move(parsed)));
    return false;
  }

  // The core that serves `request`: the single node's, or in cluster mode the one of the
  // request's shard on this node. When another node serves it (UNAVAILABLE with the owner in
  // the trailing metadata, as for unary calls) or it cannot be routed, finishes the stream
  // and returns false. Before Register and AttachToFeed.
  bool Route(const google::protobuf::Message& request) {
    if (sc_.router == nullptr) return true;
    return UseRouted(sc_.router->Route(method_, request));
  }
  // The end of every routing: the routed core, or the stream finished with the error.
  bool UseRouted(absl::StatusOr<std::shared_ptr<core::InventoryCore>> routed) {
    if (!routed.ok()) {
      std::lock_guard lock(mu_);
      FinishLocked(routed.status());
      return false;
    }
    routed_core_ = *std::move(routed);
    support_.set_core(routed_core_.get());
    return true;
  }
  // Route's counterpart for a stream that serves one shard (cluster mode).
  bool RouteToShard(uint32_t shard) {
    return UseRouted(sc_.router->RouteShard(shard, kShardSelectorKey));
  }
  // Cluster mode: the kShardSelectorKey metadata's value, if the call has it.
  std::optional<std::string_view> ShardSelectorInMetadata() const {
    const auto& metadata = ctx_->client_metadata();
    auto it = metadata.find(grpc::string_ref(kShardSelectorKey.data(), kShardSelectorKey.size()));
    if (it == metadata.end()) return std::nullopt;
    return std::string_view(it->second.data(), it->second.size());
  }
  // Cluster mode: the shard kShardSelectorKey names, nullopt without it; INVALID_ARGUMENT
  // naming it when it is not a number.
  absl::StatusOr<std::optional<uint32_t>> ShardInMetadata() const {
    auto selector = ShardSelectorInMetadata();
    if (!selector) return std::nullopt;
    auto shard = ParseShardSelector(*selector, sc_.router->shard_count());
    if (!shard.ok()) return shard.status();
    return *shard;
  }
  // Finishes the stream with `status`; false, for `return Refuse(...)`.
  bool Refuse(const absl::Status& status) {
    std::lock_guard lock(mu_);
    FinishLocked(status);
    return false;
  }
  core::InventoryCore& core() const { return *support_.core(); }

  // Takes a slot under --max-open-streams; when none is left, finishes the stream with
  // RESOURCE_EXHAUSTED and returns false.
  bool Register() {
    absl::Status registered = support_.Register(this);
    if (registered.ok()) return true;
    std::lock_guard lock(mu_);
    FinishLocked(registered);
    return false;
  }

  // Attaches to the change feed (see ChangeFeed::Subscribe). Not with mu_ held.
  core::ChangeFeed::Attach AttachToFeed(uint64_t after_sequence,
                                        std::vector<std::string> keys = {}) {
    return support_.Attach(this, after_sequence, std::move(keys));
  }

  // From OnDone: afterwards no event arrives and the slot is free.
  void Unregister() { support_.Unregister(); }

  void FinishLocked(const absl::Status& status) {
    if (finished_) return;
    finished_ = true;
    record_.Finish(status);
    AddShardOwnerMetadata(status, ctx_);
    this->Finish(ToGrpcStatus(status));
    OnFinishedLocked();
    support_.ReportFinished();
  }
  // After Finish: free what a client that keeps the call open will never get.
  virtual void OnFinishedLocked() {}
  // A write completed: start the next one.
  virtual void AfterWriteLocked() = 0;

  bool writing() const { return support_.writing(); }
  void WriteLocked(const google::protobuf::Message& message) {
    SerializeResponse(message, &out_);
    support_.WriteStarted();
    this->StartWrite(&out_);
  }

  bool ReaderBehindLocked() const { return support_.ReaderBehind(); }

  // A reader that is too far behind or stalled is ended (StreamSupport). True when it was.
  bool EndIfSlowLocked(const absl::Status& queue_status) {
    absl::Status why = support_.CheckSlowReader(queue_status);
    if (why.ok()) return false;
    FinishLocked(why);
    return true;
  }

  void ReportQueueLocked(size_t queued, uint64_t conflated_total) {
    support_.ReportQueue(queued, conflated_total);
  }

  const ServiceContext sc_;
  grpc::CallbackServerContext* const ctx_;
  // Cluster mode: keeps the routed core alive while the stream is attached to its feed.
  std::shared_ptr<core::InventoryCore> routed_core_;
  StreamSupport support_;
  CallRecord record_;
  std::mutex mu_;
  bool finished_ = false;

 private:
  const char* const method_;
  std::string subject_;
  grpc::ByteBuffer out_;
};

}  // namespace feed::server
