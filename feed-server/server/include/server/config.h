// The server's configuration: one struct, parsed once from flags, environment variables
// (FEED_*) and an optional config file (--config, TOML/INI), validated at start.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "admin/store_operations.h"
#include "bridge/relay.h"
#include "core/options.h"
#include "http/options.h"
#include "security/options.h"
#include "storage/rocksdb_store.h"

namespace feed::server {

struct ServerConfig {
  std::string listen = "127.0.0.1:50051";
  // Empty disables the Prometheus endpoint.
  std::string metrics_listen = "127.0.0.1:9464";
  std::string log_format = "text";  // text | json
  std::string log_level = "info";
  // Log one line per RPC (at info level).
  bool log_rpcs = true;

  // Each module's own options, set directly by the flags: the data directory, durability
  // and memory of RocksDB; the core's limits; the Kafka relay (brokers empty: off); the
  // HTTP gateway.
  storage::RocksDbOptions storage;
  core::CoreOptions core;
  // The AdminService: where backups go, how many violations an audit lists.
  admin::StoreOperationsOptions admin;
  // Set: restore this backup into --data-dir (which must be empty) before starting.
  std::string restore_from;
  // Audit the store at --data-dir (stopped) and exit: 0 sound, 1 violations, 2 error.
  bool check_only = false;
  // Convert a store of an older data format at open (storage::RocksDbOptions); without it
  // such a store is refused.
  bool migrate = false;
  bridge::RelayOptions kafka;
  // The HTTP/JSON gateway (listen empty: off).
  http::HttpOptions http;
  // Cluster mode (docs/CLUSTER.md): shards > 0 turns it on. The SKUs are spread over
  // `shards` shards, each one partition of the shard log topic on the brokers, served by one
  // node of the consumer group `group` at a time. Served: the unary calls (routed by shard),
  // GetShardMap, streams of one shard, the HTTP gateway (forwarding calls to their shard's
  // owner) and, with kafka.brokers, the relay of each served shard; not yet: node-wide
  // streams, Feed, AdminService.
  struct Cluster {
    int shards = 0;
    std::string node_id;    // stable across restarts: [A-Za-z0-9._-], 1..64 characters
    std::string advertise;  // host:port clients reach this node at; empty: --listen
    std::string brokers;    // empty: --kafka-brokers
    std::string topic = "feed.shard-log.v1";
    std::string group = "feed-cluster";
    int64_t session_timeout_ms = 6000;
    int64_t log_timeout_ms = 10000;
    int replication_factor = 1;
    int min_insync_replicas = 1;
    // With TLS: the CA bundle the HTTP gateway verifies other nodes by when it forwards a call
    // to a shard's owner (empty: the system's roots).
    std::string peer_ca_file;
  } cluster;
  // TLS of the gRPC and HTTP ports (same certificate), and who may call what.
  security::TlsOptions tls;
  security::AuthOptions auth;
  // Refuse to start unless both TLS and authentication are on.
  bool require_secure = false;
  // gRPC server reflection (grpcurl's `list` and `describe`); it is served without a token,
  // like the health service.
  bool reflection = true;
  // `user:password` lines; set: /metrics asks for HTTP basic authentication.
  std::string metrics_basic_auth_file;

  // gRPC transport limits.
  int max_receive_message_bytes = 1 << 20;
  int max_concurrent_streams_per_connection = 1000;
  // Open WatchStock + Feed + StreamOrderUpdates streams across all clients.
  int max_open_streams = 20000;
  // Commands of one Feed stream applied concurrently; more wait before being read.
  int feed_max_inflight_commands = 1024;
  // Stock updates waiting for one stream before its changes are conflated per level (a
  // reader below it receives every change); at most stream_max_queued_levels.
  int stream_conflate_after = 1024;
  // A stream whose write has been in flight this long is behind too: its changes are
  // conflated per level until the write completes (0 = never by time).
  int64_t stream_conflate_after_ms = 20;
  // Stock updates waiting for one stream (one per level once conflating) before it is
  // ended with RESOURCE_EXHAUSTED.
  int stream_max_queued_levels = 10000;
  // A stream whose single in-flight write has not completed for this long is ended.
  int64_t stream_stall_timeout_ms = 30000;
  int64_t keepalive_time_ms = 60000;
  int64_t keepalive_timeout_ms = 20000;
  // Clients pinging more often than this without data get GOAWAY (ping-flood protection).
  int64_t keepalive_min_client_ping_interval_ms = 10000;
  int64_t max_connection_idle_ms = 0;  // 0 = never close idle connections
  // A connection that has not completed the HTTP/2 handshake in this time is closed
  // (gRPC's own default is 120 s, long enough for a slowloris to hold thousands of fds).
  int64_t handshake_timeout_ms = 10000;
  int64_t shutdown_grace_ms = 10000;
  // Free memory the allocator (tcmalloc) may keep for reuse: its free pages above this go
  // back to the OS (checked once a second), and its per-thread caches together stay within
  // it (0 = no limit: tcmalloc's defaults). Bursts (a wave of slow streams ended, a large
  // snapshot sent) otherwise leave RSS at their peak for good.
  int64_t max_free_heap_mb = 16;
};

// Parses argv (+ environment + config file). On --help/--version returns an exit code to
// return with; on an invalid value returns INVALID_ARGUMENT with one clear line.
struct ParseResult {
  std::optional<ServerConfig> config;
  int exit_code = 0;
};
absl::StatusOr<ParseResult> ParseServerConfig(int argc, char** argv);

}  // namespace feed::server
