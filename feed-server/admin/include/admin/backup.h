// Backups of a store for operators: a consistent copy with a manifest of checksums
// (admin.v1.BackupManifest), its verification, and a restore that starts a new timeline.
// Free of transport types: the AdminService handler and `feed-server --restore-from` call it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "admin/v1/admin.pb.h"
#include "storage/store.h"

namespace feed::admin {

// Written last into a backup's folder: without it the backup is incomplete.
inline constexpr std::string_view kManifestFile = "BACKUP-MANIFEST.json";

// A backup's folder name: 1 to 128 of letters, digits, '.', '_', '-', not starting with '.'.
absl::Status ValidateBackupName(std::string_view name);

// Cluster mode: the store is a node's copy of `shard` of a cluster of `shard_count`.
struct ShardOfStore {
  uint32_t shard = 0;
  uint32_t shard_count = 0;
};

// Copies `store` into `dir` (which must not exist; its parent must): a store checkpoint (hard
// links where the folder is on the same file system), the facts read back from the copy
// itself (store id, last sequence, relay cursor, checkpoint, format; in cluster mode the
// shard and the first log offset the copy does not hold), then the manifest with every file's
// size and SHA-256. A failure removes what it wrote.
absl::StatusOr<::admin::v1::BackupManifest> WriteBackup(
    storage::Store& store, const std::string& dir, int64_t now_ms,
    std::optional<ShardOfStore> shard = std::nullopt);

// The manifest of the backup in `dir`, once every file it names is there with its size and
// checksum and nothing else is (FAILED_PRECONDITION naming the file otherwise; DATA_LOSS for a
// checksum that does not match).
absl::StatusOr<::admin::v1::BackupManifest> VerifyBackup(const std::string& dir);

// Verifies the backup in `backup_dir`, copies it into `data_dir` (absent or empty: a
// non-empty folder is refused) and starts a new timeline there: the store id is dropped, so
// the server that opens it picks a new one and no event it writes reuses an id of the lost
// timeline's; the old id stays in meta previous_store_id. A backup of a cluster shard is
// refused.
absl::StatusOr<::admin::v1::BackupManifest> RestoreBackup(const std::string& backup_dir,
                                                          const std::string& data_dir);

// The folder of `shard` in a cluster backup: "shard-<n>".
std::string ShardFolderName(uint32_t shard);

// Cluster mode: restores every shard-<n> backup folder in `backup_dir` (a `feedctl backup`
// of a cluster node, or some of its shards) into the store at `store_path(n)`. Each must be a
// verified backup of shard n of a cluster of `shard_count`, and each target folder absent or
// empty; all is checked before anything is copied. The node then reads each shard's log from
// the backup's offset on, and the other shards from the log's start. The store ids are
// dropped as in RestoreBackup.
absl::StatusOr<std::vector<::admin::v1::BackupManifest>> RestoreShardBackups(
    const std::string& backup_dir, uint32_t shard_count,
    const std::function<std::string(uint32_t shard)>& store_path);

}  // namespace feed::admin
