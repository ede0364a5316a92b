// The feed_state gauges of /metrics: what the core, the store, the allocator and the Kafka
// relay hold right now, refreshed once a second by the server's housekeeper.
#pragma once

#include "admin/store_operations.h"
#include "bridge/relay.h"
#include "core/inventory_core.h"
#include "heap_stats.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"
#include "storage/store.h"

namespace feed::server {

class StateGauges {
 public:
  explicit StateGauges(prometheus::Registry& registry);

  void Set(const core::CoreStats& core);
  void Set(const storage::Store::MemoryUsage& store);
  // Counters that follow the store's running totals (Store::write_counts).
  void Set(const storage::Store::WriteCounts& written);
  void Set(const HeapStats& heap);
  void Set(const bridge::RelayStats& relay);
  // The last online audit (AdminService.CheckStore).
  void Set(const admin::AuditStats& audit);
  void CountHeapRelease() { heap_releases_->Increment(); }

 private:
  prometheus::Family<prometheus::Gauge>& family_;
  prometheus::Gauge& queue_depth_;
  prometheus::Gauge& unpublished_events_;
  prometheus::Gauge& open_holds_;
  prometheus::Gauge& last_sequence_;
  prometheus::Gauge& overlay_records_;
  prometheus::Gauge& overlay_bytes_;
  prometheus::Gauge& checkpoint_sequence_;
  prometheus::Gauge& outbox_depth_;
  prometheus::Gauge& outbox_oldest_age_;
  prometheus::Gauge& kafka_delivered_;
  prometheus::Gauge& kafka_failed_;
  prometheus::Gauge& kafka_skipped_;
  prometheus::Gauge& kafka_up_;
  prometheus::Gauge& kafka_lag_p50_;
  prometheus::Gauge& kafka_lag_p99_;
  prometheus::Gauge& rocksdb_memtables_;
  prometheus::Gauge& rocksdb_block_cache_;
  prometheus::Gauge& rocksdb_table_readers_;
  prometheus::Gauge& heap_allocated_;
  prometheus::Gauge& heap_free_;
  prometheus::Gauge& heap_cached_;
  prometheus::Gauge& audit_runs_;
  prometheus::Gauge& audit_violations_;
  prometheus::Gauge& audit_at_;
  prometheus::Gauge& audit_seconds_;
  prometheus::Counter* heap_releases_;
  prometheus::Counter* reservations_;
  uint64_t reservations_seen_ = 0;  // what reservations_ shows so far
  prometheus::Family<prometheus::Counter>& store_ops_;
  prometheus::Counter &store_commits_, &store_puts_, &store_deletes_, &store_range_deletes_;
  storage::Store::WriteCounts written_;  // what the counters show so far
};

}  // namespace feed::server
