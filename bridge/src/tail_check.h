// What already reached Kafka: before the relay sends again from its cursor (a restart after a
// crash, a restored backup, a new producer after a fatal error or new credentials), it reads
// the topics' records timestamped since the cursor's event and collects their ce_id headers,
// so that it sends only the events that are not there. Records carry their event's commit time
// as their timestamp (relay.cc), so the records of every event from the cursor on are at or
// after it.
//
// Why skipping is safe and keeps each key's order: the producer is idempotent, so what one
// producer session persisted in a partition is a prefix of what it produced there, in sequence
// order; the events found are skipped, the rest follow them. Only ids actually read are
// skipped: an event that is not there is never skipped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "kafka_handles.h"

namespace feed::bridge::internal {

struct TailCheckRequest {
  // The client's configuration (brokers, security), without callbacks; consumed.
  ConfHandle conf;
  std::vector<std::string> topics;
  // Records timestamped before this (ms since the epoch) are not read.
  int64_t since_ms = 0;
  // The whole check; past it, DEADLINE_EXCEEDED (the relay tries again later).
  int64_t timeout_ms = 30000;
};

struct TailCheckResult {
  absl::flat_hash_set<std::string> ids;  // ce_id of each record read
  uint64_t records = 0;                  // records read (duplicates included)
  int partitions = 0;                    // partitions that had records since since_ms
};

// Reads every partition of `topics` from the first record at or after since_ms up to its end
// as of the call. A topic that does not exist holds nothing.
absl::StatusOr<TailCheckResult> ReadDeliveredIds(TailCheckRequest request);

}  // namespace feed::bridge::internal
