// What the three stream reactors share: a slot under --max-open-streams, the change-feed
// attachment, the call record, cancellation, one way to finish (an absl::Status, converted
// once), and one write in flight with the stall check and the queue metrics.
//
// Threads: change-feed callbacks (OnEvents) arrive on the core's publisher thread with the
// feed's lock held, so they only queue and, when no write is in flight, start the next one.
// gRPC reactions (OnReadDone, OnWriteDone, OnCancel, OnDone) run on gRPC's threads; Close
// on the shutting-down thread with the registry's lock held. Lock order: registry -> stream,
// feed -> stream; a stream never calls the feed while holding its own lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/change_feed.h"
#include "core/stock_update_queue.h"
#include "fmt/format.h"
#include "grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "server/services.h"
#include "wire.h"

namespace feed::server {

// The queue rule of every stock stream, from the configuration.
inline core::QueueLimits StreamQueueLimits(const ServerConfig& config) {
  core::QueueLimits limits;
  limits.max_queued = static_cast<size_t>(config.stream_max_queued_levels);
  limits.conflate_after =
      std::min(static_cast<size_t>(config.stream_conflate_after), limits.max_queued);
  return limits;
}

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

  void OnCancel() override {
    std::lock_guard lock(mu_);
    FinishLocked(absl::CancelledError("cancelled by the client"));
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mu_);
    writing_ = false;
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
        record_(sc.metrics, sc.access_log, method, sc.access_log ? ctx->peer() : ""),
        method_(method),
        kind_(kind) {}

  // Parses the request bytes; on failure finishes the stream with INVALID_ARGUMENT.
  bool Parse(const grpc::ByteBuffer& bytes, google::protobuf::Message* request) {
    absl::Status parsed = ParseRequest(bytes, request);
    if (parsed.ok()) return true;
    std::lock_guard lock(mu_);
    FinishLocked(RejectUnparseable(sc_, method_, std::move(parsed)));
    return false;
  }

  // Takes a slot under --max-open-streams; when none is left, finishes the stream with
  // RESOURCE_EXHAUSTED and returns false.
  bool Register() {
    if (!sc_.streams->TryAdd(this)) {
      std::lock_guard lock(mu_);
      FinishLocked(absl::ResourceExhaustedError(
          fmt::format("too many open streams (limit {})", sc_.config->max_open_streams)));
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

  void FinishLocked(const absl::Status& status) {
    if (finished_) return;
    finished_ = true;
    record_.Finish(status);
    this->Finish(ToGrpcStatus(status));
    OnFinishedLocked();
    ReportQueueLocked(0, reported_conflated_);
  }
  // After Finish: free what a client that keeps the call open will never get.
  virtual void OnFinishedLocked() {}
  // A write completed: start the next one.
  virtual void AfterWriteLocked() = 0;

  bool writing() const { return writing_; }
  void WriteLocked(const google::protobuf::Message& message) {
    SerializeResponse(message, &out_);
    writing_ = true;
    write_started_ = std::chrono::steady_clock::now();
    this->StartWrite(&out_);
  }

  // The reader is behind when the write in flight has not completed for
  // --stream-conflate-after-ms: its stock changes are then conflated (StockUpdateQueue).
  bool ReaderBehindLocked() const {
    const int64_t after_ms = sc_.config->stream_conflate_after_ms;
    return after_ms > 0 && writing_ &&
           std::chrono::steady_clock::now() - write_started_ > std::chrono::milliseconds(after_ms);
  }

  // A reader that is too far behind, or whose write has not completed for
  // --stream-stall-timeout-ms, is ended with RESOURCE_EXHAUSTED. True when it was.
  bool EndIfSlowLocked(const absl::Status& queue_status) {
    absl::Status why = queue_status;
    if (why.ok() && writing_ &&
        std::chrono::steady_clock::now() - write_started_ >
            std::chrono::milliseconds(sc_.config->stream_stall_timeout_ms)) {
      why = absl::ResourceExhaustedError(
          fmt::format("reader stalled: no write completed for {} ms; reconnect, resuming from the "
                      "last sequence received",
                      sc_.config->stream_stall_timeout_ms));
    }
    if (why.ok()) return false;
    sc_.metrics->SlowReaderEnded();
    FinishLocked(why);
    return true;
  }

  // Keeps feed_stream_queued_updates and feed_stream_conflated_total in step with this
  // stream's queue.
  void ReportQueueLocked(size_t queued, uint64_t conflated_total) {
    sc_.metrics->QueuedUpdates(static_cast<int64_t>(queued) -
                               static_cast<int64_t>(reported_queued_));
    if (conflated_total > reported_conflated_) {
      sc_.metrics->Conflated(conflated_total - reported_conflated_);
    }
    reported_queued_ = queued;
    reported_conflated_ = conflated_total;
  }

  const ServiceContext sc_;
  CallRecord record_;
  std::mutex mu_;
  bool finished_ = false;

 private:
  const char* const method_;
  const char* const kind_;  // the metrics label
  bool subscribed_ = false;
  bool registered_ = false;
  grpc::ByteBuffer out_;
  bool writing_ = false;
  std::chrono::steady_clock::time_point write_started_;
  size_t reported_queued_ = 0;
  uint64_t reported_conflated_ = 0;
};

}  // namespace feed::server
