// Limits and tunables of the core. Every limit is enforced with INVALID_ARGUMENT naming the
// field, or RESOURCE_EXHAUSTED for queue depths.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/replicated_log.h"

namespace feed::core {

struct Limits {
  // sku, location, reservation/order/customer ids and idempotency keys: 1..max_id_length
  // characters of [A-Za-z0-9] and . _ - : / @ + = # (validation.cc); nothing else.
  size_t max_id_length = 128;
  // Quantity of one line, and |quantity| of an adjustment.
  int64_t max_quantity = 1'000'000;
  size_t max_lines_per_request = 100;
  // Adjustments in one BatchAdjustStock call.
  size_t max_batch_adjustments = 1000;
  // Keys in one GetStock / WatchStock / Feed subscribe.
  size_t max_keys_per_read = 1000;
  // Free-text fields (reason, details, payment reference).
  size_t max_text_length = 512;
  int64_t min_hold_ttl_ms = 1'000;
  int64_t max_hold_ttl_ms = 7LL * 24 * 3600 * 1000;
};

struct CoreOptions {
  Limits limits;
  // Location used when a mutation names none.
  std::string default_location = "default";
  // What generated reservation and order ids carry after "rsv-" / "ord-" and before the
  // sequence; empty: the store id's first 6 characters. Cluster mode sets "s<shard>", so an id
  // names its shard on every node and across owners (the sequence continues in the log).
  std::string generated_id_tag;
  int64_t default_hold_ttl_ms = 15 * 60 * 1000;
  // How long an idempotency key is remembered.
  int64_t idempotency_retention_ms = 24LL * 3600 * 1000;
  // How long closed reservations and finished orders are kept (core/history.h); 0 keeps
  // them for good.
  int64_t history_retention_ms = 30LL * 24 * 3600 * 1000;
  // Most commands the writer applies in one WriteBatch.
  size_t max_batch_commands = 1024;
  // Commands waiting for the writer; beyond it calls fail fast with RESOURCE_EXHAUSTED.
  size_t max_queue_depth = 100'000;
  // Committed events kept in memory so streams can resume from a sequence number (about
  // 1 KB each: 20,000 is ~20 MB, 10 s of history at 2,000 changes/s).
  size_t change_feed_retention = 20'000;
  // The writer expires due holds this often; 0 disables the automatic sweep (tests call
  // ExpireDue themselves with a fake clock).
  int64_t sweep_interval_ms = 1'000;
  // Most holds expired in one sweep batch (the rest wait for the next sweep).
  size_t max_expiries_per_sweep = 10'000;
  // Each batch is committed as one journal entry; its table changes wait in memory until a
  // checkpoint writes them into the tables, every checkpoint_interval_ms or once they hold
  // checkpoint_bytes of memory. Larger: fewer table writes (changes of one key coalesce),
  // more memory, a longer journal replay after a crash.
  int64_t checkpoint_interval_ms = 5'000;
  size_t checkpoint_bytes = 32u << 20;
  // Delivered events stay in the journal this long (ms), and while the journal holds at most
  // event_retention_bytes, so that they can be replayed to Kafka (AdminService.Replay); the
  // checkpointer trims what is older or over the size, oldest first (never what the relay has
  // yet to send or the tables do not hold yet). 0 and 0: trimmed as soon as delivered and
  // checkpointed (the library's default; the server's flags keep 7 days within 1 GiB).
  int64_t event_retention_ms = 0;
  uint64_t event_retention_bytes = 0;
  // Called after each committed round of batches, on the thread that wrote it (the
  // committer, or the writer when it wrote an idle batch itself). Must not block.
  std::function<void(size_t commands, size_t events, double commit_seconds)> on_batch_committed;
  // Cluster mode: the shard's log every batch must reach before it counts (replicated_log.h).
  // Null: single node, the local commit (with its WAL sync) is the acknowledgement point.
  std::shared_ptr<ReplicatedLog> replicated_log;
  // With a replicated log: how many rounds of batches may be on their way to it at once (at
  // least 1: each round waits for the one before).
  size_t replication_rounds_in_flight = 4;
};

}  // namespace feed::core
