// The whole server in one object: store, core, Kafka relay, gRPC services, health,
// reflection, metrics. main.cc and the integration tests both use it.
//
// Threads of the process (the core's own four are in core/inventory_core.h):
// | thread          | runs                                                 | may block on |
// |-----------------|------------------------------------------------------|---------------------------|
// | gRPC pollers    | every handler and stream reactor: parse, validate,   | never (all I/O is
// async); | | (gRPC's pool)   | queue the command; write replies and stream updates  | the core's
// queue is bound | | feed-relay      | outbox scans, produce to Kafka, cursor writes        | the
// broker (bounded by    | | (bridge)        | | max_in_flight), the store | | librdkafka's    |
// delivery reports (they only wake feed-relay)         | the network               | |
// feed-housekeep  | once a second: feed_state gauges, heap trimming, the | nothing of the hot path
// | |                 | relay's health status                                | | | feed-http | the
// HTTP gateway (Boost.Beast, --http-threads): read,| never (asynchronous I/O); | | | route,
// transcode, queue the command, write replies   | the core's queue is bound | |                 |
// and NDJSON / SSE stream chunks                       |                           | |
// prometheus-cpp  | GET /metrics (civetweb's threads)                    | the registry's lock |
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/inventory_core.h"
#include "server/config.h"

namespace feed::server {

class FeedServer {
 public:
  // Opens the store, recovers the core, starts the relay (when brokers are configured),
  // the gRPC server (health SERVING once everything is up) and the metrics endpoint.
  static absl::StatusOr<std::unique_ptr<FeedServer>> Start(const ServerConfig& config);
  ~FeedServer();

  // Graceful: health NOT_SERVING, streams ended with UNAVAILABLE, in-flight calls get
  // config.shutdown_grace_ms, then the core drains its queue, the relay flushes, RocksDB closes.
  void Shutdown();

  // "127.0.0.1:PORT" actually bound (the port is chosen by the OS when the config says 0).
  const std::string& address() const;
  // The HTTP gateway's "127.0.0.1:PORT"; empty when it is off.
  std::string http_address() const;
  core::InventoryCore& core();

  class Impl;

 private:
  explicit FeedServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace feed::server
