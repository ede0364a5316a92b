#include "server/config.h"

#include <cstdlib>
#include <iostream>

#include "CLI/CLI.hpp"
#include "fmt/format.h"

namespace feed::server {
namespace {

// Cluster mode's flags, and what it does not serve yet. `http_listen_given`: --http-listen was
// set; otherwise its default is dropped (nodes sharing a host would all want its port).
absl::Status ValidateCluster(ServerConfig& c, bool http_listen_given) {
  auto& cl = c.cluster;
  if (cl.shards == 0) return absl::OkStatus();
  auto bad = [](std::string m) { return absl::InvalidArgumentError(std::move(m)); };
  if (cl.node_id.empty() || cl.node_id.size() > 64 ||
      cl.node_id.find_first_not_of(
          "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") !=
          std::string::npos) {
    return bad(fmt::format(
        "--cluster-node-id: 1..64 characters of [A-Za-z0-9._-] are required in cluster mode, "
        "got '{}'",
        cl.node_id));
  }
  if (cl.brokers.empty()) cl.brokers = c.kafka.brokers;
  if (cl.brokers.empty()) {
    return bad(
        "--cluster-brokers (or --kafka-brokers): the shard log's brokers are required in "
        "cluster mode");
  }
  if (cl.advertise.empty()) cl.advertise = c.listen;
  if (cl.min_insync_replicas > cl.replication_factor) {
    return bad(fmt::format(
        "--cluster-min-insync-replicas ({}) must not exceed --cluster-replication-factor ({})",
        cl.min_insync_replicas, cl.replication_factor));
  }
  if (!http_listen_given) c.http.listen.clear();
  if (c.check_only || c.migrate) {
    return bad("--check and --migrate work on a single node's store, not in cluster mode");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ParseResult> ParseServerConfig(int argc, char** argv) {
  ServerConfig c;
  CLI::App app{"feed-server: the inventory feed (gRPC + RocksDB + Kafka outbox relay)"};
  app.option_defaults()->always_capture_default();
  app.set_config("--config", "", "TOML or INI file with any of the options below");
  app.get_formatter()->column_width(46);

  auto env = [](CLI::Option* o, const char* name) { return o->envname(name); };
  std::string durability = "sync";
  auto& st = c.storage;
  int64_t memtable_mb = static_cast<int64_t>(st.memtable_budget_bytes >> 20);
  int64_t block_cache_mb = static_cast<int64_t>(st.block_cache_bytes >> 20);
  env(app.add_option("--listen", c.listen, "gRPC address"), "FEED_LISTEN");
  env(app.add_option("--metrics-listen", c.metrics_listen,
                     "Prometheus /metrics address (empty disables)"),
      "FEED_METRICS_LISTEN");
  env(app.add_option("--data-dir", st.path, "RocksDB directory"), "FEED_DATA_DIR");
  env(app.add_option("--backup-dir", c.admin.backup_dir,
                     "where AdminService.Backup writes (a folder per backup; empty: backups off)"),
      "FEED_BACKUP_DIR");
  app.add_option("--restore-from", c.restore_from,
                 "restore this backup folder into --data-dir (empty or absent) and start on it; "
                 "in cluster mode a folder of shard-<n> backups (feedctl backup), each into "
                 "--data-dir/shard-<n>");
  app.add_flag("--check", c.check_only,
               "audit the store at --data-dir (not running) and exit: 0 sound, 1 violations");
  app.add_flag("--migrate", c.migrate,
               "convert a store of an older data format (1) at open; without it it is refused");
  env(app.add_option("--max-audit-violations", c.admin.max_listed_violations,
                     "violations one audit may list (all are counted)")
          ->check(CLI::Range(1, 1000000)),
      "FEED_MAX_AUDIT_VIOLATIONS");
  env(app.add_option("--durability", durability,
                     "sync: fsync the WAL before any reply; async: no fsync (survives a "
                     "process crash, not a power loss)")
          ->check(CLI::IsMember({"sync", "async"})),
      "FEED_DURABILITY");
  env(app.add_option("--log-format", c.log_format, "text or json")
          ->check(CLI::IsMember({"text", "json"})),
      "FEED_LOG_FORMAT");
  env(app.add_option("--log-level", c.log_level, "trace, debug, info, warn, error")
          ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"})),
      "FEED_LOG_LEVEL");
  env(app.add_option("--log-rpcs", c.log_rpcs, "one log line per RPC"), "FEED_LOG_RPCS");

  auto& o = c.core;
  auto& l = o.limits;
  // The server keeps delivered events for replays (the core library keeps none by default).
  o.event_retention_ms = int64_t{7} * 24 * 3600 * 1000;
  o.event_retention_bytes = uint64_t{1} << 30;
  env(app.add_option("--event-retention-ms", o.event_retention_ms,
                     "delivered events kept in the journal for replays (0: none)")
          ->check(CLI::Range(int64_t{0}, int64_t{365} * 24 * 3600 * 1000)),
      "FEED_EVENT_RETENTION_MS");
  env(app.add_option("--event-retention-bytes", o.event_retention_bytes,
                     "at most this much journal is kept for replays, oldest dropped first (0: "
                     "no size bound)"),
      "FEED_EVENT_RETENTION_BYTES");
  env(app.add_option("--default-location", o.default_location,
                     "location used when a request names none"),
      "FEED_DEFAULT_LOCATION");
  env(app.add_option("--hold-ttl-ms", o.default_hold_ttl_ms, "default hold time to live")
          ->check(CLI::Range(int64_t{1000}, int64_t{7} * 24 * 3600 * 1000)),
      "FEED_HOLD_TTL_MS");
  env(app.add_option("--idempotency-retention-ms", o.idempotency_retention_ms,
                     "how long idempotency keys are remembered")
          ->check(CLI::Range(int64_t{1000}, int64_t{30} * 24 * 3600 * 1000)),
      "FEED_IDEMPOTENCY_RETENTION_MS");
  env(app.add_option("--history-retention-ms", o.history_retention_ms,
                     "how long closed reservations and finished orders are kept (0 = for good)")
          ->check(CLI::Range(int64_t{0}, int64_t{3650} * 24 * 3600 * 1000)),
      "FEED_HISTORY_RETENTION_MS");
  env(app.add_option("--max-batch", o.max_batch_commands, "commands per WriteBatch (group commit)")
          ->check(CLI::Range(1, 100000)),
      "FEED_MAX_BATCH");
  env(app.add_option("--max-queue-depth", o.max_queue_depth,
                     "commands waiting for the writer before RESOURCE_EXHAUSTED")
          ->check(CLI::Range(1, 10000000)),
      "FEED_MAX_QUEUE_DEPTH");
  env(app.add_option("--change-feed-retention", o.change_feed_retention,
                     "events kept in memory for stream resume")
          ->check(CLI::Range(0, 10000000)),
      "FEED_CHANGE_FEED_RETENTION");
  env(app.add_option("--checkpoint-interval-ms", o.checkpoint_interval_ms,
                     "how often committed records move from the journal into the tables")
          ->check(CLI::Range(int64_t{10}, int64_t{3600000})),
      "FEED_CHECKPOINT_INTERVAL_MS");
  env(app.add_option("--checkpoint-bytes", o.checkpoint_bytes,
                     "journal bytes since the last checkpoint that start the next one at once "
                     "(bounds memory and the replay after a crash)")
          ->check(CLI::Range(size_t{1} << 16, size_t{1} << 32)),
      "FEED_CHECKPOINT_BYTES");
  env(app.add_option("--sweep-interval-ms", o.sweep_interval_ms, "hold expiry sweep period")
          ->check(CLI::Range(int64_t{10}, int64_t{3600000})),
      "FEED_SWEEP_INTERVAL_MS");
  env(app.add_option("--max-id-length", l.max_id_length, "sku/location/id length limit")
          ->check(CLI::Range(8, 1024)),
      "FEED_MAX_ID_LENGTH");
  env(app.add_option("--max-quantity", l.max_quantity, "largest quantity in one line")
          ->check(CLI::Range(int64_t{1}, int64_t{1'000'000'000})),
      "FEED_MAX_QUANTITY");
  env(app.add_option("--max-batch-adjustments", l.max_batch_adjustments,
                     "adjustments in one BatchAdjustStock call")
          ->check(CLI::Range(1, 100000)),
      "FEED_MAX_BATCH_ADJUSTMENTS");
  env(app.add_option("--max-lines", l.max_lines_per_request, "lines per reserve/order")
          ->check(CLI::Range(1, 10000)),
      "FEED_MAX_LINES");
  env(app.add_option("--max-keys-per-read", l.max_keys_per_read,
                     "keys per GetStock / WatchStock / subscribe")
          ->check(CLI::Range(1, 100000)),
      "FEED_MAX_KEYS_PER_READ");
  env(app.add_option("--max-hold-ttl-ms", l.max_hold_ttl_ms, "longest hold a client may ask for")
          ->check(CLI::Range(int64_t{1000}, int64_t{30} * 24 * 3600 * 1000)),
      "FEED_MAX_HOLD_TTL_MS");

  env(app.add_option("--max-receive-message-bytes", c.max_receive_message_bytes,
                     "largest request message")
          ->check(CLI::Range(1024, 64 << 20)),
      "FEED_MAX_RECEIVE_MESSAGE_BYTES");
  env(app.add_option("--max-concurrent-streams", c.max_concurrent_streams_per_connection,
                     "HTTP/2 streams per connection")
          ->check(CLI::Range(1, 100000)),
      "FEED_MAX_CONCURRENT_STREAMS");
  env(app.add_option("--max-open-streams", c.max_open_streams,
                     "open WatchStock/Feed/StreamOrderUpdates streams in total")
          ->check(CLI::Range(1, 1000000)),
      "FEED_MAX_OPEN_STREAMS");
  env(app.add_option("--feed-max-inflight", c.feed_max_inflight_commands,
                     "commands of one Feed stream in flight")
          ->check(CLI::Range(1, 100000)),
      "FEED_FEED_MAX_INFLIGHT");
  env(app.add_option("--stream-conflate-after", c.stream_conflate_after,
                     "stock updates waiting for a reader before its changes are merged per "
                     "level (conflated); a reader below it gets every change")
          ->check(CLI::Range(1, 10000000)),
      "FEED_STREAM_CONFLATE_AFTER");
  env(app.add_option("--stream-conflate-after-ms", c.stream_conflate_after_ms,
                     "a stream whose write has been in flight this long is behind: its "
                     "changes are conflated per level until the write completes (0 = never)")
          ->check(CLI::Range(int64_t{0}, int64_t{3600000})),
      "FEED_STREAM_CONFLATE_AFTER_MS");
  env(app.add_option("--stream-max-queued-levels", c.stream_max_queued_levels,
                     "stock updates waiting for a slow reader (one per level once conflating) "
                     "before it is ended with RESOURCE_EXHAUSTED")
          ->check(CLI::Range(1, 10000000)),
      "FEED_STREAM_MAX_QUEUED_LEVELS");
  env(app.add_option("--stream-stall-timeout-ms", c.stream_stall_timeout_ms,
                     "end a stream whose write is stuck this long")
          ->check(CLI::Range(int64_t{100}, int64_t{3600000})),
      "FEED_STREAM_STALL_TIMEOUT_MS");
  // At least 10 s: gRPC 1.51 arms a new connection's keepalive timer from a clock cached
  // for the whole batch of accepts; when a burst of accepts takes longer than the period,
  // the first ping runs on another thread while the connection is still being set up and
  // the server aborts (seen with 1 s under ASan: tests/reliability/connection_abuse_test.cc).
  env(app.add_option("--keepalive-time-ms", c.keepalive_time_ms, "server keepalive ping period")
          ->check(CLI::Range(int64_t{10000}, int64_t{7200000})),
      "FEED_KEEPALIVE_TIME_MS");
  env(app.add_option("--keepalive-timeout-ms", c.keepalive_timeout_ms,
                     "close a connection whose ping is not answered in this time")
          ->check(CLI::Range(int64_t{100}, int64_t{600000})),
      "FEED_KEEPALIVE_TIMEOUT_MS");
  env(app.add_option("--keepalive-min-ping-interval-ms", c.keepalive_min_client_ping_interval_ms,
                     "minimum client ping interval enforced (ping-flood protection)")
          ->check(CLI::Range(int64_t{0}, int64_t{3600000})),
      "FEED_KEEPALIVE_MIN_PING_INTERVAL_MS");
  env(app.add_option("--max-connection-idle-ms", c.max_connection_idle_ms,
                     "close connections idle this long (0 = never)")
          ->check(CLI::Range(int64_t{0}, int64_t{86400000})),
      "FEED_MAX_CONNECTION_IDLE_MS");
  env(app.add_option("--handshake-timeout-ms", c.handshake_timeout_ms,
                     "close connections that do not finish the HTTP/2 handshake in this time")
          ->check(CLI::Range(int64_t{100}, int64_t{600000})),
      "FEED_HANDSHAKE_TIMEOUT_MS");
  env(app.add_option("--shutdown-grace-ms", c.shutdown_grace_ms,
                     "time in-flight calls get to finish on SIGTERM")
          ->check(CLI::Range(int64_t{0}, int64_t{600000})),
      "FEED_SHUTDOWN_GRACE_MS");
  env(app.add_option("--max-free-heap-mb", c.max_free_heap_mb,
                     "free heap the allocator may keep: free pages above it go back to the OS, "
                     "thread caches stay within it (0 = no limit)")
          ->check(CLI::Range(int64_t{0}, int64_t{1} << 20)),
      "FEED_MAX_FREE_HEAP_MB");

  env(app.add_option("--rocksdb-memtable-mb", memtable_mb,
                     "RocksDB memtables of all tables together (unflushed writes)")
          ->check(CLI::Range(int64_t{8}, int64_t{1} << 16)),
      "FEED_ROCKSDB_MEMTABLE_MB");
  env(app.add_option("--rocksdb-block-cache-mb", block_cache_mb, "RocksDB block cache for reads")
          ->check(CLI::Range(int64_t{8}, int64_t{1} << 20)),
      "FEED_ROCKSDB_BLOCK_CACHE_MB");

  auto& k = c.kafka;
  std::vector<std::string> kafka_properties;
  std::string value_format = k.json_values ? "json" : "protobuf";
  env(app.add_option("--kafka-brokers", k.brokers,
                     "bootstrap servers; empty keeps events in the outbox"),
      "FEED_KAFKA_BROKERS");
  env(app.add_option("--kafka-stock-topic", k.stock_topic, "stock changes, keyed by SKU"),
      "FEED_KAFKA_STOCK_TOPIC");
  env(app.add_option("--kafka-order-status-topic", k.order_status_topic,
                     "order status, keyed by order id"),
      "FEED_KAFKA_ORDER_STATUS_TOPIC");
  env(app.add_option("--kafka-receipt-topic", k.receipt_topic, "receipts, keyed by order id"),
      "FEED_KAFKA_RECEIPT_TOPIC");
  env(app.add_option("--kafka-partitions", k.partitions, "partitions of created topics")
          ->check(CLI::Range(1, 10000)),
      "FEED_KAFKA_PARTITIONS");
  env(app.add_option("--kafka-replication-factor", k.replication_factor,
                     "replication factor of created topics")
          ->check(CLI::Range(1, 32)),
      "FEED_KAFKA_REPLICATION_FACTOR");
  env(app.add_option("--kafka-create-topics", k.create_topics,
                     "create missing topics at start through the admin API"),
      "FEED_KAFKA_CREATE_TOPICS");
  env(app.add_option("--kafka-value-format", value_format, "protobuf or json")
          ->check(CLI::IsMember({"protobuf", "json"})),
      "FEED_KAFKA_VALUE_FORMAT");
  env(app.add_option("--kafka-ce-source", k.ce_source, "CloudEvents source attribute"),
      "FEED_KAFKA_CE_SOURCE");
  env(app.add_option("--kafka-property", kafka_properties,
                     "librdkafka setting key=value (repeatable), e.g. security.protocol=SSL"),
      "FEED_KAFKA_PROPERTIES");
  env(app.add_option("--kafka-shutdown-flush-ms", k.shutdown_flush_ms,
                     "time to flush in-flight records on shutdown")
          ->check(CLI::Range(int64_t{0}, int64_t{600000})),
      "FEED_KAFKA_SHUTDOWN_FLUSH_MS");
  env(app.add_option("--kafka-skip-delivered", k.skip_delivered,
                     "exactly once: before sending again from its cursor the relay reads what "
                     "the topics hold and skips those events (false: at least once)"),
      "FEED_KAFKA_SKIP_DELIVERED");
  env(app.add_option("--kafka-tail-check-margin-ms", k.tail_check_margin_ms,
                     "the tail check also reads records this much older than the first event "
                     "to send (wall clock steps)")
          ->check(CLI::Range(int64_t{0}, int64_t{24} * 3600 * 1000)),
      "FEED_KAFKA_TAIL_CHECK_MARGIN_MS");
  env(app.add_option("--kafka-tail-check-timeout-ms", k.tail_check_timeout_ms,
                     "how long one tail check may take before it is retried")
          ->check(CLI::Range(int64_t{100}, int64_t{3600} * 1000)),
      "FEED_KAFKA_TAIL_CHECK_TIMEOUT_MS");
  // Kafka transport security (bridge/README.md, "Security"). The SASL password comes only
  // from a file (re-read when it changes) or FEED_KAFKA_SASL_PASSWORD, never from a flag: a
  // command-line value shows in ps. Combinations are checked after parsing (kafka_security).
  env(app.add_option("--kafka-security-protocol", k.security.protocol,
                     "plaintext, ssl (TLS) or sasl_ssl (TLS and a SASL login)")
          ->check(CLI::IsMember({"plaintext", "ssl", "sasl_ssl"})),
      "FEED_KAFKA_SECURITY_PROTOCOL");
  env(app.add_option("--kafka-ca-file", k.security.ssl_ca_file,
                     "PEM CA certificates of the brokers (default: the system's); re-read when "
                     "it changes")
          ->check(CLI::ExistingFile),
      "FEED_KAFKA_CA_FILE");
  CLI::Option* kafka_sasl_mechanism =
      env(app.add_option("--kafka-sasl-mechanism", k.security.sasl_mechanism,
                         "SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN")
              ->check(CLI::IsMember({"SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"})),
          "FEED_KAFKA_SASL_MECHANISM");
  env(app.add_option("--kafka-sasl-username", k.security.sasl_username,
                     "SASL user (with sasl_ssl)"),
      "FEED_KAFKA_SASL_USERNAME");
  env(app.add_option("--kafka-sasl-password-file", k.security.sasl_password_file,
                     "file holding the SASL password (trailing newline ignored), re-read when "
                     "it changes; or set FEED_KAFKA_SASL_PASSWORD")
          ->check(CLI::ExistingFile),
      "FEED_KAFKA_SASL_PASSWORD_FILE");
  std::string kafka_password_flag;  // refused: only here to say so clearly
  CLI::Option* kafka_password_option =
      app.add_option("--kafka-sasl-password", kafka_password_flag)->group("");
  auto kafka_security = [&]() -> absl::Status {
    auto bad = [](std::string m) { return absl::InvalidArgumentError(std::move(m)); };
    const char* env_password = std::getenv("FEED_KAFKA_SASL_PASSWORD");
    const bool has_env_password = env_password != nullptr && *env_password != '\0';
    const bool sasl = k.security.protocol == "sasl_ssl";
    const bool tls = sasl || k.security.protocol == "ssl";
    if (kafka_password_option->count() > 0) {
      std::fill(kafka_password_flag.begin(), kafka_password_flag.end(), '\0');
      return bad(
          "--kafka-sasl-password: a password on the command line shows in ps; use "
          "--kafka-sasl-password-file PATH or the environment variable FEED_KAFKA_SASL_PASSWORD");
    }
    if (k.kafka_properties.count("sasl.password") > 0) {
      return bad(
          "--kafka-property sasl.password: a password on the command line shows in ps; use "
          "--kafka-sasl-password-file PATH or the environment variable FEED_KAFKA_SASL_PASSWORD");
    }
    if (!tls && !k.security.ssl_ca_file.empty()) {
      return bad("--kafka-ca-file needs --kafka-security-protocol ssl or sasl_ssl");
    }
    if (tls) {
      for (const char* key : {"security.protocol", "ssl.ca.location", "ssl.ca.pem",
                              "sasl.mechanism", "sasl.mechanisms", "sasl.username"}) {
        if (k.kafka_properties.count(key) > 0) {
          return bad(fmt::format(
              "--kafka-property {} conflicts with --kafka-security-protocol {} (which sets it)",
              key, k.security.protocol));
        }
      }
    }
    if (!sasl) {
      if (!k.security.sasl_username.empty()) {
        return bad("--kafka-sasl-username needs --kafka-security-protocol sasl_ssl");
      }
      if (!k.security.sasl_password_file.empty()) {
        return bad("--kafka-sasl-password-file needs --kafka-security-protocol sasl_ssl");
      }
      if (kafka_sasl_mechanism->count() > 0) {
        return bad("--kafka-sasl-mechanism needs --kafka-security-protocol sasl_ssl");
      }
      if (has_env_password) {
        return bad("FEED_KAFKA_SASL_PASSWORD is set but --kafka-security-protocol is not sasl_ssl");
      }
      return absl::OkStatus();
    }
    if (k.security.sasl_username.empty()) {
      return bad("--kafka-security-protocol sasl_ssl needs --kafka-sasl-username");
    }
    if (k.security.sasl_password_file.empty() && !has_env_password) {
      return bad(
          "--kafka-security-protocol sasl_ssl needs a password: --kafka-sasl-password-file PATH "
          "or the environment variable FEED_KAFKA_SASL_PASSWORD");
    }
    if (!k.security.sasl_password_file.empty() && has_env_password) {
      return bad("--kafka-sasl-password-file and FEED_KAFKA_SASL_PASSWORD are both set; use one");
    }
    if (has_env_password) {
      k.security.sasl_password = env_password;
      return absl::OkStatus();
    }
    std::ifstream in(k.security.sasl_password_file, std::ios::binary);
    std::string password((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const bool readable = in.good() || in.eof();
    while (!password.empty() && (password.back() == '\n' || password.back() == '\r')) {
      password.pop_back();
    }
    const bool empty = password.empty();
    std::fill(password.begin(), password.end(), '\0');
    if (!readable) {
      return bad(fmt::format("--kafka-sasl-password-file {}: cannot read it",
                             k.security.sasl_password_file));
    }
    if (empty)
      return bad(
          fmt::format("--kafka-sasl-password-file {}: empty", k.security.sasl_password_file));
    return absl::OkStatus();
  };

  auto& h = c.http;
#ifdef FEED_DEFAULT_SWAGGER_UI_DIR
  h.swagger_ui_dir = FEED_DEFAULT_SWAGGER_UI_DIR;
#endif
#ifdef FEED_DEFAULT_OPENAPI_FILE
  h.openapi_file = FEED_DEFAULT_OPENAPI_FILE;
#endif
#ifdef FEED_DEFAULT_DASHBOARD_DIR
  h.dashboard_dir = FEED_DEFAULT_DASHBOARD_DIR;
  h.uplot_dir = FEED_DEFAULT_UPLOT_DIR;
#endif
  env(app.add_option("--http-listen", h.listen, "HTTP/JSON gateway address (empty disables)"),
      "FEED_HTTP_LISTEN");
  env(app.add_option("--http-threads", h.threads, "threads serving every HTTP connection")
          ->check(CLI::Range(1, 64)),
      "FEED_HTTP_THREADS");
  env(app.add_option("--http-max-header-bytes", h.max_header_bytes,
                     "largest request header (431 above)")
          ->check(CLI::Range(size_t{1024}, size_t{1} << 20)),
      "FEED_HTTP_MAX_HEADER_BYTES");
  env(app.add_option("--http-max-body-bytes", h.max_body_bytes, "largest request body (413 above)")
          ->check(CLI::Range(size_t{1024}, size_t{64} << 20)),
      "FEED_HTTP_MAX_BODY_BYTES");
  env(app.add_option("--http-max-connections", h.max_connections,
                     "open HTTP connections (503 above)")
          ->check(CLI::Range(size_t{1}, size_t{1000000})),
      "FEED_HTTP_MAX_CONNECTIONS");
  env(app.add_option("--http-idle-timeout-ms", h.idle_timeout_ms,
                     "wait for the next request's header this long")
          ->check(CLI::Range(int64_t{100}, int64_t{3600000})),
      "FEED_HTTP_IDLE_TIMEOUT_MS");
  env(app.add_option("--http-read-timeout-ms", h.read_timeout_ms,
                     "receive a request's body within this time (else the connection is closed)")
          ->check(CLI::Range(int64_t{100}, int64_t{3600000})),
      "FEED_HTTP_READ_TIMEOUT_MS");
  env(app.add_option("--http-write-timeout-ms", h.write_timeout_ms,
                     "close a connection whose response or stream chunk is not taken in this time")
          ->check(CLI::Range(int64_t{100}, int64_t{3600000})),
      "FEED_HTTP_WRITE_TIMEOUT_MS");
  env(app.add_option("--http-sse-heartbeat-ms", h.sse_heartbeat_ms,
                     "an idle SSE stream writes a keep-alive comment this often (0 = never)")
          ->check(CLI::Range(int64_t{0}, int64_t{3600000})),
      "FEED_HTTP_SSE_HEARTBEAT_MS");
  env(app.add_option("--http-ignore-unknown-fields", h.ignore_unknown_fields,
                     "accept unknown JSON fields and query parameters (default: 400)"),
      "FEED_HTTP_IGNORE_UNKNOWN_FIELDS");
  env(app.add_option("--http-swagger-ui-dir", h.swagger_ui_dir,
                     "swagger-ui-dist folder served at /swaggerui/ (empty: off)"),
      "FEED_HTTP_SWAGGER_UI_DIR");
  env(app.add_option("--http-openapi-file", h.openapi_file,
                     "OpenAPI document served at /openapi.json (empty: off)"),
      "FEED_HTTP_OPENAPI_FILE");
  env(app.add_option("--http-dashboard-dir", h.dashboard_dir,
                     "the dashboard's pages, served at /dashboard/ (empty: off)"),
      "FEED_HTTP_DASHBOARD_DIR");
  env(app.add_option("--http-uplot-dir", h.uplot_dir,
                     "uPlot's dist folder (npm uplot), served at /dashboard/uplot/"),
      "FEED_HTTP_UPLOT_DIR");

  auto& t = c.tls;
  auto& a = c.auth;
  env(app.add_option("--tls-cert-file", t.cert_file,
                     "PEM certificate chain of the gRPC and HTTP ports (empty: plaintext)"),
      "FEED_TLS_CERT_FILE");
  env(app.add_option("--tls-key-file", t.key_file, "PEM private key of --tls-cert-file"),
      "FEED_TLS_KEY_FILE");
  env(app.add_option("--tls-client-ca-file", t.client_ca_file,
                     "PEM CA bundle: mutual TLS, clients must present a certificate it verifies"),
      "FEED_TLS_CLIENT_CA_FILE");
  env(app.add_option("--tls-reload-interval-ms", t.reload_interval_ms,
                     "how often certificate files are checked for changes")
          ->check(CLI::Range(int64_t{100}, int64_t{3600000})),
      "FEED_TLS_RELOAD_INTERVAL_MS");
  env(app.add_option("--auth-jwt-hs-secret-file", a.jwt.hs_secret_file,
                     "file holding the HS256/384/512 JWT secret (at least 32 bytes)"),
      "FEED_AUTH_JWT_HS_SECRET_FILE");
  env(app.add_option("--auth-jwt-public-key-file", a.jwt.public_key_file,
                     "PEM public key for RS256/384/512 (RSA) or ES256/384/512 (EC) JWTs"),
      "FEED_AUTH_JWT_PUBLIC_KEY_FILE");
  env(app.add_option("--auth-jwt-issuer", a.jwt.issuer, "required JWT `iss` (empty: any)"),
      "FEED_AUTH_JWT_ISSUER");
  env(app.add_option("--auth-jwt-audience", a.jwt.audience,
                     "JWT `aud` must contain it (empty: any)"),
      "FEED_AUTH_JWT_AUDIENCE");
  env(app.add_option("--auth-jwt-leeway-s", a.jwt.leeway_s, "clock skew allowed for exp and nbf")
          ->check(CLI::Range(int64_t{0}, int64_t{600})),
      "FEED_AUTH_JWT_LEEWAY_S");
  env(app.add_option("--auth-token-file", a.token_file,
                     "static tokens: `TOKEN SUBJECT SCOPE...` and `mtls:IDENTITY SUBJECT "
                     "SCOPE...` lines"),
      "FEED_AUTH_TOKEN_FILE");
  env(app.add_option("--auth-rate-limit", a.rate_limit,
                     "requests/s per subject (token bucket; 0 = no limit)")
          ->check(CLI::Range(0.0, 1e7)),
      "FEED_AUTH_RATE_LIMIT");
  env(app.add_option("--auth-rate-burst", a.rate_burst,
                     "requests a subject may make at once (0 = max(rate, 1))")
          ->check(CLI::Range(0.0, 1e7)),
      "FEED_AUTH_RATE_BURST");
  env(app.add_option("--auth-reload-interval-ms", a.reload_interval_ms,
                     "how often key and token files are checked for changes")
          ->check(CLI::Range(int64_t{50}, int64_t{3600000})),
      "FEED_AUTH_RELOAD_INTERVAL_MS");
  env(app.add_option("--require-secure", c.require_secure,
                     "refuse to start without both TLS and authentication"),
      "FEED_REQUIRE_SECURE");
  env(app.add_option("--reflection", c.reflection,
                     "serve gRPC reflection (without a token, like health)"),
      "FEED_REFLECTION");
  auto& cl = c.cluster;
  env(app.add_option("--cluster-shards", cl.shards,
                     "cluster mode: the number of shards (fixed when the cluster is created); 0 "
                     "runs a single node")
          ->check(CLI::Range(0, 1024)),
      "FEED_CLUSTER_SHARDS");
  env(app.add_option("--cluster-node-id", cl.node_id,
                     "this node's id, stable across restarts (the group's static member id)"),
      "FEED_CLUSTER_NODE_ID");
  env(app.add_option("--cluster-advertise", cl.advertise,
                     "host:port clients reach this node at (default: --listen)"),
      "FEED_CLUSTER_ADVERTISE");
  env(app.add_option("--cluster-brokers", cl.brokers,
                     "brokers of the shard log (default: --kafka-brokers)"),
      "FEED_CLUSTER_BROKERS");
  env(app.add_option("--cluster-topic", cl.topic, "the shard log topic (one partition a shard)"),
      "FEED_CLUSTER_TOPIC");
  env(app.add_option("--cluster-group", cl.group, "the consumer group that assigns the shards"),
      "FEED_CLUSTER_GROUP");
  env(app.add_option("--cluster-session-timeout-ms", cl.session_timeout_ms,
                     "how long a silent node keeps its shards (the broker's minimum is 6000 "
                     "by default)")
          ->check(CLI::Range(int64_t{1000}, int64_t{3600000})),
      "FEED_CLUSTER_SESSION_TIMEOUT_MS");
  env(app.add_option("--cluster-log-timeout-ms", cl.log_timeout_ms,
                     "how long a claim or a round of appends to the shard log may take")
          ->check(CLI::Range(int64_t{100}, int64_t{600000})),
      "FEED_CLUSTER_LOG_TIMEOUT_MS");
  env(app.add_option("--cluster-rounds-in-flight", o.replication_rounds_in_flight,
                     "rounds of batches each shard may have on their way to the shard log at "
                     "once")
          ->check(CLI::Range(1, 64)),
      "FEED_CLUSTER_ROUNDS_IN_FLIGHT");
  env(app.add_option("--cluster-peer-ca-file", cl.peer_ca_file,
                     "with TLS: the CA bundle other nodes are verified by when the HTTP "
                     "gateway forwards a call to its shard's owner (default: system roots)"),
      "FEED_CLUSTER_PEER_CA_FILE");
  env(app.add_option("--cluster-replication-factor", cl.replication_factor,
                     "replication factor of the shard log when it is created")
          ->check(CLI::Range(1, 32)),
      "FEED_CLUSTER_REPLICATION_FACTOR");
  env(app.add_option("--cluster-min-insync-replicas", cl.min_insync_replicas,
                     "min.insync.replicas of the shard log when it is created")
          ->check(CLI::Range(1, 32)),
      "FEED_CLUSTER_MIN_INSYNC_REPLICAS");
  env(app.add_option("--metrics-basic-auth-file", c.metrics_basic_auth_file,
                     "`user:password` lines: /metrics asks for basic authentication"),
      "FEED_METRICS_BASIC_AUTH_FILE");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    std::cout << app.help();
    return ParseResult{std::nullopt, 0};
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(e.what());
  }
  st.durability = durability == "sync" ? storage::Durability::kSync : storage::Durability::kAsync;
  st.memtable_budget_bytes = static_cast<size_t>(memtable_mb) << 20;
  st.block_cache_bytes = static_cast<size_t>(block_cache_mb) << 20;
  k.json_values = value_format == "json";
  for (const auto& kv : kafka_properties) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError(
          fmt::format("--kafka-property: expected key=value, got '{}'", kv));
    }
    k.kafka_properties[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (absl::Status s = kafka_security(); !s.ok()) return s;
  if (l.max_hold_ttl_ms < o.default_hold_ttl_ms) {
    return absl::InvalidArgumentError(
        fmt::format("--hold-ttl-ms ({}) must not exceed --max-hold-ttl-ms ({})",
                    o.default_hold_ttl_ms, l.max_hold_ttl_ms));
  }
  if (c.listen.empty()) return absl::InvalidArgumentError("--listen: must not be empty");
  if (t.cert_file.empty() != t.key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert-file and --tls-key-file: give both (TLS) or neither (plaintext)");
  }
  if (!t.client_ca_file.empty() && t.cert_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-client-ca-file: mutual TLS needs --tls-cert-file and --tls-key-file");
  }
  if (c.require_secure && (!t.enabled() || !a.enabled())) {
    return absl::InvalidArgumentError(fmt::format(
        "--require-secure: refusing to start without {}",
        !t.enabled() && !a.enabled()
            ? "TLS (--tls-cert-file) and authentication (--auth-token-file or --auth-jwt-*)"
        : !t.enabled() ? "TLS (--tls-cert-file, --tls-key-file)"
                       : "authentication (--auth-token-file, --auth-jwt-hs-secret-file or "
                         "--auth-jwt-public-key-file)"));
  }
  if (st.path.empty()) return absl::InvalidArgumentError("--data-dir: must not be empty");
  if (absl::Status s = ValidateCluster(
          c, app.count("--http-listen") > 0 || std::getenv("FEED_HTTP_LISTEN") != nullptr);
      !s.ok()) {
    return s;
  }
  return ParseResult{std::move(c), 0};
}

}  // namespace feed::server
