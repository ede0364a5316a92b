#include "state_gauges.h"

namespace feed::server {

namespace {
double D(uint64_t v) { return static_cast<double>(v); }
}  // namespace

StateGauges::StateGauges(prometheus::Registry& registry)
    : family_(prometheus::BuildGauge()
                  .Name("feed_state")
                  .Help("Core and relay state")
                  .Register(registry)),
      queue_depth_(family_.Add({{"what", "writer_queue_depth"}})),
      unpublished_events_(family_.Add({{"what", "unpublished_events"}})),
      open_holds_(family_.Add({{"what", "open_holds"}})),
      last_sequence_(family_.Add({{"what", "last_sequence"}})),
      overlay_records_(family_.Add({{"what", "uncheckpointed_records"}})),
      overlay_bytes_(family_.Add({{"what", "uncheckpointed_bytes"}})),
      checkpoint_sequence_(family_.Add({{"what", "checkpoint_sequence"}})),
      outbox_depth_(family_.Add({{"what", "outbox_depth"}})),
      outbox_oldest_age_(family_.Add({{"what", "outbox_oldest_age_seconds"}})),
      kafka_delivered_(family_.Add({{"what", "kafka_delivered"}})),
      kafka_failed_(family_.Add({{"what", "kafka_failed"}})),
      kafka_skipped_(family_.Add({{"what", "kafka_skipped_delivered"}})),
      kafka_up_(family_.Add({{"what", "kafka_reachable"}})),
      kafka_lag_p50_(family_.Add({{"what", "kafka_commit_to_ack_p50_ms"}})),
      kafka_lag_p99_(family_.Add({{"what", "kafka_commit_to_ack_p99_ms"}})),
      rocksdb_memtables_(family_.Add({{"what", "rocksdb_memtables_bytes"}})),
      rocksdb_block_cache_(family_.Add({{"what", "rocksdb_block_cache_bytes"}})),
      rocksdb_table_readers_(family_.Add({{"what", "rocksdb_table_readers_bytes"}})),
      heap_allocated_(family_.Add({{"what", "heap_allocated_bytes"}})),
      heap_free_(family_.Add({{"what", "heap_free_bytes"}})),
      heap_cached_(family_.Add({{"what", "heap_cached_bytes"}})),
      audit_runs_(family_.Add({{"what", "audits"}})),
      audit_violations_(family_.Add({{"what", "audit_violations"}})),
      audit_at_(family_.Add({{"what", "audit_last_run_timestamp_seconds"}})),
      audit_seconds_(family_.Add({{"what", "audit_last_duration_seconds"}})),
      heap_releases_(&prometheus::BuildCounter()
                          .Name("feed_heap_releases_total")
                          .Help("times free heap pages went back to the OS (--max-free-heap-mb)")
                          .Register(registry)
                          .Add({})),
      reservations_(&prometheus::BuildCounter()
                         .Name("feed_reservations_total")
                         .Help("holds placed (Reserve, Feed reserve, CreateOrder) since start")
                         .Register(registry)
                         .Add({})),
      store_ops_(prometheus::BuildCounter()
                     .Name("feed_store_operations_total")
                     .Help("operations committed to the store, of every writer (core and relay); "
                           "op=commit counts the write groups")
                     .Register(registry)),
      store_commits_(store_ops_.Add({{"op", "commit"}})),
      store_puts_(store_ops_.Add({{"op", "put"}})),
      store_deletes_(store_ops_.Add({{"op", "delete"}})),
      store_range_deletes_(store_ops_.Add({{"op", "delete_range"}})) {}

void StateGauges::Set(const core::CoreStats& core) {
  queue_depth_.Set(D(core.queue_depth));
  unpublished_events_.Set(D(core.unpublished_events));
  open_holds_.Set(D(core.held_reservations));
  last_sequence_.Set(D(core.last_sequence));
  overlay_records_.Set(D(core.overlay_records));
  overlay_bytes_.Set(D(core.overlay_bytes));
  checkpoint_sequence_.Set(D(core.checkpoint_sequence));
  reservations_->Increment(D(core.reservations_made - reservations_seen_));
  reservations_seen_ = core.reservations_made;
}

void StateGauges::Set(const storage::Store::MemoryUsage& store) {
  rocksdb_memtables_.Set(D(store.memtables_bytes));
  rocksdb_block_cache_.Set(D(store.block_cache_bytes));
  rocksdb_table_readers_.Set(D(store.table_readers_bytes));
}

void StateGauges::Set(const storage::Store::WriteCounts& written) {
  store_commits_.Increment(D(written.commits - written_.commits));
  store_puts_.Increment(D(written.puts - written_.puts));
  store_deletes_.Increment(D(written.deletes - written_.deletes));
  store_range_deletes_.Increment(D(written.range_deletes - written_.range_deletes));
  written_ = written;
}

void StateGauges::Set(const HeapStats& heap) {
  heap_allocated_.Set(D(heap.allocated_bytes));
  heap_free_.Set(D(heap.free_bytes));
  heap_cached_.Set(D(heap.cached_bytes));
}

void StateGauges::Set(const bridge::RelayStats& relay) {
  outbox_depth_.Set(D(relay.outbox_depth));
  outbox_oldest_age_.Set(static_cast<double>(relay.oldest_undelivered_age_ms) / 1000.0);
  kafka_delivered_.Set(D(relay.delivered));
  kafka_failed_.Set(D(relay.failed));
  kafka_skipped_.Set(D(relay.skipped_delivered));
  kafka_up_.Set(relay.kafka_reachable ? 1 : 0);
  kafka_lag_p50_.Set(relay.lag_p50_ms);
  kafka_lag_p99_.Set(relay.lag_p99_ms);
}

void StateGauges::Set(const admin::AuditStats& audit) {
  audit_runs_.Set(D(audit.runs));
  audit_violations_.Set(D(audit.last_violations));
  audit_at_.Set(static_cast<double>(audit.last_checked_at_ms) / 1000.0);
  audit_seconds_.Set(static_cast<double>(audit.last_duration_ms) / 1000.0);
}

}  // namespace feed::server
