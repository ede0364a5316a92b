// What every stream shares, whatever its transport (gRPC reactors, HTTP NDJSON and SSE
// streams): a slot under --max-open-streams, the change-feed attachment, the slow-reader
// rules (one write in flight; conflation once a write is late; the end of a reader too far
// behind or stalled, with one message for all) and the queue metrics.
//
// Not thread-safe: the owning stream calls it under its own lock, except Attach and
// Unregister, which must not run with that lock held (the feed calls the stream with its
// own lock held: feed -> stream).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/change_feed.h"
#include "core/stock_update_queue.h"
#include "server/services.h"

namespace feed::server {

// The queue rule of every stock stream, from the configuration.
core::QueueLimits StreamQueueLimits(const ServerConfig& config);

class StreamSupport {
 public:
  // `kind` labels the stream in the metrics ("watch_stock", "http_watch_stock", ...).
  StreamSupport(const ServiceContext& sc, const char* kind)
      : sc_(sc), kind_(kind), core_(sc.core) {}
  // The core whose change feed the stream attaches to: the single node's, or in cluster mode
  // the one serving the stream's shard (set before Attach; the caller keeps it alive).
  void set_core(core::InventoryCore* core) { core_ = core; }
  core::InventoryCore* core() const { return core_; }

  // Takes a slot under --max-open-streams: RESOURCE_EXHAUSTED when none is left.
  absl::Status Register(StreamRegistry::Stream* stream);
  // Attaches `listener` to the change feed (ChangeFeed::Subscribe).
  core::ChangeFeed::Attach Attach(core::ChangeListener* listener, uint64_t after_sequence,
                                  std::vector<std::string> keys = {});
  // Afterwards no event arrives and the slot is free. Once, when the stream is done.
  void Unregister();

  void WriteStarted() {
    writing_ = true;
    write_started_ = std::chrono::steady_clock::now();
  }
  void WriteDone() { writing_ = false; }
  bool writing() const { return writing_; }

  // The write in flight has not completed for --stream-conflate-after-ms: the reader is
  // behind, its stock changes are conflated (StockUpdateQueue).
  bool ReaderBehind() const;
  // Why the reader must be ended (the queue's status, or a write stuck for
  // --stream-stall-timeout-ms: RESOURCE_EXHAUSTED), counted; OK when it keeps up.
  absl::Status CheckSlowReader(const absl::Status& queue_status);

  // Keeps feed_stream_queued_updates and feed_stream_conflated_total in step with the
  // stream's queue; ReportFinished once the stream ends.
  void ReportQueue(size_t queued, uint64_t conflated_total);
  void ReportFinished() { ReportQueue(0, reported_conflated_); }

  const ServiceContext& context() const { return sc_; }

 private:
  const ServiceContext sc_;
  const char* const kind_;
  core::InventoryCore* core_;
  StreamRegistry::Stream* registered_ = nullptr;
  core::ChangeListener* subscribed_ = nullptr;
  bool writing_ = false;
  std::chrono::steady_clock::time_point write_started_;
  size_t reported_queued_ = 0;
  uint64_t reported_conflated_ = 0;
};

}  // namespace feed::server
