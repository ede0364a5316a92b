// The outbox relay: reads committed events from the store's journal (Table::kJournal, the
// outbox) in sequence order and publishes them to Kafka with an idempotent librdkafka
// producer. Its position (meta relay_cursor) moves past an event only after its delivery
// report says the record is persisted (acks=all), survives restarts, and is what lets the
// core's checkpointer delete journal entries. While the broker
// is unreachable the outbox grows on disk and the relay's memory stays bounded by
// max_in_flight. librdkafka types never leave bridge/src.
//
// Thread safety: Start/Shutdown from one thread; Notify, stats and kafka_reachable from any.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "bridge/kafka_security.h"
#include "storage/store.h"

namespace feed::bridge {

struct RelayOptions {
  std::string brokers;  // bootstrap servers, e.g. "127.0.0.1:19092"
  std::string client_id = "inventory-feed";
  std::string stock_topic = "inventory.stock.v1";       // key: SKU
  std::string order_status_topic = "orders.status.v1";  // key: order id
  std::string receipt_topic = "orders.receipts.v1";     // key: order id
  int partitions = 3;
  int replication_factor = 1;
  bool create_topics = true;
  bool json_values = false;  // false: serialized events.v1.Event; true: its JSON mapping
  std::string ce_source = "urn:inventory-feed";
  // Passed to librdkafka as is; they override the relay's defaults. With security.protocol
  // ssl or sasl_ssl they must not set what `security` sets (security.protocol,
  // ssl.ca.location, sasl.*): Create refuses the conflict.
  std::map<std::string, std::string> kafka_properties;

  // Transport security (bridge/README.md, "Security"). The relay re-reads the password file
  // and the CA file when they change on disk and replaces its producer to use them.
  KafkaSecurity security;
  // How often the relay looks at sasl_password_file and ssl_ca_file for changes.
  int64_t credentials_check_ms = 1000;
  // Records produced but not yet acknowledged, at most.
  size_t max_in_flight = 20000;
  // Outbox entries read per scan.
  size_t read_batch = 2000;
  // How long Shutdown waits for in-flight records before leaving them in the outbox.
  int64_t shutdown_flush_ms = 5000;
  // Idle poll period when nothing notifies the relay.
  int64_t idle_poll_ms = 100;
  // Exactly once into Kafka across restarts: before sending again from its cursor (a start,
  // a new producer, a failed delivery), the relay reads the topics' records timestamped since
  // the first event to send, minus tail_check_margin_ms, and does not send again the events
  // it finds there (by ce_id). Off: at-least-once (consumers deduplicate by event id).
  bool skip_delivered = true;
  int64_t tail_check_margin_ms = 60000;
  // How long one check may take before it is retried (nothing is sent meanwhile).
  int64_t tail_check_timeout_ms = 30000;
};

struct RelayStats {
  uint64_t delivered = 0;  // records acknowledged by Kafka since start
  // Delivery reports with an error and records librdkafka refused (both retried from the
  // outbox), plus outbox entries skipped because they do not parse as an Event.
  uint64_t failed = 0;
  // Events not sent again because the tail check found them in Kafka already.
  uint64_t skipped_delivered = 0;
  uint64_t outbox_depth = 0;              // events committed but not yet acknowledged by Kafka
  int64_t oldest_undelivered_age_ms = 0;  // 0 when the outbox is empty
  uint64_t next_sequence_to_send = 0;
  bool kafka_reachable = false;
  // Commit-to-acknowledgement latency of recent records (ms).
  double lag_p50_ms = 0;
  double lag_p99_ms = 0;
};

// Events sent again on request (AdminService.Replay): those kept in the journal
// (core::CoreOptions::event_retention_ms / _bytes), with their original event ids and headers.
struct ReplayRequest {
  uint64_t from_sequence = 0;
  uint64_t to_sequence = 0;  // 0: up to the last committed
  std::string topic;         // empty: all three; else only the events of this topic
  uint32_t max_records_per_second = 10000;
  int64_t flush_timeout_ms = 60000;  // how long the last records may take to be acknowledged
};
struct ReplayResult {
  uint64_t first_sequence = 0;
  uint64_t last_sequence = 0;
  uint64_t records_sent = 0;
  uint64_t records_delivered = 0;
  uint64_t skipped_other_topics = 0;
};

class Relay {
 public:
  // Validates options and creates the producer. The topics (when create_topics) are created
  // by the relay thread once the broker answers, before the first record is produced.
  // Does not need the broker to be up: an unreachable broker is retried forever.
  // `last_sequence`, when given, tells the last committed sequence (for stats().outbox_depth;
  // without it the relay counts the journal's events).
  static absl::StatusOr<std::unique_ptr<Relay>> Create(
      storage::Store& store, const RelayOptions& options,
      std::function<uint64_t()> last_sequence = nullptr);
  virtual ~Relay() = default;

  virtual void Start() = 0;
  // Flushes what is in flight within options.shutdown_flush_ms; the rest stays in the outbox.
  virtual void Shutdown() = 0;
  // New events were committed (called from the core's feed-publisher thread: must not block).
  virtual void Notify() = 0;
  virtual RelayStats stats() const = 0;
  virtual bool kafka_reachable() const = 0;
  // Sends the kept events from_sequence..to_sequence again with a producer of its own, at
  // most max_records_per_second, beside the live relay (whose order per key it does not
  // touch); returns once they are acknowledged. INVALID_ARGUMENT names a bad field;
  // OUT_OF_RANGE names the oldest sequence kept when from_sequence is older; UNAVAILABLE when
  // records were not acknowledged in time. Any thread but the relay's; blocks.
  virtual absl::StatusOr<ReplayResult> Replay(const ReplayRequest& request) = 0;
};

}  // namespace feed::bridge
