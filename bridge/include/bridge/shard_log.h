// Cluster mode's shard log over Kafka (docs/CLUSTER.md): partition s of one topic is shard
// s's log. The writer appends to an explicit partition with the idempotent producer and
// acks=all, so a record it reports appended is replicated and in partition order; the reader
// follows chosen partitions from chosen offsets. The bytes are opaque here: what they mean,
// and which of them count, is feed_cluster's (cluster/shard_ledger.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "bridge/kafka_security.h"

namespace feed::bridge {

struct ShardLogOptions {
  std::string brokers;  // bootstrap servers, e.g. "127.0.0.1:19092"
  std::string topic = "feed.shard-log.v1";
  std::string client_id = "inventory-feed-shard-log";
  // The cluster's shard count: the topic must have exactly this many partitions.
  int shards = 12;
  // Used when the topic is created (EnsureShardLogTopic).
  int replication_factor = 1;
  int min_insync_replicas = 1;
  // A record the brokers have not acknowledged by then fails (the acknowledgement point
  // then fails its batch: crash-only, never an answer that could be wrong).
  int64_t append_timeout_ms = 10000;
  // librdkafka properties for every client (producer, readers, group member), after
  // `security`'s; with TLS they must not set what `security` sets.
  std::map<std::string, std::string> kafka_properties;
  // Transport security of every client. The SASL password file is looked at every
  // credentials_check_ms and a new password is used from each client's next connection; a
  // changed CA file is read when the node restarts.
  KafkaSecurity security;
  int64_t credentials_check_ms = 1000;
};

// Creates the topic when it is missing (unclean leader election off, records kept for good,
// the options' replication and min.insync.replicas); FAILED_PRECONDITION when it exists with
// another partition count than options.shards, UNAVAILABLE when the brokers do not answer in
// `timeout_ms`.
absl::Status EnsureShardLogTopic(const ShardLogOptions& options, int64_t timeout_ms);

class ShardLogWriter {
 public:
  // The broker's offset for the record, or why it was not appended.
  using Done = absl::AnyInvocable<void(absl::StatusOr<int64_t> offset)>;

  static absl::StatusOr<std::unique_ptr<ShardLogWriter>> Open(const ShardLogOptions& options);
  virtual ~ShardLogWriter() = default;

  // Queues `value` for shard `shard`'s partition. `done` runs once, on the writer's delivery
  // thread; appends to one shard complete in the order they were made.
  virtual void Append(int32_t shard, std::string_view value, Done done) = 0;
  // Append, waiting for the outcome.
  absl::StatusOr<int64_t> AppendAndWait(int32_t shard, std::string_view value);
};

struct LoggedRecord {
  int32_t shard = 0;
  int64_t offset = 0;
  std::string value;
};

class ShardLogReader {
 public:
  static constexpr int64_t kFromBeginning = -2;  // the oldest record the topic keeps

  // Follows each (shard, offset) given: offset is the first record to read.
  static absl::StatusOr<std::unique_ptr<ShardLogReader>> Open(
      const ShardLogOptions& options, const std::vector<std::pair<int32_t, int64_t>>& from);
  virtual ~ShardLogReader() = default;

  // The records that arrived, at most `max`, waiting up to `timeout_ms` for the first; in log
  // order per shard. UNAVAILABLE when reading fails for good (the topic is gone, ...).
  virtual absl::StatusOr<std::vector<LoggedRecord>> Poll(int64_t timeout_ms, size_t max) = 0;
  // One past the shard's last record now, from the partition's leader.
  virtual absl::StatusOr<int64_t> EndOffset(int32_t shard, int64_t timeout_ms) = 0;
};

}  // namespace feed::bridge
