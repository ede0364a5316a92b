// The whole server in one object: store, core, Kafka relay, gRPC services, health,
// reflection, metrics. main.cc and the integration tests both use it.
//
// Threads of the process (the core's own are in core/inventory_core.h):
// clang-format off
//   gRPC pollers     every handler and stream reactor: parse, validate, queue the command;
//                    write replies and stream updates. Never block (the core's queue is bound).
//   feed-relay       journal scans, produce to Kafka, cursor writes. Blocks on the broker
//                    (bounded by max_in_flight) and the store.
//   librdkafka's     delivery reports (they only wake feed-relay). Block on the network.
//   feed-housekeep   once a second: feed_state gauges, heap trimming, the relay's health.
//   feed-http        the HTTP gateway (Boost.Beast, --http-threads): asynchronous I/O.
//   prometheus-cpp   GET /metrics (civetweb's threads); the registry's lock.
//   admin            one thread per running audit or backup (admin/store_operations.h).
// clang-format on
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "admin/v1/admin.pb.h"
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

// `feed-server --check`: the online audit (core/store_audit.h) of the stopped store at
// config.storage.path, opened read-only.
absl::StatusOr<::admin::v1::CheckStoreResponse> CheckStoreOffline(const ServerConfig& config);

}  // namespace feed::server
