// The whole server in one object: store, core, Kafka relay, gRPC services, health,
// reflection, metrics. main.cc and the integration tests both use it.
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
  // config.shutdown_grace_ms, then the writer drains, the relay flushes, RocksDB closes.
  void Shutdown();

  // "127.0.0.1:PORT" actually bound (the port is chosen by the OS when the config says 0).
  const std::string& address() const;
  core::InventoryCore& core();

  class Impl;

 private:
  explicit FeedServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace feed::server
