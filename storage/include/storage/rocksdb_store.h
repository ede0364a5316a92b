// The production store: one RocksDB database, one column family per Table.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "storage/store.h"

namespace feed::storage {

// Whether a record of `table` has outlived its retention at now_ms (ms since the epoch).
using RecordExpiredFn = std::function<bool(Table table, std::string_view value, int64_t now_ms)>;

struct RocksDbOptions {
  std::string path = "./data";
  Durability durability = Durability::kSync;
  // Idempotency records older than this are dropped by compaction (reads also ignore them).
  int64_t idempotency_retention_ms = 24LL * 3600 * 1000;
  // Closed reservations (kReservations) and orders (kOrders) for which this returns true
  // are dropped when a compaction reaches them; the rule is the core's (core/history.h).
  // Empty keeps them all. Runs on RocksDB's compaction threads.
  RecordExpiredFn history_expired;
  // Block cache for reads (GetStock, snapshots).
  size_t block_cache_bytes = 64u << 20;
  // All memtables of all tables together (a shared WriteBufferManager): bounds the memory
  // that writes take before they are flushed, e.g. while the outbox grows during an outage.
  size_t memtable_budget_bytes = 32u << 20;
  // Background compaction and flush threads.
  int background_threads = 2;
  // Open with automatic compactions off until Store::StartCompactions(): a restart reads
  // every stock level and open hold first, and a compaction left over from before the
  // restart would take one of the two cores it has (bench/RESULTS.md, startup).
  bool defer_compactions = false;
  // Testing only: keep every byte written since a file's last sync in process memory, so
  // that SIGKILL drops it like a power cut would (the crash test's power-loss mode).
  bool simulate_power_loss = false;
  // Open without writing anything (a backup's verification); every write fails.
  bool read_only = false;
  // A store of data format 1 (an "outbox" table of single events, no journal) is refused
  // unless this is set (`--migrate`); then it is converted at open, never silently: each
  // outbox event from the relay cursor on becomes a journal entry of its own through this
  // function (its sequence and serialized events.v1.Event -> the entry's value), the tables
  // (written synchronously in format 1) are marked checkpointed up to the last sequence, and
  // the outbox table is dropped. A crash half-way leaves the outbox in place: run it again.
  std::function<std::string(uint64_t sequence, std::string_view event)> migrate_format_1;
};

// Opens (creating if missing) the database at options.path. Fails with a clear message when
// the directory is locked by another process or is not a database of ours.
absl::StatusOr<std::unique_ptr<Store>> OpenRocksDbStore(const RocksDbOptions& options);

}  // namespace feed::storage
