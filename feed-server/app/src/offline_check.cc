// feed-server --check: the audit of a stopped store.
#include "app/feed_server.h"
#include "core/clock.h"
#include "core/store_audit.h"
#include "storage/rocksdb_store.h"

namespace feed::server {

absl::StatusOr<::admin::v1::CheckStoreResponse> CheckStoreOffline(const ServerConfig& config) {
  storage::RocksDbOptions options = config.storage;
  options.read_only = true;
  auto store = storage::OpenRocksDbStore(options);
  if (!store.ok()) return store.status();
  core::SystemClock clock;
  return core::AuditStore(**store, clock, config.core, config.admin.max_listed_violations);
}

}  // namespace feed::server
