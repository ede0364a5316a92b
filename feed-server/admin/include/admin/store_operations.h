// The AdminService's operations, free of transport types: the online audit
// (core/store_audit.h) and backups (backup.h), each on a thread of its own so no caller's
// thread waits on a scan of the whole store, one of each kind at a time (a second gets
// ABORTED while one runs), with the last audit's outcome kept for the metrics.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "admin/backup.h"
#include "admin/v1/admin.pb.h"
#include "bridge/relay.h"
#include "core/clock.h"
#include "core/options.h"
#include "storage/store.h"

namespace feed::admin {

template <class T>
using Done = absl::AnyInvocable<void(absl::StatusOr<T>) &&>;

// The last audit, for the metrics: zeros before the first.
struct AuditStats {
  uint64_t runs = 0;
  int64_t last_checked_at_ms = 0;
  int64_t last_duration_ms = 0;
  uint64_t last_violations = 0;
};

struct StoreOperationsOptions {
  // Where backups go (a folder per backup); empty: backups are off.
  std::string backup_dir;
  // The most violations one audit lists (all are counted).
  uint32_t max_listed_violations = 10000;
  // Cluster mode: the store is this node's copy of a shard; its backups go to
  // <backup_dir>/<name>/shard-<n>, so that one name holds a node's backup of every shard.
  std::optional<ShardOfStore> shard;
};

class StoreOperations {
 public:
  // `relay` (null without Kafka) serves Replay; it must outlive this.
  StoreOperations(storage::Store& store, const core::Clock& clock,
                  const core::CoreOptions& core_options, StoreOperationsOptions options,
                  bridge::Relay* relay = nullptr);
  // Waits for a running audit or backup.
  ~StoreOperations();

  // `done` runs on the operation's thread.
  void CheckStore(const ::admin::v1::CheckStoreRequest& request,
                  Done<::admin::v1::CheckStoreResponse> done);
  void Backup(const ::admin::v1::BackupRequest& request, Done<::admin::v1::BackupResponse> done);
  void Replay(const ::admin::v1::ReplayRequest& request, Done<::admin::v1::ReplayResponse> done);

  AuditStats audit_stats() const;

 private:
  // One operation of a kind at a time, on `thread`.
  struct Slot {
    std::mutex mu;
    std::thread thread;
    std::atomic<bool> busy{false};
  };
  // The work returns how to answer, which runs once the slot is free again.
  using Answer = absl::AnyInvocable<void() &&>;
  using Work = absl::AnyInvocable<Answer() &&>;
  // False when the slot's operation is already running.
  bool Start(Slot& slot, Work work);
  // Runs `work` on the slot's thread and answers `done` with its result once the slot is
  // free again; ABORTED ("<what> is running already") when the slot is busy.
  template <class Resp>
  void Launch(Slot& slot, std::string_view what, Done<Resp> done,
              absl::AnyInvocable<absl::StatusOr<Resp>() &&> work);

  storage::Store& store_;
  const core::Clock& clock_;
  const core::CoreOptions core_options_;
  const StoreOperationsOptions options_;
  bridge::Relay* const relay_;
  Slot audit_, backup_, replay_;
  mutable std::mutex stats_mu_;
  AuditStats stats_;
};

}  // namespace feed::admin
